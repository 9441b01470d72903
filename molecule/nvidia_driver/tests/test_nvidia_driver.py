"""The driver packages (STAND-INs) as the role left them, after the side effects."""
from __future__ import annotations

testinfra_hosts = ["ansible://all"]


def selection(host, package):
    return host.check_output("dpkg-query -W -f='${db:Status-Abbrev} ${Version}' %s" % package)


def test_driver_is_installed_at_the_pinned_branch_and_held(host):
    """The repository also has branch 590, which nvidia-open alone would pull
    (tools/nvidia_standin.py): the pinning package keeps the driver on 580."""
    assert selection(host, "nvidia-driver-pinning-580") == "hi  580.159.04-1"
    assert selection(host, "nvidia-open") == "hi  580.159.04-1"
    assert selection(host, "nvidia-driver") == "ii  580.159.04-1"


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


def test_dcgm_exporter_serves_the_fields_the_rules_read(host, exporter_series):
    """accelerator_exporter: its own unit (the package's stopped), on the fleet's exporter
    address and port, exporting the configured fields (the STAND-IN serves the file's fields)."""
    unit = host.service("vllm-fleet-accelerator-exporter")
    if not unit.is_running:
        print(host.run("journalctl -u vllm-fleet-accelerator-exporter --no-pager -n 50").stdout)
    assert unit.is_running and unit.is_enabled
    assert not host.service("dcgm-exporter").is_running and not host.service("dcgm-exporter").is_enabled
    names = exporter_series(host, 9400)
    assert {"DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_USED"} <= names
    csv = host.file("/etc/vllm-fleet/dcgm-exporter.csv").content_string
    assert names == {line.split(",")[0] for line in csv.splitlines() if line and not line.startswith("#")}
    assert host.process.get(comm="dcgm-exporter").user == "vllm-fleet-exporter"
