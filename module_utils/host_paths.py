"""Paths typed in the inventory that the roles write into unit files, command lines and
configurations: ``ExecStart=`` (vllm_runtime_root), a ``bash -c '...'`` line that
sources scripts (ascend_cann_root), ``WorkingDirectory=``/``ReadWritePaths=``
(hf_mirror_root), a daemon's ``ARGS=`` line (monitoring_storage_path).  There a space
splits one path into two, ``%`` is a systemd specifier, ``$`` expands a variable and a
quote ends the string, so only absolute paths of portable file-name characters
(POSIX's portable filename character set, and ``+``) pass.

Plain Python, no Ansible imports; ``library/unit_paths.py`` wraps it.
"""
from __future__ import annotations

import re

SAFE = re.compile(r"(/[A-Za-z0-9._+-]+)+")
WHY = ("it is written into unit files and command lines, where a space splits it, '%' is a systemd specifier, "
       "'$' expands a variable and a quote ends the string")


def problem(name: str, value) -> str:
    """Why ``value`` cannot be the path ``name`` (empty when it can)."""
    if (isinstance(value, str) and SAFE.fullmatch(value)
            and not any(part in (".", "..") for part in value.split("/"))):
        return ""
    return ("%s: %r is not an absolute path of letters, digits and '._+-' (no '.' or '..' part, no trailing '/'); "
            "%s" % (name, value, WHY))


def problems(paths: dict) -> list:
    """The problem of each path (variable name -> value), by variable name."""
    return [found for name, value in sorted(paths.items()) for found in [problem(name, value)] if found]
