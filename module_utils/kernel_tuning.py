"""Kernel tuning logic for the os_tuning role: sysctl validation and THP control.

Plain Python (no Ansible imports) so that it is unit-tested directly; the modules
in ``library/`` are thin wrappers around it.
"""
from __future__ import annotations

import os
import re

# Kernel parameters whose values the project knows the valid range of.  Anything
# else must at least exist on the host and hold integers (or words, for the few
# string-valued knobs), so typos such as ``vm.swapiness`` fail before a change.
# Ranges follow Documentation/admin-guide/sysctl/{vm,net}.rst.
KNOWN_RANGES = {
    "vm.swappiness": (0, 200),
    "vm.overcommit_memory": (0, 2),
    "vm.overcommit_ratio": (0, 2**31 - 1),
    "vm.max_map_count": (1, 2**31 - 1),
    "vm.dirty_ratio": (0, 100),
    "vm.dirty_background_ratio": (0, 100),
    "net.core.somaxconn": (1, 2**31 - 1),
    "net.ipv4.tcp_max_syn_backlog": (1, 2**31 - 1),
    "fs.file-max": (1, 2**63 - 1),
}

KEY_PATTERN = re.compile(r"^[a-z0-9_]+(\.[A-Za-z0-9_\-]+)+$")

THP_ENABLED_MODES = ("always", "madvise", "never")
THP_DEFRAG_MODES = ("always", "defer", "defer+madvise", "madvise", "never")


class TuningError(ValueError):
    """An invalid setting; the message names the variable and the reason."""


def sysctl_path(key: str, proc_root: str = "/proc/sys") -> str:
    return os.path.join(proc_root, *key.split("."))


def normalize_value(value) -> str:
    """Render a sysctl value the way /proc/sys and sysctl.conf spell it."""
    if isinstance(value, bool):
        raise TypeError("a boolean is not a kernel parameter value; use 0 or 1")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, (list, tuple)):
        return "\t".join(normalize_value(v) for v in value)
    if isinstance(value, str) and value.strip():
        return " ".join(value.split())
    raise TypeError("expected an integer or a non-empty string, got %r" % (value,))


def validate_sysctl(settings: dict, variable: str = "settings",
                    proc_root: str = "/proc/sys") -> dict:
    """Check every setting; return ``{key: value-as-string}`` or raise TuningError.

    All problems are collected so an operator fixes them in one round.
    """
    if not isinstance(settings, dict):
        raise TuningError("%s must be a dict of kernel parameter: value" % variable)
    problems, result = [], {}
    for key in sorted(settings):
        where = "%s[%r]" % (variable, key)
        if not isinstance(key, str) or not KEY_PATTERN.match(key):
            problems.append("%s: %r is not a kernel parameter name (like vm.swappiness)"
                            % (where, key))
            continue
        try:
            value = normalize_value(settings[key])
        except TypeError as exc:
            problems.append("%s: %s" % (where, exc))
            continue
        if key in KNOWN_RANGES:
            low, high = KNOWN_RANGES[key]
            if not re.fullmatch(r"-?\d+", value) or not low <= int(value) <= high:
                problems.append("%s=%s is out of range: the kernel accepts %d to %d"
                                % (where, value, low, high))
                continue
        if proc_root is not None and not os.path.exists(sysctl_path(key, proc_root)):
            problems.append("%s: this host's kernel has no such parameter (%s missing)"
                            % (where, sysctl_path(key, proc_root)))
            continue
        result[key] = value
    if problems:
        raise TuningError("; ".join(problems))
    return result


def merge_sysctl(layers, proc_root: str = "/proc/sys") -> dict:
    """Validate each ``(variable, settings)`` layer; later layers win.

    Every layer's problems are reported together, each naming its own variable.
    """
    problems, merged = [], {}
    for variable, settings in layers:
        try:
            merged.update(validate_sysctl(settings, variable, proc_root))
        except TuningError as exc:
            problems.append(str(exc))
    if problems:
        raise TuningError("; ".join(problems))
    return merged


def read_sysctl_file(path: str) -> dict:
    """``key=value`` lines of a sysctl.d file, the last of a key winning as ``sysctl -p`` reads it.

    Comments (``#``, ``;``), blank lines and lines without ``=`` are skipped; a missing file
    holds nothing.
    """
    try:
        with open(path) as handle:
            lines = handle.read().splitlines()
    except FileNotFoundError:
        return {}
    values = {}
    for line in lines:
        line = line.strip()
        if not line or line.startswith(("#", ";")) or "=" not in line:
            continue
        key, value = line.split("=", 1)
        values[key.strip()] = value.strip()
    return values


def sysctl_drift(settings: dict, sysctl_file: str, proc_root: str = "/proc/sys") -> dict:
    """The settings whose line in ``sysctl_file`` or live value differs from the wanted one.

    A setting is in place when the file's last line for it holds the value as written
    (``ansible.posix.sysctl`` compares the text) and the running kernel shows the same
    words (it compares them split on whitespace, as /proc/sys separates them by tabs).
    """
    written = read_sysctl_file(sysctl_file)
    drift = {}
    for key, value in sorted(settings.items()):
        try:
            with open(sysctl_path(key, proc_root)) as handle:
                live = handle.read().split()
        except OSError:
            live = None
        if written.get(key) != value or live != value.split():
            drift[key] = value
    return drift


def parse_thp(text: str) -> str:
    """``always [madvise] never`` -> ``madvise`` (the bracketed word is in force)."""
    match = re.search(r"\[([^\]]+)\]", text)
    if not match:
        raise ValueError("unrecognised transparent_hugepage contents: %r" % text.strip())
    return match.group(1)


def thp_plan(sysfs_root: str, wanted: dict) -> dict:
    """Return ``{knob: (current, wanted)}`` for each knob whose value must change.

    ``wanted`` maps ``enabled``/``defrag`` to a mode; None leaves a knob alone.
    """
    changes = {}
    for knob, mode in sorted(wanted.items()):
        if mode is None:
            continue
        allowed = THP_ENABLED_MODES if knob == "enabled" else THP_DEFRAG_MODES
        if mode not in allowed:
            raise TuningError("transparent_hugepage %s: %r is not one of %s"
                              % (knob, mode, ", ".join(allowed)))
        path = os.path.join(sysfs_root, knob)
        try:
            with open(path) as handle:
                current = parse_thp(handle.read())
        except FileNotFoundError:
            raise TuningError("%s does not exist: this kernel has no transparent "
                              "hugepage support to configure" % path) from None
        if current != mode:
            changes[knob] = (current, mode)
    return changes


def thp_apply(sysfs_root: str, changes: dict) -> None:
    for knob, (_current, mode) in sorted(changes.items()):
        path = os.path.join(sysfs_root, knob)
        try:
            with open(path, "w") as handle:
                handle.write(mode)
        except OSError as exc:
            raise TuningError("cannot write %s: %s (is /sys mounted read-only?)"
                              % (path, exc.strerror)) from None
