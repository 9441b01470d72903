"""preflight plans from the served revision's own files, read from a real olah mirror:
a second tiny Gemma-4 of another shape gets a plan for its shape, not the catalogue's;
a mirror that is not running yet gives the catalogue's plan with a warning, never
silently; nothing to plan from is refused by name."""
from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from ansible.module_utils.hf_hub_check import ModelError, Unreachable, model_files
from ansible.module_utils.vllm_planner import kv_bytes_per_token, model_shape, parameter_count

from olah_helpers import TINY, free_port, publish_git, start_olah

ROOT = Path(__file__).resolve().parents[2]
WIDE = "demo/tiny-gemma4-wide"
CATALOGUE = json.loads((ROOT / "roles" / "preflight" / "files" / "models" / "tiny-gemma4.json").read_text())


def wide_config() -> dict:
    """The tiny model's config with another shape: 10 layers (8 sliding, 2 full with their
    own head size), two KV heads, a wider hidden size and a longer context."""
    config = json.loads((TINY / "config.json").read_text())
    config.update(num_hidden_layers=10, hidden_size=96, num_key_value_heads=2, global_head_dim=64,
                  max_position_embeddings=4096, per_layer_config={},
                  layer_types=["sliding_attention"] * 4 + ["full_attention"]
                  + ["sliding_attention"] * 4 + ["full_attention"])
    return config


def write_safetensors(path: Path, elements: int) -> None:
    """A valid safetensors file holding one BF16 tensor of ``elements`` values (the plan
    reads the size; no engine loads these weights)."""
    header = json.dumps({"weights": {"dtype": "BF16", "shape": [elements],
                                     "data_offsets": [0, 2 * elements]}}).encode()
    header += b" " * (-len(header) % 8)
    path.write_bytes(struct.pack("<Q", len(header)) + header + bytes(2 * elements))


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    root = tmp_path_factory.mktemp("olah")
    src = tmp_path_factory.mktemp("wide") / "tiny-gemma4-wide"
    src.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        (src / name).write_bytes((TINY / name).read_bytes())
    config = wide_config()
    (src / "config.json").write_text(json.dumps(config, indent=2))
    write_safetensors(src / "model.safetensors", parameter_count(model_shape(config)))
    sha = publish_git(src, root / "mirrors" / "models" / WIDE)
    tokenizer_only = tmp_path_factory.mktemp("bare") / "tokenizer-only"
    tokenizer_only.mkdir()
    (tokenizer_only / "tokenizer.json").write_bytes((TINY / "tokenizer.json").read_bytes())
    bare_sha = publish_git(tokenizer_only, root / "mirrors" / "models" / "demo" / "tokenizer-only")
    server, endpoint = start_olah(root, "offline")
    yield {"endpoint": endpoint, "sha": sha, "config": config, "bare_sha": bare_sha,
           "weight_bytes": (src / "model.safetensors").stat().st_size}
    server.terminate()
    server.wait(timeout=10)


def settings(endpoint: str, revision: str) -> dict:
    return {"vllm_fleet_engine": "cpu", "preflight_model": "tiny-gemma4", "preflight_max_model_len": 1024,
            "vllm_fleet_model_repo": WIDE, "vllm_fleet_model_revision": revision,
            "vllm_fleet_model_endpoint": endpoint}


def test_the_plan_is_for_the_served_revisions_own_shape(playbook, localhost_inventory, mirror):
    run = playbook("preflight.yml", localhost_inventory, settings(mirror["endpoint"], mirror["sha"]))
    assert run.rc == 0, run.stderr
    plan = run.fact("localhost", "preflight_plan")
    assert plan["model"] == {"source": "revision", "repo": WIDE, "revision": mirror["sha"], "catalogue": ""}
    wide, catalogue = model_shape(mirror["config"]), model_shape(CATALOGUE)
    assert plan["kv_bytes_per_token"] == kv_bytes_per_token(wide, 2) != kv_bytes_per_token(catalogue, 2)
    assert plan["parameters"] == parameter_count(wide) != parameter_count(catalogue)
    assert plan["weight_bytes"] == mirror["weight_bytes"]
    assert plan["instances"][0]["args"]["served-model-name"] == WIDE
    assert not any("catalogue" in w for w in plan["warnings"])


def test_a_mirror_not_running_yet_gives_the_catalogues_plan_and_says_so(playbook, localhost_inventory, mirror):
    down = "http://127.0.0.1:%d" % free_port()
    run = playbook("preflight.yml", localhost_inventory, settings(down, mirror["sha"]))
    assert run.rc == 0, run.stderr
    plan = run.fact("localhost", "preflight_plan")
    assert plan["model"]["source"] == "catalogue" and plan["model"]["catalogue"] == "tiny-gemma4"
    assert plan["kv_bytes_per_token"] == kv_bytes_per_token(model_shape(CATALOGUE), 2)
    assert plan["warnings"][0].startswith(
        "the plan is for the catalogue entry tiny-gemma4, not for %s@%s: vllm_fleet_model_endpoint: cannot read"
        % (WIDE, mirror["sha"]))


def test_nothing_to_plan_from_is_refused_by_name(playbook, localhost_inventory, mirror):
    down = "http://127.0.0.1:%d" % free_port()
    run = playbook("preflight.yml", localhost_inventory, dict(settings(down, mirror["sha"]), preflight_model=""))
    assert run.rc != 0 and run.changed() == 0
    _task, text = run.failure("localhost")
    assert text.startswith("vllm_fleet_model_endpoint: cannot read %s@%s" % (WIDE, mirror["sha"]))
    assert text.endswith("and preflight_model names no catalogue entry to plan from instead "
                         "(gemma-4-31B-it, gemma-4-31B-it-AWQ, gemma-4-31B-it-FP8-block, tiny-gemma4)")


def test_a_repository_without_config_json_is_refused_by_name(mirror):
    with pytest.raises(ModelError, match=r"^vllm_fleet_model_repo: demo/tokenizer-only@%s has no config\.json$"
                       % mirror["bare_sha"]):
        model_files(mirror["endpoint"], "demo/tokenizer-only", mirror["bare_sha"])


def test_a_mirror_that_does_not_answer_is_unreachable_not_refused():
    with pytest.raises(Unreachable, match=r"^vllm_fleet_model_endpoint: cannot read "):
        model_files("http://127.0.0.1:%d" % free_port(), WIDE, "0" * 40)


def test_a_branch_is_refused_before_anything_is_planned(playbook, localhost_inventory, mirror):
    run = playbook("preflight.yml", localhost_inventory, settings(mirror["endpoint"], "main"))
    assert run.rc != 0 and run.changed() == 0
    _task, text = run.failure("localhost")
    assert text.startswith("vllm_fleet_model_revision: 'main' is a branch, tag or short sha")
