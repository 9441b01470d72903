"""The served weights are the pinned revision's, byte for byte: hf_revision and hf_snapshot
take each file's hash from the pinned commit's own tree (the LFS sha256 its pointer names)
and refuse, naming the file, content that differs - whether the endpoint says so before
the download (its X-Linked-Etag) or only the bytes show it.

Two servers of large files as the fleet meets them: tools/hub_standin.py (a labelled
STAND-IN for the Hugging Face Hub: LFS pointers in the tree, a 302 to a separate download
host carrying X-Linked-Etag/X-Linked-Size) and a real olah offline mirror holding the
weights as git LFS objects."""
from __future__ import annotations

import hashlib
import json
import threading
import urllib.request
from pathlib import Path

import huggingface_hub
import pytest
from ansible.module_utils.hf_hub_check import ModelError, revision_info
from ansible.module_utils.hf_snapshot import fetch, layout

from olah_helpers import REPO, TINY, free_port, hub_standin, publish_git, start_olah

WEIGHTS = "model.safetensors"
SHA256 = hashlib.sha256((TINY / WEIGHTS).read_bytes()).hexdigest()


def tamper(repo: Path) -> None:
    """Change one byte of the weights' LFS object, keeping its name and size."""
    path = hub_standin.lfs_object(repo, SHA256)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.fixture()
def hub(tmp_path):
    """The Hub stand-in: its API on one port, LFS downloads redirected to another."""
    sha = publish_git(TINY, tmp_path / "hub" / REPO, lfs=(WEIGHTS,))
    cdn_port = free_port()
    cdn = hub_standin.serve(tmp_path / "hub", "127.0.0.1", cdn_port)
    api = hub_standin.serve(tmp_path / "hub", "127.0.0.1", free_port(), lfs_netloc="127.0.0.1:%d" % cdn_port)
    for server in (api, cdn):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    yield {"endpoint": "http://127.0.0.1:%d" % api.server_address[1], "sha": sha, "repo": tmp_path / "hub" / REPO,
           "api": api, "cdn": cdn}
    api.shutdown()
    cdn.shutdown()


@pytest.fixture()
def mirror(tmp_path):
    """A real olah offline mirror with the weights as a git LFS object."""
    root = tmp_path / "olah"
    sha = publish_git(TINY, root / "mirrors" / "models" / REPO, lfs=(WEIGHTS,))
    server, endpoint = start_olah(root, "offline")
    yield {"endpoint": endpoint, "sha": sha, "repo": root / "mirrors" / "models" / REPO}
    server.terminate()
    server.wait(timeout=10)


def weights_entry(info: dict) -> dict:
    return next(f for f in info["files"] if f["name"] == WEIGHTS)


def test_the_hub_lists_the_lfs_sha256_and_the_download_follows_its_redirect(hub, tmp_path):
    info = revision_info(hub["endpoint"], REPO, hub["sha"])
    assert weights_entry(info) == {"name": WEIGHTS, "size": (TINY / WEIGHTS).stat().st_size, "hash": SHA256}
    assert info["bytes"] == sum(p.stat().st_size for p in TINY.iterdir())
    result = fetch(huggingface_hub, REPO, info, str(tmp_path / "host"), hub["endpoint"], "", [], False)
    target = Path(layout(str(tmp_path / "host"), REPO, hub["sha"])["target"])
    assert result["downloaded"] and (target / WEIGHTS).read_bytes() == (TINY / WEIGHTS).read_bytes()
    # the weights came from the download host, every other file from the API host
    assert sent(hub["cdn"]) == (TINY / WEIGHTS).stat().st_size
    assert sent(hub["api"]) == info["bytes"] - (TINY / WEIGHTS).stat().st_size


def sent(server) -> int:
    """Bytes of file content one stand-in server has sent."""
    with urllib.request.urlopen("http://127.0.0.1:%d/_standin/bytes" % server.server_address[1]) as answer:
        return json.load(answer)["bytes"]


def test_weights_that_differ_from_the_pinned_sha256_are_refused_and_nothing_switches(hub, tmp_path):
    """A download host (or anyone on its path) serving other bytes under the pinned hash:
    the endpoint's headers agree with the tree, only the bytes differ."""
    tamper(hub["repo"])
    info = revision_info(hub["endpoint"], REPO, hub["sha"])
    with pytest.raises(ModelError) as refused:
        fetch(huggingface_hub, REPO, info, str(tmp_path / "host"), hub["endpoint"], "", [], False)
    assert str(refused.value) == (
        "vllm_fleet_model_revision: %s@%s: %s differ from the sizes and hashes the revision lists, after a second "
        "download; nothing was switched" % (REPO, hub["sha"], WEIGHTS))
    paths = layout(str(tmp_path / "host"), REPO, hub["sha"])
    assert not Path(paths["target"]).exists() and not Path(paths["current"]).is_symlink()


def test_the_mirror_lists_the_lfs_sha256_and_serves_the_object(mirror, tmp_path):
    info = revision_info(mirror["endpoint"], REPO, mirror["sha"])
    assert weights_entry(info)["hash"] == SHA256
    fetch(huggingface_hub, REPO, info, str(tmp_path / "host"), mirror["endpoint"], "", [], False)
    target = Path(layout(str(tmp_path / "host"), REPO, mirror["sha"])["target"])
    assert (target / WEIGHTS).read_bytes() == (TINY / WEIGHTS).read_bytes()


def test_a_tampered_object_on_the_mirror_is_refused_before_any_download(mirror, tmp_path):
    """olah gives the sha256 of the object it holds: it no longer matches the pointer the
    pinned commit holds, so the check fails before a byte is fetched."""
    tamper(mirror["repo"])
    with pytest.raises(ModelError) as refused:
        revision_info(mirror["endpoint"], REPO, mirror["sha"])
    message = str(refused.value)
    assert message.startswith("vllm_fleet_model_revision: %s at %s serves %s of %s@%s with the hash "
                              % (REPO, mirror["endpoint"], WEIGHTS, REPO, mirror["sha"]))
    assert message.endswith("but the revision lists %s; nothing was downloaded" % SHA256)
