"""After converge, an interrupted download on node1, a wrong revision on node2, and a
mirror repository left as olah's with a planted symlink and git config (the side effect)."""
from __future__ import annotations

import socket

import pytest

BASE = "/var/lib/vllm/models/demo/tiny-gemma4"
MIRRORED = "/var/lib/olah/mirrors/models/demo/tiny-gemma4"
PIN = "115893f75ee34252aa70c6877eb37a13cc541e38"  # inventories/demo's vllm_fleet_model_revision
WEIGHTS_SHA256 = "b24aa7e41dda6308ef039062b643b10ec28c24777e5c398e666d709ac20cda2a"
FILES = {"chat_template.jinja", "config.json", "generation_config.json", "model.safetensors",
         "tokenizer.json", "tokenizer_config.json"}


@pytest.fixture
def inference(host):
    if not host.backend.get_hostname().startswith("node"):
        pytest.skip("an inference host's check")
    return host


@pytest.fixture
def mirror(host):
    if host.backend.get_hostname() != "mirror":
        pytest.skip("the mirror's check")
    return host


def test_current_points_at_a_verified_snapshot(inference):
    current = inference.file(f"{BASE}/current")
    assert current.is_symlink and len(current.linked_to.rsplit("/", 1)[-1]) == 40
    snapshot = inference.file(current.linked_to)
    assert set(snapshot.listdir()) == FILES  # listdir() leaves out dot files
    assert inference.file(f"{current.linked_to}/.vllm-fleet-verified").is_file
    assert inference.file(f"{current.linked_to}/model.safetensors").sha256sum == WEIGHTS_SHA256


def test_no_half_written_snapshot_is_left(inference):
    assert not [d for d in inference.file(BASE).listdir() if d.endswith(".partial")]


def test_mirror_serves_as_a_hardened_service(mirror):
    olah = mirror.service("olah.service")
    assert olah.is_running and olah.is_enabled
    assert mirror.run("systemctl show -p User --value olah.service").stdout.strip() == "olah"
    assert mirror.socket("tcp://0.0.0.0:8090").is_listening  # systemd's socket, olah-edge.socket
    assert mirror.socket("tcp://127.0.0.1:8091").is_listening and not mirror.socket("tcp://0.0.0.0:8091").is_listening


def test_published_repositories_are_roots_and_read_only_to_olah(mirror):
    for folder in ("/var/lib/olah", "/var/lib/olah/mirrors", "/var/lib/olah/mirrors/models", MIRRORED):
        assert mirror.file(folder).user == "root", folder
    assert mirror.run("find %s ! -user root" % MIRRORED).stdout == ""
    refused = mirror.run("runuser -u olah -- touch %s/written-by-olah" % MIRRORED)
    assert refused.rc != 0 and "Permission denied" in refused.stderr


def test_what_olah_could_write_before_was_removed_and_never_ran(mirror):
    """The side effect left the repository as olah's, with a symlink to a root-only file
    and a git config naming a command; the converge after it published afresh."""
    assert not mirror.file("/root/olah-ran-as-root").exists
    canary = mirror.file("/etc/vllm-fleet-canary")
    assert (canary.user, canary.group, canary.mode) == ("root", "root", 0o600)
    assert not mirror.file(MIRRORED + "/planted").exists
    assert "fsmonitor" not in mirror.file(MIRRORED + "/.git/config").content_string
    # published again, to the same commit: the pin the inventories carry is unchanged
    assert mirror.run("git -C %s rev-parse HEAD" % MIRRORED).stdout.strip() == PIN


def test_olah_reads_exactly_the_published_repositories(mirror):
    environment = mirror.run("systemctl show -p Environment --value olah.service").stdout.split()
    assert environment == ["GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=safe.directory",
                           "GIT_CONFIG_VALUE_0=" + MIRRORED]


def test_the_mirror_answers_the_fleets_hosts_alone(mirror):
    """The mirror's socket admits localhost, the mirror's own addresses and the inference
    hosts' (systemd's IP filter); this test's machine, the control node, is in no group of
    the scenario: its connection to the mirror is dropped (it times out)."""
    allowed = set(mirror.run("systemctl show -p IPAddressAllow --value olah-edge.socket").stdout.split())
    own = mirror.run("hostname -I").stdout.split()
    reached = [mirror.backend.ansible_runner.get_variables(name).get("ansible_host", name) for name in ("node1", "node2")]
    nodes = [mirror.run("getent ahostsv4 %s" % name).stdout.split()[0] for name in reached]
    expected = {"127.0.0.0/8", "::1/128"} | {a + ("/32" if "." in a else "/128") for a in own + nodes}
    assert expected <= allowed and all(a.startswith("fe80:") for a in allowed - expected), allowed  # (own link-local)
    assert mirror.run("curl -sf -o /dev/null http://127.0.0.1:8090/api/models/demo/tiny-gemma4/revision/" + PIN).rc == 0
    with pytest.raises(socket.timeout):
        socket.create_connection((own[0], 8090), timeout=5).close()
