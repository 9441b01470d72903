"""After converge, an interrupted download on node1 and a wrong revision on node2."""
from __future__ import annotations

import pytest

BASE = "/var/lib/vllm/models/demo/tiny-gemma4"
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
    assert mirror.socket("tcp://0.0.0.0:8090").is_listening
