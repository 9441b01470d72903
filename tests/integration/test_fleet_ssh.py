"""The fleet's hosts over SSH, as the demo inventory reaches them: tools/fleet.py boots a
host, ansible connects with the fleet's ssh_config (its key, the host's own key, strict
host key checking) and pipelines; a host key that does not match is refused."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import fleet  # noqa: E402

FLEET = "sshcheck"


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    if not fleet.docker_ok():
        pytest.skip("no Docker daemon (make test starts one)")
    fleet.down(FLEET)
    fleet.up(FLEET, [("h1", "bookworm")])
    inventory = tmp_path_factory.mktemp("ssh") / "hosts.yml"
    inventory.write_text(
        "all:\n  vars:\n    ansible_connection: ansible.builtin.ssh\n    ansible_user: root\n"
        "    ansible_ssh_common_args: -F %s\n  hosts:\n    h1: {ansible_host: %s}\n"
        % (fleet.ssh_paths(FLEET)[0], fleet.container_name(FLEET, "h1")))
    yield inventory
    fleet.down(FLEET)


def ansible(inventory: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(Path(sys.executable).parent / "ansible"), "-i", str(inventory), "h1", *args],
                          capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1", **env))


def test_the_control_node_reaches_a_host_over_ssh_with_the_fleets_key(host):
    done = ansible(host, "-m", "ansible.builtin.command", "-a", "cat /etc/hostname", "-vvv")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "sshcheck-h1" in done.stdout
    assert "ESTABLISH SSH CONNECTION FOR USER: root" in done.stdout
    # pipelined: the module went over stdin, no temporary file was put on the host
    assert "PUT " not in done.stdout and "sftp" not in done.stdout


def test_a_host_key_that_does_not_match_is_refused(host):
    _config, known = fleet.ssh_paths(FLEET)
    real = known.read_text()
    name, _kind, _key = real.split()
    other = fleet.SSH_DIR / "fleet_ed25519.pub"
    known.write_text("%s %s\n" % (name, " ".join(other.read_text().split()[:2])))
    try:
        # a new connection (not the first test's persisted one, which was checked already)
        done = ansible(host, "-m", "ansible.builtin.ping", ANSIBLE_SSH_ARGS="-o ControlMaster=no")
    finally:
        known.write_text(real)
    assert done.returncode != 0
    assert "Host key verification failed" in done.stdout + done.stderr


def test_a_host_added_later_leaves_the_others_in_the_fleets_ssh_config(host):
    """`up` with one more host (a scenario adding node3) rewrites the fleet's ssh_config and
    known_hosts: the hosts booted before stay in them, and both answer."""
    fleet.up(FLEET, [("h2", "bookworm")])
    try:
        config, known = (path.read_text() for path in fleet.ssh_paths(FLEET))
        names = [fleet.container_name(FLEET, h) for h in ("h1", "h2")]
        assert [("Host %s\n" % n) in config for n in names] == [True, True], config
        assert sorted(line.split()[0] for line in known.splitlines()) == names, known
        done = ansible(host, "-m", "ansible.builtin.ping")
        assert done.returncode == 0, done.stdout[-2000:]
    finally:
        # the fleet as the fixture made it: h1 alone, in its ssh files too
        subprocess.run(["docker", "rm", "-f", fleet.container_name(FLEET, "h2")], capture_output=True, check=False)
        fleet.write_ssh(FLEET, fleet.fleet_hosts(FLEET), setup=False)
