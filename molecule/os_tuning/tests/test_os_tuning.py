"""The os_tuning role on a host that has been rebooted after converge.

side_effect.yml reset vm.* and THP to the kernel's defaults and restarted the
containers, so every value checked here was set again by the host at boot.
"""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tools"))
from playbook_output import changed_tasks, run_playbook  # noqa: E402

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


def test_a_parameter_changed_behind_the_roles_back_is_put_back_by_the_next_run(host):
    """A converged host skips writing its parameters (one check lists those not in place):
    a live value set by hand and a line edited in the file are both found, rewritten and
    reported as changed, and nothing else is touched."""
    conf = "/etc/sysctl.d/90-vllm-fleet.conf"
    host.run_test("sysctl -w vm.swappiness=60")
    host.run_test("sed -i 's/^vm.max_map_count=.*/vm.max_map_count=65530/' %s" % conf)
    name = host.backend.host
    returncode, output = run_playbook(os.environ["MOLECULE_INVENTORY_FILE"],
                                      str(Path(os.environ["MOLECULE_SCENARIO_DIRECTORY"]) / "converge.yml"),
                                      "--limit", name, cwd=os.environ.get("MOLECULE_PROJECT_DIRECTORY"))
    assert returncode == 0, output[-3000:]
    # The file's rewrite reloads all of it, so the second item may find its value in place.
    assert set(changed_tasks(output)) == {"%s: os_tuning : Write and apply the kernel parameters" % name}, \
        output[-3000:]
    written = sorted(re.findall(r"^\w+: \[%s\] => \(item=(\S+=\S+)\)" % re.escape(name), output, re.M))
    assert written == ["vm.max_map_count=1048576", "vm.swappiness=0"], output[-3000:]
    assert host.sysctl("vm.swappiness") == 0
    assert "vm.max_map_count=1048576" in host.file(conf).content_string.splitlines()
