"""The RHEL-family driver packages (STAND-INs) as nvidia_driver's dnf path left them."""
from __future__ import annotations

testinfra_hosts = ["ansible://all"]
DRIVER = "580.159.04-1"


def version(host, package):
    return host.check_output("rpm -q --qf '%%{VERSION}-%%{RELEASE}' %s" % package)


def test_the_driver_is_installed_from_nvidias_packages(host):
    for package in ("nvidia-open", "nvidia-driver", "kmod-nvidia-open-dkms"):
        assert version(host, package) == DRIVER


def test_fabric_manager_is_at_the_drivers_version_not_the_newest(host):
    # the repository also has nvidia-fabric-manager 580.200.00
    assert version(host, "nvidia-fabric-manager") == DRIVER


def test_the_branch_and_the_installed_versions_are_locked(host):
    locks = host.check_output("dnf -q versionlock list")
    assert "*nvidia*580*" in locks
    for package in ("nvidia-open", "nvidia-driver", "kmod-nvidia-open-dkms", "nvidia-fabric-manager"):
        assert f"{package}-0:{DRIVER}.*" in locks


def test_an_upgrade_does_not_move_fabric_manager(host):
    host.run_expect([0, 1], "dnf -y -q upgrade nvidia-fabric-manager")
    assert version(host, "nvidia-fabric-manager") == DRIVER


def test_the_mirror_is_checked_with_its_key(host):
    repo = host.file("/etc/yum.repos.d/nvidia-driver-mirror.repo").content_string
    assert "gpgcheck = 1" in repo and "RPM-GPG-KEY-standin" in repo


def test_nouveau_is_blacklisted_and_the_daemons_are_enabled(host):
    assert "blacklist nouveau" in host.file("/etc/modprobe.d/blacklist-nouveau-vllm-fleet.conf").content_string
    assert host.service("nvidia-persistenced").is_enabled
    assert host.service("nvidia-fabricmanager").is_enabled


def test_a_host_with_a_loaded_driver_gets_the_plugin_and_a_running_fabric_manager(host):
    # side_effect.yml: the driver counted as loaded (STAND-IN), fabric manager, its
    # repository and the versionlock plugin removed, the role applied again
    assert host.run("rpm -q python3-dnf-plugin-versionlock").rc == 0
    assert host.service("nvidia-fabricmanager").is_running
