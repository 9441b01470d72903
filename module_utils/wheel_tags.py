"""Wheel compatibility the way pip decides it, without needing ``packaging`` on the host.

pip installs a wheel only when one of its tags (``python-abi-platform``, each part
possibly ``.``-compressed) is among the interpreter's supported tags
(``packaging.tags.sys_tags()``).  On glibc Linux the platforms are
``manylinux_2_N_<arch>`` for every N up to the host's glibc minor (plus the legacy
aliases manylinux1 = 2.5, manylinux2010 = 2.12, manylinux2014 = 2.17),
``linux_<arch>`` and ``any``; glibc is read with ``os.confstr``.  Wheels link glibc
dynamically: no flag (``--force-reinstall --no-deps``) makes an incompatible one run.
tests/unit/test_wheel_tags.py checks this against ``packaging.tags``.
"""
from __future__ import annotations

import re

LEGACY_MANYLINUX = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}
# Wheels whose tag understates what they need (docs/platforms.md, wheels and glibc):
# vLLM <= 0.11 is tagged manylinux1 but needs glibc 2.32.
REAL_GLIBC_NEEDS = {"vllm": ((0, 11, 999), (2, 32))}

WHEEL_RE = re.compile(
    r"^(?P<name>[^-]+)-(?P<version>[^-]+)(-(?P<build>\d[^-]*))?"
    r"-(?P<py>[^-]+)-(?P<abi>[^-]+)-(?P<plat>[^-]+)\.whl$")


class WheelNameError(ValueError):
    pass


def parse_wheel(filename: str) -> dict:
    match = WHEEL_RE.match(filename.rsplit("/", 1)[-1])
    if not match:
        raise WheelNameError("%s is not a wheel file name" % filename)
    parts = match.groupdict()
    return {"name": parts["name"].lower().replace("_", "-"), "version": parts["version"],
            "pythons": parts["py"].split("."), "abis": parts["abi"].split("."),
            "platforms": parts["plat"].split(".")}


def version_tuple(text) -> tuple:
    """"2.28" -> (2, 28); "3.11.2" -> (3, 11, 2); "580.159.04" -> (580, 159, 4)."""
    return tuple(int(x) for x in re.findall(r"\d+", str(text))[:3])


def platform_need(platform: str):
    """(arch, (glibc major, minor)) a platform tag needs; (None, None) for any;
    (arch, None) for linux_<arch>; 'musllinux' for musl wheels."""
    if platform == "any":
        return None, None
    if platform.startswith("musllinux_"):
        return platform.split("_", 3)[-1], "musllinux"
    match = re.match(r"^manylinux_(\d+)_(\d+)_(.+)$", platform)
    if match:
        return match.group(3), (int(match.group(1)), int(match.group(2)))
    for legacy, glibc in LEGACY_MANYLINUX.items():
        if platform.startswith(legacy + "_"):
            return platform[len(legacy) + 1:], glibc
    if platform.startswith("linux_"):
        return platform[len("linux_"):], None
    return platform, "unknown"


def python_ok(python: str, abi: str, host: tuple) -> bool:
    """Does interpreter tag + ABI tag accept CPython ``host`` (major, minor)?"""
    match = re.match(r"^(cp|py)(\d)(\d*)$", python)
    if not match:
        return False
    kind, major, minor = match.group(1), int(match.group(2)), match.group(3)
    if major != host[0]:
        return False
    if kind == "py":
        return not minor or int(minor) <= host[1]
    if abi == "abi3":
        return int(minor or 0) <= host[1]
    if abi == "none" or abi.startswith("cp"):
        return int(minor or -1) == host[1]
    return False


def check_wheel(filename: str, python_version: str, glibc: str | None, machine: str) -> dict:
    """``{"wheel", "compatible", "reason"}`` for one wheel on a host."""
    wheel = parse_wheel(filename)
    host_py = version_tuple(python_version)[:2]
    host_glibc = version_tuple(glibc)[:2] if glibc else None
    py_ok = any(python_ok(p, a, host_py) for p in wheel["pythons"] for a in wheel["abis"])
    plat_ok, arch_seen, glibc_needed, musl = False, set(), [], False
    for platform in wheel["platforms"]:
        arch, need = platform_need(platform)
        if arch is not None:
            arch_seen.add(arch)
        if arch is not None and arch != machine:
            continue
        if need == "musllinux":
            musl = True
            continue
        if isinstance(need, tuple):
            glibc_needed.append(need)
            if host_glibc is None or need > host_glibc:
                continue
        elif need == "unknown":
            continue
        plat_ok = True
    reasons = []
    real = REAL_GLIBC_NEEDS.get(wheel["name"])
    if plat_ok and real and version_tuple(wheel["version"]) <= real[0] and host_glibc \
            and host_glibc < real[1]:
        reasons.append("needs glibc %d.%d (its tag understates it), host has %s"
                       % (real[1] + (glibc,)))
    if not py_ok:
        tags = sorted({"%s-%s" % (p, a) for p in wheel["pythons"] for a in wheel["abis"]})
        reasons.append("%s only, host python %d.%d" % ("/".join(tags), host_py[0], host_py[1]))
    if not plat_ok:
        if arch_seen and machine not in arch_seen:
            reasons.append("built for %s, host is %s" % ("/".join(sorted(arch_seen)), machine))
        elif glibc_needed:
            need = min(glibc_needed)
            reasons.append("needs glibc %d.%d, host has %s" % (need[0], need[1], glibc or "no glibc"))
        elif musl:
            reasons.append("built for musl libc, host uses glibc")
        else:
            reasons.append("platform %s is not one this host supports" % ".".join(wheel["platforms"]))
    return {"wheel": filename.rsplit("/", 1)[-1], "compatible": not reasons,
            "reason": "; ".join(reasons)}


def supported_platforms(glibc: str, machine: str) -> list:
    """The platform tags pip accepts on this host, newest first (for pip download)."""
    major, minor = version_tuple(glibc)[:2]
    # pip (packaging.tags) starts manylinux at glibc 2.5 on x86 and at 2.17 elsewhere:
    # manylinux2014 (PEP 599) is the first to define the other architectures
    oldest = 5 if machine in ("x86_64", "i686") else 17
    tags = ["manylinux_%d_%d_%s" % (major, m, machine) for m in range(minor, oldest - 1, -1)]
    tags += ["%s_%s" % (legacy, machine) for legacy, need in LEGACY_MANYLINUX.items()
             if (2, oldest) <= need <= (major, minor)]
    return tags + ["linux_%s" % machine]
