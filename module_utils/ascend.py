"""Huawei Ascend driver, firmware and CANN: installed versions and the install order.

Facts: docs/platforms.md (Ascend 910B) -- first install: driver, then firmware;
upgrade: firmware, then driver; then the CANN toolkit, the 910b ops/kernels package
and nnal.  Installed versions are in the components' ``version.info`` files.
"""
from __future__ import annotations

import re

# Installation order after the driver/firmware pair.
CANN_ORDER = ("toolkit", "kernels", "nnal")
# Installer arguments: first install / upgrade of an installed component.
ARGS = {
    "driver": (["--full", "--install-for-all"], ["--upgrade"]),
    "firmware": (["--full"], ["--upgrade"]),
    "toolkit": (["--full"], ["--upgrade"]),
    "kernels": (["--install"], ["--upgrade"]),
    "nnal": (["--install"], ["--upgrade"]),
}


class AscendError(Exception):
    pass


def parse_version_info(text: str) -> str | None:
    """``Version=24.1.0`` (any case, ``=`` or ``:``) from a version.info file."""
    match = re.search(r"^\s*version\s*[=:]\s*(\S+)", text or "", re.IGNORECASE | re.MULTILINE)
    return match.group(1) if match else None


def steps(installed: dict, wanted: dict) -> list:
    """The installer runs, in order: ``[{"component", "version", "args", "upgrade"}]``.

    ``installed``/``wanted`` map component names to versions (None: not installed /
    not managed).  Driver and firmware: a first install goes driver first, an
    upgrade firmware first.
    """
    unknown = set(wanted) - set(ARGS)
    if unknown:
        raise AscendError("ascend_cann_packages: unknown component(s) %s; known: %s"
                          % (", ".join(sorted(unknown)), ", ".join(ARGS)))
    pending = [c for c in ARGS if wanted.get(c) and installed.get(c) != wanted[c]]
    pair = ["driver", "firmware"] if not installed.get("driver") else ["firmware", "driver"]
    order = [c for c in pair if c in pending] + [c for c in CANN_ORDER if c in pending]
    return [{"component": c, "version": wanted[c], "upgrade": bool(installed.get(c)),
             "args": ARGS[c][1 if installed.get(c) else 0]} for c in order]
