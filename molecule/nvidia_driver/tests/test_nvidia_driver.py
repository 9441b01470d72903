"""The driver packages (STAND-INs) as the role left them, after the side effects."""
from __future__ import annotations

testinfra_hosts = ["ansible://all"]


def selection(host, package):
    return host.check_output("dpkg-query -W -f='${db:Status-Abbrev} ${Version}' %s" % package)


def test_driver_is_installed_and_held(host):
    assert selection(host, "nvidia-driver-580-open") == "hi  580.159.04-1"


def test_fabric_manager_matches_the_driver_and_is_held(host):
    assert selection(host, "nvidia-fabricmanager-580") == "hi  580.159.04-1"


def test_nouveau_is_blacklisted(host):
    conf = host.file("/etc/modprobe.d/blacklist-nouveau-vllm-fleet.conf")
    assert "blacklist nouveau" in conf.content_string and "modeset=0" in conf.content_string


def test_mirror_source_is_configured(host):
    assert "file:/srv/nvidia-standin" in host.file("/etc/apt/sources.list.d/nvidia-driver-mirror.list").content_string


def test_persistenced_and_fabric_manager_are_enabled(host):
    assert host.service("nvidia-persistenced").is_enabled
    assert host.service("nvidia-fabricmanager").is_enabled
