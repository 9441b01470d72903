"""nvidia_driver's decisions: repository folders, loaded-driver parsing, drift."""
from __future__ import annotations

import pytest
from ansible.module_utils.nvidia_driver import (
    DriverError, apt_check, decide, dnf_install, parse_package_query, parse_proc_version, repo_folder,
    secure_boot, upstream_version)

# /proc/driver/nvidia/version of the lent H200 host (device tool, 2026-11-29)
H200_PROC = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  "
             "(nixbld@)  \nGCC version:  gcc version 15.3.0 (GCC) \n")
PROPRIETARY_PROC = ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 19:39:15 "
                    "UTC 2024\nGCC version:  gcc version 12.3.0\n")
H200 = parse_proc_version(H200_PROC)
ARGS = dict(branch=580, driver_package="nvidia-driver-580-open",
            fabricmanager_package="nvidia-fabricmanager-580", open_modules=True)


@pytest.mark.parametrize("distribution, major, arch, folder", [
    ("Kylin Linux Advanced Server", "V10", "x86_64", "rhel8/x86_64"),
    ("Kylin Linux Advanced Server", "V10", "aarch64", "rhel8/sbsa"),
    ("Ubuntu", "24", "x86_64", "ubuntu2404/x86_64"),
    ("Debian", "12", "x86_64", "debian12/x86_64"),
    ("RedHat", "9", "x86_64", "rhel9/x86_64"),
])
def test_repository_folders(distribution, major, arch, folder):
    assert repo_folder(distribution, major, arch) == folder


def test_an_unknown_distribution_is_named():
    with pytest.raises(DriverError, match="no folder for Gentoo 2"):
        repo_folder("Gentoo", "2", "x86_64")


def test_loaded_driver_and_flavour():
    assert H200 == {"version": "580.159.04", "open": True}
    assert parse_proc_version(PROPRIETARY_PROC) == {"version": "535.183.01", "open": False}
    assert parse_proc_version("") == {}


def test_secure_boot_from_the_efi_variable(tmp_path):
    assert secure_boot(str(tmp_path / "none")) is None
    efivars = tmp_path / "efivars"
    efivars.mkdir()
    assert secure_boot(str(efivars)) is False
    (efivars / "SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c").write_bytes(b"\x06\x00\x00\x00\x01")
    assert secure_boot(str(efivars)) is True


def test_package_versions():
    text = ("nvidia-driver-580-open\t580.159.04-1ubuntu1\thi \n"
            "nvidia-fabricmanager-580\t\tun \n"
            "cuda-drivers-580\t1:580.126.20-1\tii \n")
    assert parse_package_query(text) == {"nvidia-driver-580-open": "580.159.04-1ubuntu1",
                                         "cuda-drivers-580": "1:580.126.20-1"}
    assert upstream_version("1:580.126.20-1") == "580.126.20"
    assert upstream_version("580.159.04-1.el9") == "580.159.04"


def test_the_h200_cloud_image_is_already_satisfied():
    facts = decide(H200, True, packages={}, fabricmanager_needed=False, **ARGS)
    assert facts["satisfied"] and facts["drift"] == [] and facts["problems"] == []
    assert not facts["reboot_required"]


def test_an_old_or_proprietary_driver_is_a_problem():
    old = decide(parse_proc_version(PROPRIETARY_PROC), True, packages={},
                 fabricmanager_needed=False, **ARGS)
    assert not old["satisfied"]
    assert old["problems"] == [
        "loaded driver 535.183.01 is older than nvidia_driver_branch 580",
        "the proprietary kernel module is loaded; Hopper and newer need the open modules "
        "(nvidia_driver_open: true)"]


def test_fabric_manager_skew_is_drift():
    facts = decide(H200, True, packages={"nvidia-driver-580-open": "580.159.04-1",
                                         "nvidia-fabricmanager-580": "580.142.00-1"},
                   fabricmanager_needed=True, **ARGS)
    assert facts["drift"] == ["nvidia-fabricmanager-580 580.142.00 != driver 580.159.04 (fabric "
                              "manager refuses to start: interface version mismatch)"]


def test_an_upgraded_package_under_a_running_driver_is_drift_and_needs_a_reboot():
    facts = decide(H200, True, packages={"nvidia-driver-580-open": "580.172.08-1"},
                   fabricmanager_needed=False, **ARGS)
    assert facts["drift"][0].startswith("loaded driver 580.159.04 != package nvidia-driver-580-open 580.172.08")
    assert facts["reboot_required"]


def test_a_fresh_install_needs_a_reboot_and_fabric_manager_follows_the_package():
    before = decide({}, False, packages={}, fabricmanager_needed=True, **ARGS)
    assert not before["satisfied"] and not before["reboot_required"]
    after = decide({}, False, packages={"nvidia-driver-580-open": "580.159.04-1"},
                   fabricmanager_needed=True, **ARGS)
    assert after["reboot_required"] and after["fabricmanager"]["version"] == "580.159.04"


def test_the_module_on_a_kylin_host_without_a_driver(run_module):
    facts = run_module("nvidia_driver_facts", dict(
        branch=580, driver_package="nvidia-driver", fabricmanager_package="nvidia-fabric-manager",
        distribution="Kylin Linux Advanced Server", distribution_major_version="V10",
        kernel_release="4.19.90-52.22.v2207.ky10.x86_64", package_manager="dnf"),
        check_mode=True)["ansible_facts"]["nvidia_driver"]
    assert facts["repo_folder"] == "rhel8/x86_64" and not facts["satisfied"]
    assert facts["kernel_headers"] is False
    # Kylin V10 installs like RHEL 8: the branch's module stream, then nvidia-open
    assert facts["dnf_install"]["module_stream"] == "nvidia-driver:580-open"
    assert facts["dnf_install"]["packages"] == ["nvidia-open"] and facts["install_error"] is None


@pytest.mark.parametrize("folder, stream, branch_lock", [
    ("rhel8/x86_64", "nvidia-driver:580-open", None),
    ("rhel9/sbsa", "nvidia-driver:580-open", None),
    ("rhel10/x86_64", None, "*nvidia*580*"),
])
def test_rhel_family_installs_follow_nvidias_guide(folder, stream, branch_lock):
    plan = dnf_install(folder, 580, open_modules=True, kernel_modules="dkms", source="cuda_repo")
    assert (plan["module_stream"], plan["branch_lock"]) == (stream, branch_lock)
    assert plan["lock"] == ["nvidia-open", "nvidia-driver", "kmod-nvidia-open-dkms"]


@pytest.mark.parametrize("settings, named", [
    (dict(open_modules=False), "nvidia_driver_open"),
    (dict(kernel_modules="precompiled"), "nvidia_driver_kernel_modules: precompiled"),
    (dict(source="distribution"), "nvidia_driver_source: distribution"),
])
def test_rhel_family_refuses_what_nvidias_packages_do_not_offer(settings, named):
    args = dict(open_modules=True, kernel_modules="dkms", source="cuda_repo")
    with pytest.raises(DriverError, match=named):
        dnf_install("rhel9/x86_64", 580, **dict(args, **settings))


def test_the_module_names_what_the_rhel_family_cannot_do(run_module):
    facts = run_module("nvidia_driver_facts", dict(
        branch=580, driver_package="nvidia-driver", fabricmanager_package="nvidia-fabric-manager",
        distribution="Rocky", distribution_major_version="9", kernel_release="5.14.0-503.el9.x86_64",
        package_manager="dnf", kernel_modules="precompiled"),
        check_mode=True)["ansible_facts"]["nvidia_driver"]
    assert facts["dnf_install"] is None
    assert facts["install_error"].startswith("nvidia_driver_kernel_modules: precompiled")


@pytest.mark.parametrize("distribution, source, refused", [
    ("Debian", "distribution", True),
    ("Debian", "cuda_repo", False),
    ("Debian", "mirror", False),
    ("Ubuntu", "distribution", False),
    ("Ubuntu", "cuda_repo", False),
])
def test_debian_family_installs_only_a_branch_it_can_pin(distribution, source, refused):
    """Debian's own archive has one nvidia-driver per release and no pinning package;
    Ubuntu's names its drivers by branch, NVIDIA's repository has the pinning package."""
    if refused:
        with pytest.raises(DriverError, match="nvidia_driver_source: distribution: Debian's own archive"):
            apt_check(distribution, source)
    else:
        assert apt_check(distribution, source) is None


def test_the_module_names_what_debian_cannot_do(run_module):
    facts = run_module("nvidia_driver_facts", dict(
        branch=580, driver_package="nvidia-driver-580-open", fabricmanager_package="nvidia-fabricmanager-580",
        distribution="Debian", distribution_major_version="12", kernel_release="6.1.0-28-amd64",
        package_manager="apt", source="distribution"),
        check_mode=True)["ansible_facts"]["nvidia_driver"]
    assert facts["install_error"].startswith("nvidia_driver_source: distribution: Debian's own archive")
