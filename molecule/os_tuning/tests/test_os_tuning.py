"""The os_tuning role on a host that has been rebooted after converge.

side_effect.yml reset vm.* and THP to the kernel's defaults and restarted the
containers, so every value checked here was set again by the host at boot.
"""
from __future__ import annotations

import pytest

SYSCTL = {
    "net.core.somaxconn": 65535,
    "net.ipv4.tcp_max_syn_backlog": 65535,
    "vm.swappiness": 0,
    "vm.overcommit_memory": 1,
    "vm.max_map_count": 1048576,  # from os_tuning_sysctl_extra
}
THP = "/sys/kernel/mm/transparent_hugepage"


@pytest.mark.parametrize("key,value", sorted(SYSCTL.items()))
def test_sysctl_is_live_after_reboot(host, key, value):
    assert host.sysctl(key) == value


def test_sysctl_file_holds_every_parameter(host):
    conf = host.file("/etc/sysctl.d/90-vllm-fleet.conf")
    assert conf.is_file and conf.user == "root"
    lines = {line.split("=")[0].strip(): line.split("=")[1].strip()
             for line in conf.content_string.splitlines() if "=" in line}
    assert lines == {k: str(v) for k, v in SYSCTL.items()}


@pytest.mark.parametrize("knob", ["enabled", "defrag"])
def test_transparent_hugepages_never_after_reboot(host, knob):
    assert "[never]" in host.file(f"{THP}/{knob}").content_string


def test_thp_unit_ran_at_boot(host):
    unit = host.service("os-tuning-thp.service")
    assert unit.is_enabled
    assert unit.is_running  # a oneshot that remains "active" after it ran
    props = host.run("systemctl show -p Before,After os-tuning-thp.service").stdout
    assert "basic.target" in props and "sysinit.target" in props


def test_swap_entry_disabled_in_fstab(host):
    fstab = host.file("/etc/fstab").content_string
    assert "\n/swapfile" not in "\n" + fstab
    assert "# /swapfile none swap sw 0 0" in fstab


def test_nofile_limit_for_service_user(host):
    limits = host.file("/etc/security/limits.d/90-vllm-fleet.conf").content_string
    assert "vllm soft nofile 1048576" in " ".join(limits.split())
    assert "vllm hard nofile 1048576" in " ".join(limits.split())
