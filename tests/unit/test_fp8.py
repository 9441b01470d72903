from __future__ import annotations

import json
from pathlib import Path

import pytest
from ansible.module_utils.fp8 import checkpoint_scheme, gpu_fp8_mode, how_vllm_runs

MODELS = Path(__file__).resolve().parents[2] / "roles" / "preflight" / "files" / "models"
FP8_BLOCK = json.loads((MODELS / "gemma-4-31B-it-FP8-block.json").read_text())["quantization_config"]
AWQ = json.loads((MODELS / "gemma-4-31B-it-AWQ.json").read_text())["quantization_config"]


@pytest.mark.parametrize("cc,mode", [("10.0", "native"), ("9.0", "native"), ("8.9", "native"),
                                     ("8.6", "weight_only"), ("8.0", "weight_only"),
                                     ("7.5", "weight_only"), ("7.0", "unsupported")])
def test_fp8_mode_by_compute_capability(cc, mode):
    assert gpu_fp8_mode(cc) == mode


def test_ada_runs_fp8_natively():  # the seed guide says it cannot
    assert how_vllm_runs("8.9", FP8_BLOCK)["mode"] == "fp8_native"


def test_fp8_block_checkpoint():
    assert checkpoint_scheme(FP8_BLOCK) == {"method": "compressed-tensors", "scheme": "fp8_block"}
    hopper = how_vllm_runs("9.0", FP8_BLOCK)
    assert hopper["quantization_flag"] is None and hopper["supported"]
    ampere = how_vllm_runs("8.0", FP8_BLOCK)
    assert ampere["mode"] == "fp8_weight_only" and "Marlin" in ampere["detail"]
    assert not how_vllm_runs("7.0", FP8_BLOCK)["supported"]


def test_quantization_flag_contradicting_the_checkpoint():
    result = how_vllm_runs("9.0", FP8_BLOCK, requested="fp8")
    assert not result["supported"]
    assert "Quantization method specified in the model config (compressed-tensors)" in result["error"]


def test_online_fp8_and_plain_bf16():
    assert how_vllm_runs("9.0", None, "fp8")["quantization_flag"] == "fp8"
    assert how_vllm_runs("8.0", None)["mode"] == "bfloat16"
    assert how_vllm_runs("7.5", None)["mode"] == "float16"


def test_awq():
    assert how_vllm_runs("8.9", AWQ)["detail"] == "4-bit weights through Marlin"
    assert how_vllm_runs("7.5", AWQ)["supported"]
    assert not how_vllm_runs("7.0", AWQ)["supported"]
