"""The NVIDIA driver on a host: what is loaded, what the packages say, and what to do.

Facts: docs/platforms.md (NVIDIA driver; open kernel modules required on Hopper
and newer; fabric manager version == driver version on NVSwitch systems; Kylin V10
reports major version "V10" and takes NVIDIA's rhel8 repository).
"""
from __future__ import annotations

import os
import re

# NVIDIA's CUDA repository folder per distribution (developer.download.nvidia.com/compute/cuda/repos/<folder>/<arch>).
REPO_FOLDERS = {
    ("Ubuntu", "22"): "ubuntu2204", ("Ubuntu", "24"): "ubuntu2404",
    ("Debian", "12"): "debian12", ("Debian", "13"): "debian13",
    ("RedHat", "8"): "rhel8", ("RedHat", "9"): "rhel9", ("RedHat", "10"): "rhel10",
    ("Rocky", "8"): "rhel8", ("Rocky", "9"): "rhel9",
    ("AlmaLinux", "8"): "rhel8", ("AlmaLinux", "9"): "rhel9",
    # Kylin V10 is RHEL 8 based (glibc 2.28) and has no repository of its own.
    ("Kylin Linux Advanced Server", "V10"): "rhel8",
}
ARCH_FOLDERS = {"x86_64": "x86_64", "aarch64": "sbsa", "arm64": "sbsa"}
SECURE_BOOT_VAR = "SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"


class DriverError(Exception):
    pass


def repo_folder(distribution: str, major_version: str, architecture: str) -> str:
    """``<distro folder>/<arch folder>`` of NVIDIA's CUDA repository, or DriverError."""
    folder = REPO_FOLDERS.get((distribution, str(major_version)))
    if folder is None:
        raise DriverError("nvidia_driver_source: NVIDIA's CUDA repository has no folder for %s %s; "
                          "use nvidia_driver_source: distribution or mirror"
                          % (distribution, major_version))
    arch = ARCH_FOLDERS.get(architecture)
    if arch is None:
        raise DriverError("nvidia_driver_source: no CUDA repository for architecture %s" % architecture)
    return "%s/%s" % (folder, arch)


# NVIDIA's driver installation guide (R570+ packaging) for the RHEL family: RHEL 8/9 and
# their rebuilds enable the module stream of the branch and install nvidia-open; RHEL 10
# has no module streams and locks the branch with versionlock before installing.
DNF_DRIVER_PACKAGES = ["nvidia-open", "nvidia-driver", "kmod-nvidia-open-dkms"]


def dnf_install(folder: str | None, branch: int, open_modules: bool, kernel_modules: str,
                source: str) -> dict:
    """How the RHEL family (repository folder rhel8/rhel9/rhel10) installs ``branch``,
    or DriverError naming the setting that the role cannot honour there."""
    if source == "distribution":
        raise DriverError("nvidia_driver_source: distribution: the RHEL family has no NVIDIA driver "
                          "of its own; use cuda_repo or mirror (NVIDIA's %s repository)"
                          % (folder or "rhel").split("/")[0])
    if not open_modules:
        raise DriverError("nvidia_driver_open: false: on the RHEL family the role installs the open "
                          "kernel modules (nvidia-open) only, which Turing and newer GPUs run")
    if kernel_modules != "dkms":
        raise DriverError("nvidia_driver_kernel_modules: %s: NVIDIA's precompiled RHEL-family streams "
                          "carry the proprietary modules only; use dkms (kernel-devel of the running "
                          "kernel)" % kernel_modules)
    release = (folder or "").split("/")[0]
    install = {"packages": ["nvidia-open"], "lock": DNF_DRIVER_PACKAGES}
    if release in ("rhel8", "rhel9"):
        return dict(install, module_stream="nvidia-driver:%d-open" % branch, branch_lock=None)
    if release == "rhel10":
        return dict(install, module_stream=None, branch_lock="*nvidia*%d*" % branch)
    raise DriverError("nvidia_driver_source: no NVIDIA RHEL-family repository for this host "
                      "(folder %s)" % (folder or "unknown"))


def apt_check(distribution: str, source: str) -> None:
    """DriverError when the Debian family cannot install the branch as asked.

    The role installs NVIDIA's branch pinning package and then ``nvidia-open`` or
    ``cuda-drivers`` from NVIDIA's repository (or a mirror of it); from the distribution
    only Ubuntu's archive names its drivers by branch (``nvidia-driver-580-open``).
    Debian's own archive has one ``nvidia-driver`` per release, with no branch in its name
    and no pinning package, so it cannot be pinned to a branch."""
    if source == "distribution" and distribution != "Ubuntu":
        raise DriverError("nvidia_driver_source: distribution: %s's own archive has no driver "
                          "package named by branch (only nvidia-driver, one branch per release), so "
                          "the branch cannot be pinned; use cuda_repo or mirror (NVIDIA's repository "
                          "and its pinning package)" % distribution)


def parse_proc_version(text: str) -> dict:
    """``/proc/driver/nvidia/version`` -> ``{"version", "open"}`` (empty dict when absent)."""
    match = re.search(r"NVRM version: (.*?Kernel Module)\s.*?\s(\d+\.\d+(?:\.\d+)?)\s", text or "")
    if not match:
        return {}
    return {"version": match.group(2), "open": "Open Kernel Module" in match.group(1)}


def secure_boot(efivars: str) -> bool | None:
    """True/False from the EFI variable; None on a host booted without EFI."""
    if not os.path.isdir(efivars):
        return None
    path = os.path.join(efivars, SECURE_BOOT_VAR)
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return False
    return bool(data) and data[-1] == 1


def branch_of(version: str | None) -> int | None:
    try:
        return int(str(version).split(".")[0])
    except (TypeError, ValueError):
        return None


def upstream_version(package_version: str | None) -> str | None:
    """``580.159.04-1ubuntu1`` / ``3:580.159.04-1.el9`` -> ``580.159.04``."""
    if not package_version:
        return None
    version = str(package_version).split(":", 1)[-1]
    return re.split(r"[-~+]", version, maxsplit=1)[0]


def decide(loaded: dict, nvml_ok: bool, branch: int, packages: dict, driver_package: str,
           fabricmanager_package: str, fabricmanager_needed: bool, open_modules: bool) -> dict:
    """What the role should do, and the drift between the loaded driver, its packages
    and fabric manager.

    ``packages`` maps installed package names to versions.  The driver is *satisfied*
    when a driver of the branch or newer is loaded, NVML answers and the module
    flavour is right: then no driver package is touched (cloud images).
    """
    loaded_version = loaded.get("version")
    driver_pkg = upstream_version(packages.get(driver_package))
    fm_pkg = upstream_version(packages.get(fabricmanager_package))
    reference = loaded_version or driver_pkg
    drift = []
    if loaded_version and driver_pkg and driver_pkg != loaded_version:
        drift.append("loaded driver %s != package %s %s (rebooted since the upgrade? an unattended "
                     "upgrade?)" % (loaded_version, driver_package, driver_pkg))
    if fm_pkg and reference and fm_pkg != reference:
        drift.append("%s %s != driver %s (fabric manager refuses to start: interface version "
                     "mismatch)" % (fabricmanager_package, fm_pkg, reference))
    problems = []
    loaded_branch = branch_of(loaded_version)
    if loaded_branch is not None and loaded_branch < branch:
        problems.append("loaded driver %s is older than nvidia_driver_branch %d" % (loaded_version, branch))
    if loaded_version and open_modules and loaded.get("open") is False:
        problems.append("the proprietary kernel module is loaded; Hopper and newer need the open "
                        "modules (nvidia_driver_open: true)")
    satisfied = bool(loaded_version) and nvml_ok and not problems
    return {
        "loaded": loaded or None,
        "packages": {"driver": driver_pkg, "fabricmanager": fm_pkg},
        "satisfied": satisfied,
        "fabricmanager": {"needed": fabricmanager_needed, "installed": fm_pkg,
                          "version": reference if fabricmanager_needed else None},
        "drift": drift,
        "problems": problems,
        "reboot_required": bool(driver_pkg) and driver_pkg != loaded_version,
    }


def parse_package_query(text: str) -> dict:
    """``name<TAB>version<TAB>status`` lines (dpkg-query/rpm) -> installed name to version."""
    found = {}
    for line in (text or "").splitlines():
        parts = line.split("\t")
        if len(parts) >= 3 and parts[2][1:2] == "i":  # installed (desired: install or hold)
            found[parts[0]] = parts[1]
    return found


def host_state(proc_version: str, efivars: str, kernel_release: str, modules_root: str,
               sys_module: str) -> dict:
    """What the host says about drivers, without any package manager."""
    def read(path):
        try:
            with open(path) as handle:
                return handle.read()
        except OSError:
            return ""
    return {
        "loaded": parse_proc_version(read(proc_version)),
        "secure_boot": secure_boot(efivars),
        "kernel_release": kernel_release,
        "kernel_headers": os.path.isdir(os.path.join(modules_root, kernel_release, "build")),
        "nouveau_loaded": os.path.isdir(os.path.join(sys_module, "nouveau")),
    }
