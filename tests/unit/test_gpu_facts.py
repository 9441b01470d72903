from __future__ import annotations

import json
from pathlib import Path

import pytest
from ansible.module_utils.gpu_facts import build_facts, read_nvml

from nvml_replay import ReplayNVML

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nvml"


def snapshot(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def test_real_h200_host():
    facts = build_facts(snapshot("h200-single-gpu-host"))
    assert facts["driver_version"] == "580.159.04"
    assert facts["cuda_driver_version"] == "13.0"
    (gpu,) = facts["gpus"]
    assert gpu["name"] == "NVIDIA H200"
    assert gpu["compute_capability"] == "9.0"
    assert gpu["memory_total_bytes"] == 150754820096
    assert gpu["persistence_mode"] and gpu["ecc_enabled"] and not gpu["mig_enabled"]
    assert (gpu["pcie_generation"], gpu["pcie_width"]) == (5, 16)
    # NVLink calls raise NotSupported on this passthrough GPU: recorded, not fatal.
    assert gpu["nvlink_supported"] is False and gpu["nvlink_active_links"] == 0
    assert facts["nvlink_fully_connected"] is False and facts["nvswitch_present"] is False
    assert facts["nccl_advice"] == {"env": {}, "vllm_args": {}, "notes": []}


def test_hgx_nvswitch_board():
    facts = build_facts(snapshot("hgx-8xh100-nvswitch"))
    assert facts["gpu_count"] == 8
    assert all(g["nvlink_active_links"] == 18 for g in facts["gpus"])
    assert facts["nvswitch_present"] is True
    assert facts["nvlink_fully_connected"] is True
    assert len(facts["pairs"]) == 28 and {p["link"] for p in facts["pairs"]} == {"nvswitch"}
    assert {p["common_ancestor"] for p in facts["pairs"]} == {"NODE", "SYS"}
    assert facts["nccl_advice"]["env"] == {} and facts["nccl_advice"]["vllm_args"] == {}


def test_pcie_only_pair_gets_nccl_advice():
    facts = build_facts(snapshot("pcie-2xl40s"))
    (pair,) = facts["pairs"]
    assert pair == {"gpus": [0, 1], "link": "pcie", "nvlink_count": 0,
                    "common_ancestor": "SYS", "p2p_read": "chipset_not_supported"}
    assert facts["nvlink_fully_connected"] is False
    advice = facts["nccl_advice"]
    assert advice["env"] == {"NCCL_P2P_DISABLE": "1"}
    assert advice["vllm_args"] == {"disable-custom-all-reduce": True}
    assert any("NUMA" in note for note in advice["notes"])


def test_nvlink_bridged_a100_pair():
    facts = build_facts(snapshot("a100-nvlink-pair"))
    (pair,) = facts["pairs"]
    assert pair["link"] == "nvlink" and pair["nvlink_count"] == 12 and pair["p2p_read"] == "ok"
    assert facts["nvlink_fully_connected"] is True and facts["nvswitch_present"] is False


def test_mig_and_ada():
    (mig,) = build_facts(snapshot("a100-mig"))["gpus"]
    assert mig["mig_enabled"] is True and mig["compute_capability"] == "8.0"
    assert mig["nvlink_supported"] is True and mig["nvlink_active_links"] == 0
    (ada,) = build_facts(snapshot("rtx4090"))["gpus"]
    assert ada["compute_capability"] == "8.9" and ada["ecc_enabled"] is False


def test_host_without_gpu_gets_a_reason_not_a_crash():
    facts = build_facts(snapshot("no-gpu"))
    assert facts["gpus"] == [] and "NVML Shared Library Not Found" in facts["reason"]
    assert read_nvml(ReplayNVML(snapshot("no-gpu")))["devices"] == []


@pytest.mark.parametrize("name", ["h200-single-gpu-host", "h200-1gpu-recorded", "h200-x2-nvswitch",
                                  "hgx-8xh100-nvswitch", "pcie-2xl40s", "a100-nvlink-pair",
                                  "a100-mig", "rtx4090"])
def test_read_nvml_through_the_binding_interface(name):
    """read_nvml walks links until NVML refuses, passes the integer P2P index and
    shuts NVML down; what it reads gives the same facts as the recording."""
    nvml = ReplayNVML(snapshot(name))
    read = read_nvml(nvml)
    assert nvml.shutdown
    assert build_facts(read) == build_facts(snapshot(name))
    for dev in read["devices"]:
        assert "err" in dev["nvlink"][-1]  # stopped at the first refusal


def test_recorded_two_h200_nvswitch_host_matches_nvidia_smi():
    """Recorded on a real 2x H200 host; nvidia-smi on the same host said
    GPU0-GPU1 NV18, P2P read OK, both on NUMA node 0 (h200-x2-nvswitch.nvidia-smi.txt)."""
    facts = build_facts(snapshot("h200-x2-nvswitch"))
    smi = (FIXTURES / "h200-x2-nvswitch.nvidia-smi.txt").read_text()
    assert "GPU0\t X \tNV18" in smi and " GPU0\tX\tOK" in smi
    assert facts["gpu_count"] == 2 and facts["driver_version"] == "580.159.04"
    assert [g["nvlink_active_links"] for g in facts["gpus"]] == [18, 18]
    (pair,) = facts["pairs"]
    assert pair == {"gpus": [0, 1], "link": "nvswitch", "nvlink_count": 18,
                    "common_ancestor": "PHB", "p2p_read": "ok"}
    assert facts["nvlink_fully_connected"] and facts["nvswitch_present"]
    assert facts["nccl_advice"]["env"] == {} and facts["nccl_advice"]["vllm_args"] == {}


def test_recorded_single_h200_agrees_with_the_reference_recording():
    ours = build_facts(snapshot("h200-1gpu-recorded"))
    reference = build_facts(snapshot("h200-single-gpu-host"))
    strip = lambda facts: [{k: v for k, v in g.items() if k not in ("uuid", "pci_bus_id")}
                           for g in facts["gpus"]]
    assert strip(ours) == strip(reference)


def test_planner_on_the_recorded_two_h200_host():
    """TP must divide the 32 heads and stay inside the NVLink group: on 2 GPUs, 1 or 2.
    FP8-block fits one GPU, so auto gives 2 replicas; TP 2 doubles KV per replica."""
    from ansible.module_utils.vllm_planner import plan

    facts = build_facts(snapshot("h200-x2-nvswitch"))
    models = FIXTURES.parents[2] / "roles" / "preflight" / "files" / "models"
    fp8 = json.loads((models / "gemma-4-31B-it-FP8-block.json").read_text())
    auto = plan(fp8, facts["gpus"], nvlink_fully_connected=facts["nvlink_fully_connected"],
                max_model_len=32768)
    assert (auto["tensor_parallel_size"], auto["replicas"]) == (1, 2)
    tp2 = plan(fp8, facts["gpus"], tensor_parallel_size=2, max_model_len=32768, engine_version="0.25.1",
                   shutdown_timeout=0,
               nvlink_fully_connected=facts["nvlink_fully_connected"])
    assert tp2["warnings"] == [] and tp2["kv_cache_tokens"] > 2 * auto["kv_cache_tokens"]
