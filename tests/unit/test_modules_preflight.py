"""gpu_topology, fp8_capability and vllm_plan run as Ansible runs them."""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
H200_SNAPSHOT = ROOT / "tests" / "fixtures" / "nvml" / "h200-single-gpu-host.json"
FP8_BLOCK = json.loads((ROOT / "roles/preflight/files/models/gemma-4-31B-it-FP8-block.json").read_text())


def test_gpu_topology_from_a_recorded_snapshot(run_module):
    result = run_module("gpu_topology", {"snapshot": str(H200_SNAPSHOT), "record": True})
    facts = result["ansible_facts"]["gpu_topology"]
    assert result["changed"] is False
    assert facts["gpus"][0]["compute_capability"] == "9.0"
    assert result["gpu_topology_snapshot"]["driver"] == "580.159.04"


def test_gpu_topology_without_nvml_does_not_fail(run_module, monkeypatch):
    import builtins
    real_import = builtins.__import__

    def no_pynvml(name, *args, **kwargs):
        if name == "pynvml":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pynvml)
    facts = run_module("gpu_topology", {})["ansible_facts"]["gpu_topology"]
    assert facts["gpus"] == [] and "nvidia-ml-py (pynvml) is not installed" in facts["reason"]


def test_fp8_capability_per_gpu(run_module):
    gpus = [{"index": 0, "name": "NVIDIA H200", "compute_capability": "9.0"},
            {"index": 1, "name": "NVIDIA A100", "compute_capability": "8.0"}]
    result = run_module("fp8_capability", {"gpus": gpus,
                                           "quantization_config": FP8_BLOCK["quantization_config"]})
    assert [g["mode"] for g in result["gpus"]] == ["fp8_native", "fp8_weight_only"]
    assert result["quantization_flag"] is None and result["omit_quantization_flag"] is True


def test_fp8_capability_probe_without_torch_says_so(run_module, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    result = run_module("fp8_capability", {"gpus": [{"name": "H200", "compute_capability": "9.0"}],
                                           "probe": True})
    assert result["gpus"][0]["probe"] == "skipped: torch is not installed on this host"


def test_fp8_capability_refuses_a_contradicting_flag(run_module):
    result = run_module("fp8_capability", {"gpus": [{"name": "H200", "compute_capability": "9.0"}],
                                           "quantization_config": FP8_BLOCK["quantization_config"],
                                           "quantization": "fp8"})
    assert result["failed"] and "does not match" in result["msg"]


def test_vllm_plan_names_the_operators_variable(run_module):
    gpu = {"name": "NVIDIA H200", "memory_total_bytes": 150754820096, "compute_capability": "9.0"}
    ok = run_module("vllm_plan", {"model_config": FP8_BLOCK, "gpus": [gpu], "max_model_len": "32768"})
    assert ok["plan"]["max_model_len"] == 32768 and ok["plan"]["tensor_parallel_size"] == 1
    bad = run_module("vllm_plan", {"model_config": FP8_BLOCK, "gpus": [gpu],
                                   "tensor_parallel_size": 2, "variable_prefix": "preflight_",
                                   "vllm_args": {"swap-space": 4}})
    assert bad["failed"]
    assert bad["msg"].startswith("preflight_vllm_args['swap-space']: --swap-space was removed")
    named = run_module("vllm_plan", {"model_config": FP8_BLOCK, "gpus": [gpu], "variable_prefix": "preflight_",
                                     "variable_names": {"engine_version": "vllm_fleet_engine_version"},
                                     "engine_version": "9.9.9"})
    assert named["msg"].startswith("vllm_fleet_engine_version: '9.9.9' is not a release of the cuda engine")


def test_vllm_plan_reads_a_config_path(run_module, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(FP8_BLOCK))
    gpu = {"name": "NVIDIA H200", "memory_total_bytes": 150754820096, "compute_capability": "9.0"}
    assert run_module("vllm_plan", {"model_config": str(path), "gpus": [gpu],
                                    "max_model_len": 8192})["plan"]["max_model_len"] == 8192
    missing = run_module("vllm_plan", {"model_config": str(tmp_path / "nope.json"), "gpus": [gpu]})
    assert missing["failed"] and "model_config: cannot read" in missing["msg"]
