"""The STAND-IN installers' log and version files after install and upgrade."""
from __future__ import annotations

testinfra_hosts = ["ansible://all"]


def test_first_install_then_upgrade_in_the_documented_order(host):
    log = host.file("/var/log/ascend-standin.log").content_string.splitlines()
    assert log == [
        # first install: driver, then firmware, then CANN
        "driver 25.2.0 --full", "firmware 7.7.0 --full", "toolkit 9.1.0 --full",
        "kernels 9.1.0 --install", "nnal 9.1.0 --install",
        # upgrade: firmware first; CANN at its version is not run again
        "firmware 7.8.0 --upgrade", "driver 25.3.0 --upgrade"]


def test_versions_and_user(host):
    assert host.file("/usr/local/Ascend/driver/version.info").content_string == "Version=25.3.0\n"
    assert host.file("/usr/local/Ascend/ascend-toolkit/latest/version.info").content_string == "Version=9.1.0\n"
    assert host.user("HwHiAiUser").exists
    assert "STAND-IN" in host.check_output("npu-smi info")


def test_installers_are_not_left_behind(host):
    assert not host.file("/var/cache/vllm-fleet/ascend").exists


def test_npu_exporter_serves_what_the_rules_read(host, exporter_series):
    """accelerator_exporter: the checked binary (a STAND-IN) under its own unit, on the fleet's
    exporter address and port, as an unprivileged user, logging where its flags say."""
    unit = host.service("vllm-fleet-accelerator-exporter")
    if not unit.is_running:
        print(host.run("journalctl -u vllm-fleet-accelerator-exporter --no-pager -n 50").stdout)
    assert unit.is_running and unit.is_enabled
    names = exporter_series(host, 8082)
    assert {"npu_chip_info_health_status", "npu_chip_info_temperature", "npu_chip_info_hbm_used_memory",
            "npu_chip_info_hbm_total_memory"} <= names
    assert host.file("/usr/local/bin/npu-exporter").mode == 0o755
    assert "STAND-IN listening on" in host.file("/var/log/npu-exporter/npu-exporter.log").content_string
    assert host.process.get(comm="npu-exporter").user == "vllm-fleet-exporter"
    # the NPUs' group, without which the real exporter (and the STAND-IN) reads nothing
    assert "HwHiAiUser" in host.user("vllm-fleet-exporter").groups
    # no monitoring host here: the unit's own filter admits the host itself alone
    shown = dict(line.split("=", 1) for line in host.check_output(
        "systemctl show -p IPAddressDeny -p IPAddressAllow vllm-fleet-accelerator-exporter").splitlines())
    address = host.ansible("setup", "gather_subset=network")["ansible_facts"]["ansible_default_ipv4"]["address"]
    assert set(shown["IPAddressDeny"].split()) == {"0.0.0.0/0", "::/0"}, shown
    assert set(shown["IPAddressAllow"].split()) == {"127.0.0.0/8", "::1/128", address + "/32"}, shown
