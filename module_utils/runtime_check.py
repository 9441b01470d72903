"""Decisions of the vllm_runtime role, made before anything is installed:
which release of the engine, which Python, and whether the NVIDIA driver can run it."""
from __future__ import annotations

import re

from ansible.module_utils.wheel_tags import version_tuple


def in_range(version: str, low: str, high: str) -> bool:
    """low <= major.minor < high."""
    return version_tuple(low) <= version_tuple(version)[:2] < version_tuple(high)


def pick_release(releases: dict, requested: str, glibc: str | None) -> tuple[str | None, str | None]:
    """(version, problem).  ``releases`` is one engine's part of the version table
    (``vllm_versions.RELEASES``).  Empty ``requested``: the default, or, when the host's
    glibc is older than the default needs, the newest release that installs there."""
    versions = releases["versions"]
    if requested:
        if requested not in versions:
            return None, ("vllm_fleet_engine_version: %s is not in the release matrix (%s)"
                          % (requested, ", ".join(sorted(versions))))
        return requested, None
    host = version_tuple(glibc) if glibc else (0, 0)
    if version_tuple(versions[releases["default"]]["glibc_min"]) <= host:
        return releases["default"], None
    fitting = sorted((v for v, r in versions.items() if version_tuple(r["glibc_min"]) <= host),
                     key=version_tuple, reverse=True)
    if fitting:
        return fitting[0], None
    return None, ("vllm_fleet_engine_version: no release of the matrix installs on glibc %s (the oldest "
                  "needs %s)" % (glibc, min((r["glibc_min"] for r in versions.values()),
                                            key=version_tuple)))


def choose_python(pythons: list, low: str, high: str, packages: list, archive: str) -> dict:
    """How the venv gets its interpreter.

    ``action``: ``use`` (a suitable interpreter that can make venvs), ``packages``
    (install the distribution's packages: a missing interpreter or its venv module),
    ``archive`` (unpack the operator's relocatable CPython), or ``none`` with ``problem``.
    """
    fitting = sorted((p for p in pythons if in_range(p["version"], low, high)),
                     key=lambda p: version_tuple(p["version"]), reverse=True)
    ready = [p for p in fitting if p["venv"]]
    if ready:
        return {"action": "use", "path": ready[0]["path"], "version": _mm(ready[0]["version"])}
    if packages:
        name = next((p for p in packages if re.fullmatch(r"python3\.\d+", p)), packages[0])
        return {"action": "packages", "packages": packages,
                "path": "/usr/bin/" + name if name.startswith("python3.") else fitting[0]["path"],
                "version": name[len("python"):] if name.startswith("python3.") else _mm(fitting[0]["version"])}
    if archive:
        return {"action": "archive", "archive": archive}
    found = ", ".join("%s %s%s" % (p["path"], p["version"], "" if p["venv"] else " (no venv module)")
                      for p in pythons) or "none"
    return {"action": "none", "problem": (
        "vllm_runtime_python_archive: this release needs Python >= %s and < %s; the host has %s "
        "and its distribution packages none: give a relocatable CPython tar.gz "
        "(python-build-standalone install_only) in vllm_runtime_python_archive" % (low, high, found))}


def _mm(version: str) -> str:
    return "%d.%d" % version_tuple(version)[:2]


def driver_problem(driver_version: str | None, driver_min) -> str | None:
    if not driver_version or not driver_min:
        return None
    if version_tuple(driver_version)[0] < int(driver_min):
        return ("vllm_fleet_engine_version: this release's CUDA 13 torch needs NVIDIA driver branch "
                ">= %s; the host runs %s (upgrade the driver with the nvidia_driver role, or pin an "
                "older vllm_fleet_engine_version)" % (driver_min, driver_version))
    return None
