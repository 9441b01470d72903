"""hf_revision and hf_snapshot against a real olah mirror on loopback, serving the
project's tiny Gemma-4 model from a git repository at a pinned commit."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import huggingface_hub
import pytest
from ansible.module_utils.hf_hub_check import ModelError, check_revision_format, revision_info
from ansible.module_utils.hf_snapshot import MARKER, fetch, layout

from olah_helpers import REPO, TINY, publish_git, start_olah


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    root = tmp_path_factory.mktemp("olah")
    sha = publish_git(TINY, root / "mirrors" / "models" / REPO)
    server, endpoint = start_olah(root, "offline")
    yield {"endpoint": endpoint, "sha": sha}
    server.terminate()
    server.wait(timeout=10)


def test_revision_info_lists_files_with_sizes_and_git_blob_hashes(mirror):
    info = revision_info(mirror["endpoint"], REPO, mirror["sha"])
    assert info["sha"] == mirror["sha"]
    files = {f["name"]: f for f in info["files"]}
    assert set(files) == {p.name for p in TINY.iterdir()}
    assert files["model.safetensors"]["size"] == (TINY / "model.safetensors").stat().st_size
    blob = subprocess.run(["git", "hash-object", str(TINY / "model.safetensors")], text=True,
                          capture_output=True, check=True).stdout.strip()
    assert files["model.safetensors"]["hash"] == blob


@pytest.mark.parametrize("revision", ["main", "6b30899"])
def test_floating_revisions_are_refused(revision):
    with pytest.raises(ModelError, match="vllm_fleet_model_revision: .* pin the full 40-hex commit sha"):
        check_revision_format(revision, allow_floating=False)
    check_revision_format(revision, allow_floating=True)


def test_floating_revision_resolves_to_the_sha(mirror):
    assert revision_info(mirror["endpoint"], REPO, "main")["sha"] == mirror["sha"]


def test_unknown_revision_repo_and_endpoint(mirror):
    with pytest.raises(ModelError, match=r"^vllm_fleet_model_revision: the hub could not serve"):
        revision_info(mirror["endpoint"], REPO, "0" * 40)
    with pytest.raises(ModelError, match=r"^vllm_fleet_model_repo: demo/no-such-model was not found at "):
        revision_info(mirror["endpoint"], "demo/no-such-model", mirror["sha"])
    with pytest.raises(ModelError, match=r"^vllm_fleet_model_endpoint: cannot read"):
        revision_info("http://127.0.0.1:9", REPO, mirror["sha"])


def test_fetch_verifies_then_switches_and_never_downloads_twice(mirror, tmp_path):
    info = revision_info(mirror["endpoint"], REPO, mirror["sha"])
    assert fetch(huggingface_hub, REPO, info, str(tmp_path), mirror["endpoint"], "", [], True)["changed"]
    assert not (tmp_path / "demo").exists()  # check mode wrote nothing
    first = fetch(huggingface_hub, REPO, info, str(tmp_path), mirror["endpoint"], "", [], False)
    paths = layout(str(tmp_path), REPO, mirror["sha"])
    assert first["changed"] and first["downloaded"]
    assert os.readlink(paths["current"]) == mirror["sha"] and (Path(paths["target"]) / MARKER).is_file()
    assert not Path(paths["staging"]).exists() and not (Path(paths["target"]) / ".cache").exists()
    assert (Path(paths["target"]) / "model.safetensors").read_bytes() == (TINY / "model.safetensors").read_bytes()
    again = fetch(huggingface_hub, REPO, info, str(tmp_path), mirror["endpoint"], "", [], False)
    assert not again["changed"] and not again["downloaded"]


def test_an_interrupted_download_resumes_and_is_verified(mirror, tmp_path):
    """What a killed download leaves: a staging folder with a torn file, no marker, no link."""
    info = revision_info(mirror["endpoint"], REPO, mirror["sha"])
    paths = layout(str(tmp_path), REPO, mirror["sha"])
    os.makedirs(paths["staging"])
    torn = (TINY / "model.safetensors").read_bytes()[:100000]
    Path(paths["staging"], "model.safetensors").write_bytes(torn)
    result = fetch(huggingface_hub, REPO, info, str(tmp_path), mirror["endpoint"], "", [], False)
    assert result["downloaded"]
    assert (Path(paths["target"]) / "model.safetensors").read_bytes() == (TINY / "model.safetensors").read_bytes()
    assert os.readlink(paths["current"]) == mirror["sha"]


def test_hf_revision_module(run_module, mirror):
    ok = run_module("hf_revision", {"repo": REPO, "revision": mirror["sha"], "endpoint": mirror["endpoint"]})
    assert ok["sha"] == mirror["sha"] and ok["bytes"] > 680000
    bad = run_module("hf_revision", {"repo": REPO, "revision": "main", "endpoint": mirror["endpoint"]})
    assert bad["failed"] and bad["msg"].startswith("vllm_fleet_model_revision: 'main' is a branch")
    # a download needs the hub: a mirror that does not answer fails with the reason (only the
    # planner's read of config.json goes on without it)
    gone = run_module("hf_revision", {"repo": REPO, "revision": mirror["sha"], "endpoint": "http://127.0.0.1:9"})
    assert gone["failed"] and gone["msg"].startswith("vllm_fleet_model_endpoint: cannot read demo/")
    planner = run_module("hf_revision", {"repo": REPO, "revision": mirror["sha"], "endpoint": "http://127.0.0.1:9",
                                         "config": True})
    assert not planner.get("failed") and planner["reachable"] is False


def test_switching_back_to_a_verified_snapshot_downloads_nothing(mirror, tmp_path):
    info = revision_info(mirror["endpoint"], REPO, mirror["sha"])
    fetch(huggingface_hub, REPO, info, str(tmp_path), mirror["endpoint"], "", [], False)
    paths = layout(str(tmp_path), REPO, mirror["sha"])
    os.replace(paths["current"], paths["current"] + ".kept")
    os.symlink("another-sha", paths["current"])
    checked = fetch(huggingface_hub, REPO, info, str(tmp_path), mirror["endpoint"], "", [], True)
    assert checked["changed"] and os.readlink(paths["current"]) == "another-sha"
    switched = fetch(huggingface_hub, REPO, info, str(tmp_path), mirror["endpoint"], "", [], False)
    assert switched["changed"] and not switched["downloaded"]
    assert os.readlink(paths["current"]) == mirror["sha"]


def test_a_capacity_rehearsal_fetches_everything_but_the_weights(mirror, tmp_path, root):
    """vllm_fleet_model_load_format: dummy fetches with the role's rehearsal patterns."""
    import yaml
    patterns = yaml.safe_load((root / "roles/vllm_model/vars/main.yml").read_text())[
        "_vllm_model_rehearsal_patterns"]
    info = revision_info(mirror["endpoint"], REPO, mirror["sha"], allow_patterns=patterns)
    assert info["bytes"] < 50_000, "no weights in the rehearsal"
    fetch(huggingface_hub, REPO, info, str(tmp_path), mirror["endpoint"], "", patterns, False)
    target = Path(layout(str(tmp_path), REPO, mirror["sha"])["target"])
    assert sorted(p.name for p in target.iterdir() if p.name != MARKER) == [
        "chat_template.jinja", "config.json", "generation_config.json", "tokenizer.json",
        "tokenizer_config.json"]
