"""Facts about a host's runtime that ansible's setup module does not give:
the C library (what pip's manylinux tags are checked against) and free disk space
where something will be written."""
from __future__ import annotations

import os
import platform
import sys


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


def runtime_facts(disk_paths: list) -> dict:
    return {"glibc_version": glibc_version(),
            "python_version": platform.python_version(),
            "python_executable": sys.executable,
            "machine": platform.machine(),
            "disk": [disk_space(p) for p in disk_paths]}
