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
