"""The STAND-INs refuse what the real programs refuse, and agree with the real packages'
published metadata, so that a test passing against them says something about the real
ones."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import npu_exporter_standin  # noqa: E402
import nvidia_daemons  # noqa: E402
import nvidia_standin  # noqa: E402

EXPORTER_DEFAULTS = yaml.safe_load((ROOT / "roles" / "accelerator_exporter" / "defaults" / "main.yml").read_text())


@pytest.fixture
def dcgm_exporter(tmp_path):
    """``dcgm_exporter(csv, *flags)`` -> the stand-in started with ``--collectors`` of that
    text and the flags (a Popen)."""
    script = tmp_path / "dcgm-exporter"
    script.write_text(nvidia_standin.dcgm_exporter())
    started = []

    def start(csv: str, *flags: str) -> subprocess.Popen:
        (tmp_path / "counters.csv").write_text(csv)
        process = subprocess.Popen([sys.executable, str(script), "--collectors", str(tmp_path / "counters.csv"),
                                    *flags], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()
        process.wait()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_the_fleets_dcgm_fields_are_nvidias_with_nvidias_types():
    published = nvidia_standin.published_fields()
    ours = {name: kind for name, kind, _help in EXPORTER_DEFAULTS["accelerator_exporter_dcgm_counters"]}
    assert ours and {name: published.get(name) for name in ours} == ours


def test_dcgm_exporter_stand_in_has_no_default_address(dcgm_exporter):
    process = dcgm_exporter("DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).\n")
    _out, err = process.communicate(timeout=30)
    assert process.returncode == 2 and "--address" in err


@pytest.mark.parametrize("line,reason", [
    ("DCGM_FI_DEV_GPU_TEMPERATURE, gauge, a field DCGM does not have", "is not a DCGM field"),
    ("DCGM_FI_DEV_GPU_TEMP, histogram, not a type dcgm-exporter takes", "is not a Prometheus metric type"),
])
def test_dcgm_exporter_stand_in_refuses_what_is_not_in_the_published_file(dcgm_exporter, line, reason):
    process = dcgm_exporter(line + "\n", "--address", "127.0.0.1:%d" % free_port())
    _out, err = process.communicate(timeout=30)
    assert process.returncode == 1 and reason in err and "counters.csv:1:" in err


def test_dcgm_exporter_stand_in_serves_the_files_fields_on_the_address_given(dcgm_exporter):
    port = free_port()
    dcgm_exporter("# a comment\nDCGM_FI_DEV_FB_USED, gauge, used\nDCGM_FI_DEV_PCIE_REPLAY_COUNTER, counter, retries\n",
                  "--address", "127.0.0.1:%d" % port)
    for _ in range(100):
        try:
            text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5).read().decode()
            break
        except OSError:
            time.sleep(0.1)
    types = dict(line.split()[2:4] for line in text.splitlines() if line.startswith("# TYPE "))
    assert types == {"DCGM_FI_DEV_FB_USED": "gauge", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": "counter"}


@pytest.mark.parametrize("flags,message", [
    (["-ip=127.0.0.1"], "STAND-IN npu-exporter: give -port"),
    (["-port=8082"], "STAND-IN npu-exporter: give -ip"),
    (["-ip=127.0.0.1", "-port=8082", "-listenPort=9"], "flag provided but not defined: -listenPort"),
    (["-ip=127.0.0.1", "-port"], "flag needs an argument: -port"),
])
def test_npu_exporter_stand_in_refuses_missing_and_unknown_flags(tmp_path, flags, message):
    script = tmp_path / "npu-exporter"
    script.write_text(npu_exporter_standin.EXPORTER)
    done = subprocess.run([sys.executable, str(script), *flags], capture_output=True, text=True, timeout=30)
    assert done.returncode == 1 and done.stderr.strip() == message


def test_npu_exporter_stand_in_needs_the_npus_group():
    """Outside the group HwHiAiUser (and not root) the real exporter reads no NPU: the
    stand-in refuses to start there, so a unit whose user lost the group fails its test."""
    # as nobody, without supplementary groups (root's own run would pass the check); the
    # script on stdin, the interpreter its first line names
    drop = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if os.getuid() == 0 else []
    done = subprocess.run(drop + ["/usr/bin/python3", "-", "-ip=127.0.0.1", "-port=1"],
                          input=npu_exporter_standin.EXPORTER, capture_output=True, text=True, timeout=30)
    assert (done.returncode, done.stderr.strip()) == (
        1, "STAND-IN npu-exporter: dcmi init failed: this user is not in the group HwHiAiUser")


@pytest.fixture
def daemon(tmp_path):
    """``daemon(unit, version, *argv, driver=None)`` -> the stand-in daemon of that unit
    run with argv, the loaded driver's version line naming ``driver`` (none loaded: None)."""
    proc = tmp_path / "version"

    def run(unit: str, version: str, *argv: str, driver: str | None = None) -> subprocess.CompletedProcess:
        (path, (text, _mode)), = [item for item in nvidia_daemons.files(unit, version).items()
                                  if item[0].startswith("/usr/bin/")]
        script = tmp_path / Path(path).name
        script.write_text(text)
        if driver:
            proc.write_text("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  %s  Release Build\n" % driver)
        return subprocess.run([sys.executable, str(script), *argv], capture_output=True, text=True, timeout=30,
                              env={"VLLM_FLEET_STANDIN_PROC": str(proc), "PATH": "/usr/bin:/bin"})
    return run


def test_the_daemons_units_run_the_stand_ins_with_nvidias_command_lines():
    units = {unit: nvidia_daemons.files(unit, "580.159.04")["/usr/lib/systemd/system/%s.service" % unit][0]
             for unit in ("nvidia-persistenced", "nvidia-fabricmanager")}
    assert "ExecStart=/usr/bin/nvidia-persistenced --user nvidia-persistenced\n" in units["nvidia-persistenced"]
    assert "ExecStart=/usr/bin/nv-fabricmanager -c /usr/share/nvidia/nvswitch/fabricmanager.cfg\n" in \
        units["nvidia-fabricmanager"]
    assert all("Type=forking\n" in text and "sleep" not in text for text in units.values())


@pytest.mark.parametrize("argv,driver,rc,message", [
    (["--user", "root", "--persistance-mode"], "580.159.04", 2, "unrecognized arguments: --persistance-mode"),
    (["--user", "no-such-user-here"], "580.159.04", 1, "no user no-such-user-here"),
    (["--user", "root", "--no-persistence-mode"], None, 1, "the NVIDIA driver is not loaded"),
])
def test_persistenced_stand_in_refuses_what_the_real_one_does(daemon, argv, driver, rc, message):
    done = daemon("nvidia-persistenced", "580.159.04", *argv, driver=driver)
    assert done.returncode == rc and message in done.stderr


@pytest.mark.parametrize("argv,driver,message", [
    (["-c", "/usr/share/nvidia/nvswitch/fabricmanager.cfg"], "580.159.04", "config file"),
    (["-c", "/etc/hostname"], None, "the NVIDIA driver is not loaded"),
    (["-c", "/etc/hostname"], "580.142.00", "fabric manager version 580.159.04 and the loaded driver 580.142.00 "
                                            "do not match"),
])
def test_fabric_manager_stand_in_needs_its_config_and_the_drivers_exact_version(daemon, argv, driver, message):
    done = daemon("nvidia-fabricmanager", "580.159.04", *argv, driver=driver)
    assert done.returncode == 1 and message in done.stderr


def test_fabric_manager_stand_in_says_its_version(daemon):
    assert daemon("nvidia-fabricmanager", "580.142.00", "-v").stdout == "Fabric Manager version is : 580.142.00\n"


def test_fabric_manager_package_is_laid_out_as_nvidias(tmp_path):
    """NVIDIA's packaging of fabric manager (github.com/NVIDIA/apt-packaging-fabric-manager,
    debian/templates: control.in and nvidia-fabricmanager-BRANCH.install.in): package
    nvidia-fabricmanager-BRANCH providing, replacing and conflicting with
    nvidia-fabricmanager; nv-fabricmanager in /usr/bin, fabricmanager.cfg in
    /usr/share/nvidia/nvswitch/, the unit nvidia-fabricmanager.service (in /lib/systemd/system
    there, which is /usr/lib/systemd/system on a merged-/usr Debian 12)."""
    name, version, unit = next(p for p in nvidia_standin.PACKAGES if p[0].startswith("nvidia-fabricmanager-"))
    assert name == "nvidia-fabricmanager-" + nvidia_standin.DRIVER.split(".")[0]
    nvidia_standin.build(tmp_path, name, version, unit)
    deb = str(tmp_path / ("%s_%s-1_all.deb" % (name, version)))
    control = subprocess.run(["dpkg-deb", "--field", deb, "Provides", "Replaces", "Conflicts"],
                             capture_output=True, text=True, check=True).stdout
    assert control.splitlines() == ["Provides: nvidia-fabricmanager", "Replaces: nvidia-fabricmanager",
                                    "Conflicts: nvidia-fabricmanager"]
    files = subprocess.run(["dpkg-deb", "--contents", deb], capture_output=True, text=True, check=True).stdout
    paths = {line.split()[-1].lstrip(".") for line in files.splitlines()}
    assert {"/usr/bin/nv-fabricmanager", "/usr/share/nvidia/nvswitch/fabricmanager.cfg",
            "/usr/lib/systemd/system/nvidia-fabricmanager.service"} <= paths


def test_only_the_pinning_package_keeps_the_driver_on_its_branch(tmp_path):
    """The stand-in repository carries the next branch beside the fleet's, as NVIDIA's does,
    and its nvidia-open depends on "nvidia-driver (>= version)": apt resolves nvidia-open to
    the newest branch unless the branch's pinning package is there (what the role installs
    first), so a role that loses the pin fails its molecule test."""
    repo = tmp_path / "repo"
    subprocess.run([sys.executable, str(ROOT / "tools" / "nvidia_standin.py"), str(repo)],
                   check=True, capture_output=True)
    root = tmp_path / "apt"
    for folder in ("etc/preferences.d", "state/lists/partial", "cache/archives/partial"):
        (root / folder).mkdir(parents=True)
    (root / "etc" / "sources.list").write_text("deb [trusted=yes] file:%s ./\n" % repo)
    (root / "status").write_text("")
    apt = ["apt-get", "-o", "Dir::Etc=%s" % (root / "etc"), "-o", "Dir::State=%s" % (root / "state"),
           "-o", "Dir::Cache=%s" % (root / "cache"), "-o", "Dir::State::status=%s" % (root / "status"),
           "-o", "Debug::NoLocking=1"]
    subprocess.run(apt + ["update"], check=True, capture_output=True)

    def chosen():
        out = subprocess.run(apt + ["-s", "install", "nvidia-open"], check=True, capture_output=True,
                             text=True).stdout
        return sorted(line.split()[1] + " " + line.split()[2].strip("()") for line in out.splitlines()
                      if line.startswith("Inst "))

    assert chosen() == ["nvidia-driver " + nvidia_standin.NEXT_BRANCH + "-1",
                        "nvidia-open " + nvidia_standin.NEXT_BRANCH + "-1"]
    deb = repo / ("nvidia-driver-pinning-580_%s-1_all.deb" % nvidia_standin.DRIVER)
    subprocess.run(["dpkg-deb", "-x", str(deb), str(tmp_path / "pin")], check=True)
    pin = tmp_path / "pin" / nvidia_standin.PIN.lstrip("/")
    (root / "etc" / "preferences.d" / pin.name).write_text(pin.read_text())
    assert chosen() == ["nvidia-driver " + nvidia_standin.DRIVER + "-1", "nvidia-open " + nvidia_standin.DRIVER + "-1"]
