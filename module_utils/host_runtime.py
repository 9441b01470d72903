"""Facts about a host's runtime that ansible's setup module does not give:
the C library (what pip's manylinux tags are checked against) and free disk space
where something will be written."""
from __future__ import annotations

import glob
import importlib.util
import os
import platform
import subprocess
import sys

from ansible.module_utils.wheel_tags import supported_platforms

PYTHON_GLOBS = ("/usr/bin/python3*", "/usr/local/bin/python3*", "/opt/vllm/python/bin/python3*")
PROBE = ("import sys, importlib.util; print('%d.%d.%d' % sys.version_info[:3], "
         "int(importlib.util.find_spec('ensurepip') is not None))")


def glibc_version() -> str | None:
    """"2.39" from os.confstr, as pip/packaging read it; None on musl or unknown."""
    try:
        text = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (AttributeError, ValueError, OSError):
        return None
    name, _, version = text.partition(" ")
    return version if name == "glibc" else None


def nearest_existing(path: str) -> str:
    path = os.path.abspath(path)
    while not os.path.exists(path):
        path = os.path.dirname(path)
    return path


def disk_space(path: str) -> dict:
    existing = nearest_existing(path)
    stats = os.statvfs(existing)
    return {"path": path, "measured_at": existing,
            "free_bytes": stats.f_bavail * stats.f_frsize,
            "total_bytes": stats.f_blocks * stats.f_frsize}


def find_pythons(patterns=PYTHON_GLOBS) -> list:
    """Every CPython 3 interpreter in the usual places: path, version, whether it can
    make a venv with pip (ensurepip; Debian splits it into pythonX.Y-venv)."""
    found, seen = [], set()
    for pattern in patterns:
        for path in sorted(glob.glob(pattern)):
            name = os.path.basename(path)
            if not (name == "python3" or name.replace("python3.", "").isdigit()):
                continue
            real = os.path.realpath(path)
            if real in seen or not os.access(real, os.X_OK):
                continue
            seen.add(real)
            try:
                out = subprocess.run([path, "-c", PROBE], capture_output=True, text=True,
                                     timeout=20, check=True).stdout.split()
            except (OSError, subprocess.SubprocessError):
                continue
            found.append({"path": path, "version": out[0], "venv": out[1] == "1"})
    return found


def runtime_facts(disk_paths: list, pythons: bool = False) -> dict:
    glibc = glibc_version()
    facts = {"glibc_version": glibc,
             "pip_platforms": supported_platforms(glibc, platform.machine()) if glibc else [],
             "python_version": platform.python_version(),
             "python_executable": sys.executable,
             "machine": platform.machine(),
             # apt's check mode needs python3-apt (minimal Debian images lack it)
             "python_apt": importlib.util.find_spec("apt_pkg") is not None,
             "disk": [disk_space(p) for p in disk_paths]}
    if pythons:
        facts["pythons"] = find_pythons()
    return facts
