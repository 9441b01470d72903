from __future__ import annotations

import json
import re
from pathlib import Path

import jinja2
import pytest
import yaml
from ansible.module_utils.vllm_versions import RELEASES, redacting_releases
from ansible.module_utils.vllm_planner import (
    PlanError, kv_bytes_per_token, kv_groups, model_shape, parameter_count, plan)

MODELS = Path(__file__).resolve().parents[2] / "roles" / "preflight" / "files" / "models"
H200 = {"name": "NVIDIA H200", "memory_total_bytes": 150754820096, "compute_capability": "9.0"}
# 81,559 MiB, as the lent H100 80GB HBM3's nvidia-smi reported it
H100 = {"name": "NVIDIA H100 80GB HBM3", "memory_total_bytes": 85520809984, "compute_capability": "9.0"}
A100 = {"name": "NVIDIA A100 80GB PCIe", "memory_total_bytes": 85899345920, "compute_capability": "8.0"}
L40S = {"name": "NVIDIA L40S", "memory_total_bytes": 48305799168, "compute_capability": "8.9"}
RTX4090 = {"name": "NVIDIA GeForce RTX 4090", "memory_total_bytes": 25757220864, "compute_capability": "8.9"}
LLAMA_8B = {"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
            "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
            "vocab_size": 128256, "max_position_embeddings": 131072, "torch_dtype": "bfloat16",
            "tie_word_embeddings": False}


def model(name: str) -> dict:
    return json.loads((MODELS / f"{name}.json").read_text())


def test_gemma4_31b_shape():
    shape = model_shape(model("gemma-4-31B-it"))
    assert parameter_count(shape) == pytest.approx(30.70e9, rel=0.001)
    kinds = [layer.kind for layer in shape.layers]
    assert kinds.count("sliding") == 50 and kinds.count("full") == 10
    full = next(layer for layer in shape.layers if layer.kind == "full")
    sliding = next(layer for layer in shape.layers if layer.kind == "sliding")
    assert (full.kv_heads, full.head_dim, full.window) == (4, 512, None)
    assert (sliding.kv_heads, sliding.head_dim, sliding.window) == (16, 256, 1024)
    # 50 x 2 x 16 x 256 x 2 B + 10 x 2 x (2 x 4 x 512 x 2 B): K=V layers store K and V, and
    # twice that (measured on vLLM 0.25.1, tests/fixtures/calibration/h200-*)
    assert kv_bytes_per_token(shape, 2) == 50 * 16384 + 10 * 2 * 8192 == 983040
    assert kv_bytes_per_token(shape, 1) == 491520


def test_nested_text_config_is_read():
    nested = {"architectures": ["Gemma4ForConditionalGeneration"],
              "text_config": model("gemma-4-31B-it")}
    assert parameter_count(model_shape(nested)) == parameter_count(model_shape(model("gemma-4-31B-it")))


def test_hybrid_groups_follow_vllm():
    """50 sliding + 10 full layers (pages of equal size, as measured): groups of 10."""
    groups, group_size = kv_groups(model_shape(model("gemma-4-31B-it")), tp=1, block_size=16,
                                   dtype_bytes=2)
    assert group_size == 10 and len(groups) == 6
    assert {g.page_bytes for g in groups} == {2 * 16 * 16 * 256 * 2}
    assert sorted((g.kind, g.block_size) for g in set(groups)) == [("full", 16), ("sliding", 16)]


def test_unequal_pages_are_unified_by_a_larger_block():
    """vLLM's unify_kv_cache_spec_page_size: the smaller page gets a multiple of the block."""
    config = dict(model("gemma-4-31B-it"), attention_k_eq_v=False, num_key_value_heads=16,
                  num_global_key_value_heads=None)
    config["global_head_dim"] = 128
    groups, _size = kv_groups(model_shape(config), tp=1, block_size=16, dtype_bytes=2)
    assert sorted((g.kind, g.block_size) for g in set(groups)) == [("full", 32), ("sliding", 16)]


def test_tp_replicates_kv_heads_beyond_their_count():
    shape = model_shape(model("gemma-4-31B-it"))
    # TP 8: sliding 16/8 = 2 heads, full layers 4 heads < 8 -> one (replicated) head per GPU
    assert kv_bytes_per_token(shape, 2, tp=8) == 50 * 2 * 2 * 256 * 2 + 10 * 2 * 2 * 1 * 512 * 2


def test_fp8_block_on_h200():
    p = plan(model("gemma-4-31B-it-FP8-block"), [H200], max_model_len=32768)
    assert p["tensor_parallel_size"] == 1
    assert p["weight_bytes_per_gpu"] == pytest.approx(32.2e9, rel=0.01)
    assert p["quantization"]["mode"] == "fp8_native"
    assert "quantization" not in p["vllm_args"]
    assert p["vllm_args"] == {"tensor-parallel-size": 1, "max-model-len": 32768,
                              "gpu-memory-utilization": 0.92}
    assert (p["max_num_batched_tokens"], p["max_num_seqs"]) == (8192, 1024)
    assert p["kv_cache_tokens"] == int(p["max_concurrency"] * 32768) or \
        abs(p["kv_cache_tokens"] - p["max_concurrency"] * 32768) < 32768 * 0.01


def test_fp8_kv_cache_doubles_capacity():
    auto = plan(model("gemma-4-31B-it-FP8-block"), [H200], max_model_len=8192)
    fp8 = plan(model("gemma-4-31B-it-FP8-block"), [H200], max_model_len=8192, kv_cache_dtype="fp8")
    assert fp8["kv_cache_tokens"] == pytest.approx(2 * auto["kv_cache_tokens"], rel=0.01)
    assert fp8["vllm_args"]["kv-cache-dtype"] == "fp8"


def test_sliding_layers_reserve_window_plus_batch_not_the_whole_context():
    """Doubling the context costs the full layers only; the sliding layers' share stays."""
    short = plan(model("gemma-4-31B-it"), [H200], max_model_len=16384)
    long = plan(model("gemma-4-31B-it"), [H200], max_model_len=32768)
    per_request_short = short["kv_cache_bytes_per_gpu"] / short["max_concurrency"]
    per_request_long = long["kv_cache_bytes_per_gpu"] / long["max_concurrency"]
    full_layers_extra = 10 * 16384 * 16384  # 10 full layers x 16384 more tokens x 16 KiB
    assert per_request_long - per_request_short == pytest.approx(full_layers_extra, rel=0.02)


def test_bf16_on_two_a100s_at_tp2():
    p = plan(model("gemma-4-31B-it"), [A100, A100], tensor_parallel_size=2,
             nvlink_fully_connected=True, max_model_len=32768, engine_version="0.25.1",
                shutdown_timeout=0)
    assert p["weight_bytes_per_gpu"] == pytest.approx(61.6e9 / 2, rel=0.01)
    assert (p["max_num_batched_tokens"], p["max_num_seqs"]) == (2048, 256)
    assert p["quantization"]["mode"] == "bfloat16" and p["warnings"] == []


def test_tp_over_pcie_warns():
    p = plan(model("gemma-4-31B-it-FP8-block"), [L40S, L40S], tensor_parallel_size=2,
             max_model_len=16384)
    assert any("over PCIe" in w for w in p["warnings"])


def test_auto_tp_picks_the_smallest_that_fits():
    assert plan(model("gemma-4-31B-it"), [L40S, L40S], max_model_len=8192)["tensor_parallel_size"] == 2
    p = plan(model("gemma-4-31B-it-FP8-block"), [H200] * 8, max_model_len=8192)
    assert p["tensor_parallel_size"] == 1 and p["replicas"] == 8


def test_awq_on_a_4090():
    p = plan(model("gemma-4-31B-it-AWQ"), [RTX4090], max_model_len=4096)
    assert p["quantization"]["mode"] == "int4_weight_only"
    assert p["weight_bytes_per_gpu"] < 19e9 and p["max_concurrency"] >= 1


def test_max_model_len_auto_is_the_longest_that_fits():
    p = plan(model("gemma-4-31B-it-AWQ"), [RTX4090])
    with pytest.raises(PlanError, match="does not fit"):
        plan(model("gemma-4-31B-it-AWQ"), [RTX4090], max_model_len=p["max_model_len"] + 64)


def test_cold_compile_takes_kv_memory_unless_eager():
    """A cold start's torch.compile lowers the KV pool (measured on the H200: 1.13 GiB)."""
    eager = plan(model("gemma-4-31B-it-FP8-block"), [H200], max_model_len=32768,
                 vllm_args={"enforce-eager": True})
    compiled = plan(model("gemma-4-31B-it-FP8-block"), [H200], max_model_len=32768)
    assert (eager["kv_cache_bytes_per_gpu"] - compiled["kv_cache_bytes_per_gpu"]) / 2**30 == pytest.approx(1.13, abs=0.01)
    with pytest.raises(PlanError, match=r"one request of 16384 tokens does not fit.*"
                                        r"torch\.compile takes 0\.28 GiB of it \(vllm_args\['enforce-eager'\]"):
        plan(model("gemma-4-31B-it-AWQ"), [RTX4090], max_model_len=16384)


def test_declared_gpu_count_expands():
    p = plan(model("gemma-4-31B-it-FP8-block"), [dict(H200, count=8)], max_model_len=8192)
    assert p["replicas"] == 8


def test_dense_model_is_one_uniform_group():
    shape = model_shape(LLAMA_8B)
    assert kv_bytes_per_token(shape, 2) == 32 * 2 * 8 * 128 * 2
    p = plan(LLAMA_8B, [L40S], max_model_len=8192)
    assert p["kv_cache_tokens"] == pytest.approx(p["kv_blocks"] * 16, rel=0.001)


@pytest.mark.parametrize("gpus,kwargs,message", [
    ([RTX4090], {"max_model_len": 4096, "tensor_parallel_size": 1},
     "tensor_parallel_size=1: the model does not fit: 57.4 GiB of weights per GPU"),
    ([RTX4090], {"max_model_len": 4096}, "tensor_parallel_size=auto: the model does not fit on 1 GPU(s) "
                                         "of 24.0 GiB (tp=1: 57.4 GiB of weights per GPU leave no KV cache"),
    ([H200] * 4, {"tensor_parallel_size": 3}, "tensor_parallel_size=3 does not divide the model's 32 attention heads"),
    ([H200], {"tensor_parallel_size": 2}, "tensor_parallel_size=2 exceeds the 1 GPU(s)"),
    ([H200], {"max_model_len": 300000}, "max_model_len=300000 exceeds the model's max_position_embeddings (262144)"),
    ([H200], {"gpu_memory_utilization": 92}, "gpu_memory_utilization=92 is out of range"),
    ([H200], {"kv_cache_dtype": "int4"}, "kv_cache_dtype: 'int4' is not one of"),
    ([H200], {"block_size": 24}, "block_size=24: the CUDA attention backends take multiples of 16"),
    ([], {}, "gpus: no accelerator found or declared for the cuda engine"),
    ([{"name": "Tesla P100", "memory_total_bytes": 17071734784, "compute_capability": "6.0"}], {},
     "gpus: compute capability 6.0 is below 7.0"),
    ([dict(A100, mig_enabled=True)], {}, "gpus: GPU 0 (NVIDIA A100 80GB PCIe) has MIG enabled"),
    ([{"name": "NVIDIA H200", "count": 2}], {}, "gpus: GPU 0 lacks memory_total_bytes, compute_capability"),
])
def test_impossible_settings_are_refused(gpus, kwargs, message):
    with pytest.raises(PlanError) as err:
        plan(model("gemma-4-31B-it"), gpus, **kwargs)
    assert message in str(err.value)


@pytest.mark.parametrize("kwargs,message", [
    ({"quantization": "fp8"}, "quantization: --quantization fp8 contradicts the checkpoint's "
                              "quantization_config (compressed-tensors)"),
    ({"vllm_args": {"swap-space": 16}}, "vllm_args['swap-space']: --swap-space was removed"),
    ({"vllm_args": {"prometheus_port": 9000}}, "--prometheus-port does not exist"),
    ({"vllm_args": {"enable-request-id": True}}, "--enable-request-id-headers does"),
    ({"vllm_args": {"tensor-parallel-size": 2}}, "--tensor-parallel-size is planned: set preflight_tensor_parallel_size"),
    ({"vllm_args": {"api-key": "k" * 16}}, "--api-key is planned: set vllm_fleet_api_key"),
    # 0.25.1 prints --api-key in its start-up log: no second key in its --config file
    ({"also_accepted": 1, "engine_version": "0.25.1"},
     "also_accepted: the cuda engine's release 0.25.1 (vLLM 0.25.1) prints --api-key in clear in its start-up log"),
    ({"vllm_env": {"VLLM_ATTENTION_BACKEND": "FLASH_ATTN"}}, "use the attention-backend flag"),
    ({"vllm_env": {"VLLM_DISABLE_LOG_STATS": "1"}}, "VLLM_DISABLE_LOG_STATS is not a vLLM variable"),
    ({"vllm_env": {"HF_HOME=/data": "1"}}, "vllm_env['HF_HOME=/data']: 'HF_HOME=/data' is not an environment variable"),
    ({"vllm_env": {"A\nLD_PRELOAD": "/tmp/x.so"}}, "'A\\nLD_PRELOAD' is not an environment variable name"),
    ({"vllm_env": {"2FAST": "1"}}, "'2FAST' is not an environment variable name"),
    ({"vllm_env": {"VLLM_LOGGING_LEVEL": None}}, "VLLM_LOGGING_LEVEL has the value None: give a string or a number"),
])
def test_seed_guide_mistakes_are_refused(kwargs, message):
    with pytest.raises(PlanError) as err:
        plan(model("gemma-4-31B-it-FP8-block"), [H200], max_model_len=8192, **kwargs)
    assert message in str(err.value)


def test_large_block_size_and_log_stats_warn():
    p = plan(model("gemma-4-31B-it-FP8-block"), [H200], max_model_len=8192, block_size=2048,
             vllm_args={"disable-log-stats": True, "enforce-eager": True})
    text = " ".join(p["warnings"])
    assert "not the FP8 'block'" in text and "removes every vllm:* series" in text
    assert "CUDA graphs off" in text
    assert p["vllm_args"]["block-size"] == 2048 and p["vllm_args"]["disable-log-stats"] is True


def test_online_fp8_for_an_unquantized_checkpoint():
    p = plan(model("gemma-4-31B-it"), [L40S, L40S], max_model_len=8192, quantization="fp8",
             tensor_parallel_size=2)
    assert p["vllm_args"]["quantization"] == "fp8"


def test_replicas_get_their_own_device_groups():
    p = plan(model("gemma-4-31B-it"), [dict(L40S, count=4)], max_model_len=8192)
    assert p["tensor_parallel_size"] == 2 and p["device_groups"] == [[0, 1], [2, 3]]


def test_the_cpu_engine_carries_its_kv_cache_size_in_the_environment():
    p = plan(model("tiny-gemma4"), [], engine="cpu", max_model_len=1024,
             cpu_kv_cache_bytes=2 * 1073741824, vllm_env={"VLLM_LOGGING_LEVEL": "DEBUG"})
    assert p["vllm_env"] == {"VLLM_CPU_KVCACHE_SPACE": "2", "VLLM_LOGGING_LEVEL": "DEBUG"}
    assert p["device_groups"] == [[]] and "gpu-memory-utilization" not in p["vllm_args"]


def test_an_fp8_kv_cache_says_what_it_buys_and_costs():
    fp8 = plan(model("gemma-4-31B-it-FP8-block"), [H200], max_model_len=32768, kv_cache_dtype="fp8",
               engine_version="0.25.1",
                shutdown_timeout=0)
    auto = plan(model("gemma-4-31B-it-FP8-block"), [H200], max_model_len=32768, engine_version="0.25.1",
                shutdown_timeout=0)
    assert fp8["kv_cache_tokens"] > 1.9 * auto["kv_cache_tokens"]
    assert fp8["warnings"] == [
        "kv_cache_dtype=fp8 holds %d tokens (concurrency %.2f at max_model_len) where auto holds %d "
        "(%.2f); on this GPU (NVIDIA H200, vLLM 0.25.1) it served 5-14 %% fewer tokens/s than auto at "
        "1-128 concurrent requests: choose it only when auto's concurrency is too low for the traffic"
        % (fp8["kv_cache_tokens"], fp8["max_concurrency"], auto["kv_cache_tokens"], auto["max_concurrency"])]
    assert auto["warnings"] == []


def test_the_fp8_kv_cost_is_only_claimed_where_it_was_measured():
    fp8 = plan(model("gemma-4-31B-it-FP8-block"), [L40S, L40S], max_model_len=8192, kv_cache_dtype="fp8",
               tensor_parallel_size=2, nvlink_fully_connected=True, engine_version="0.25.1",
                shutdown_timeout=0)
    text = " ".join(fp8["warnings"])
    assert "its throughput cost on NVIDIA L40S is not measured" in text and "5-14" not in text


def test_an_fp8_kv_cache_on_an_h100_says_what_it_held_there():
    fp8 = plan(model("gemma-4-31B-it-FP8-block"), [H100], max_model_len=32768, kv_cache_dtype="fp8",
               engine_version="0.25.1", shutdown_timeout=0)
    [warning] = [w for w in fp8["warnings"] if w.startswith("kv_cache_dtype=fp8")]
    assert warning.endswith("; on this GPU (NVIDIA H100 80GB HBM3, vLLM 0.25.1) at 1024 in / 256 out it held "
                            "4.5 requests/s within a 2 s p99 TTFT and 50 ms mean TPOT (failed 4.625) in two starts, "
                            "where auto failed 3.75 in two starts (1.20x) and held 3.9 in another: the larger "
                            "cache pays where auto's cache is what fills"), warning


def test_a_plan_says_which_vllm_its_factors_were_measured_on():
    measured = plan(model("gemma-4-31B-it-FP8-block"), [H200], max_model_len=32768, engine_version="0.25.1",
                shutdown_timeout=0)
    current = plan(model("gemma-4-31B-it-FP8-block"), [H200], max_model_len=32768)
    assert measured["calibrated_on"] == {"vllm": "0.25.1", "hardware": "NVIDIA H200"}
    assert (measured["engine_version"], measured["vllm_version"], measured["warnings"]) == ("0.25.1", "0.25.1", [])
    assert current["engine_version"] == RELEASES["cuda"]["default"] == "0.33.0"
    assert current["warnings"] == [
        "the planner's factors were measured on vLLM 0.25.1 (NVIDIA H200); this host runs vLLM "
        "0.33.0, so the KV cache figures are computed, not measured: check them against the start-up log "
        "(bench/gpu_rehearsal.py calibrate)"]
    with pytest.raises(PlanError, match=r"^engine_version: '0.1.0' is not a release of the cuda engine "
                                        r"in the version table \(0.25.1, 0.33.0\)$"):
        plan(model("gemma-4-31B-it-FP8-block"), [H200], engine_version="0.1.0")


SERVING = {"port": 8000, "bind_address": "10.0.0.5", "served_model_name": "gemma-4-31B"}


def test_the_plan_carries_one_instance_per_device_group_with_its_final_flags():
    p = plan(model("gemma-4-31B-it"), [dict(L40S, count=4)], max_model_len=8192, engine_version="0.25.1",
             vllm_args={"enable-prefix-caching": True}, serving=SERVING)
    assert [(i["name"], i["port"], i["devices"]) for i in p["instances"]] == [
        ("replica0", 8000, [0, 1]), ("replica1", 8001, [2, 3])]
    assert p["instances"][1]["args"] == dict(p["vllm_args"], host="10.0.0.5", port=8001,
                                             **{"served-model-name": "gemma-4-31B"})
    assert p["instances"][1]["args"]["enable-prefix-caching"] is True


def test_a_single_instance_is_main_and_a_rehearsal_loads_dummy_weights():
    p = plan(model("tiny-gemma4"), [], engine="cpu", max_model_len=1024, cpu_kv_cache_bytes=1 << 30,
             serving=dict(SERVING, load_format="dummy"))
    assert [(i["name"], i["port"], i["devices"]) for i in p["instances"]] == [("main", 8000, [])]
    assert p["instances"][0]["args"]["load-format"] == "dummy"


def test_declared_instances_keep_their_names_ports_and_own_flags():
    p = plan(model("gemma-4-31B-it-FP8-block"), [dict(H200, count=2)], max_model_len=8192, serving=dict(
        SERVING, declared=[{"name": "chat", "port": 9000, "devices": [1]},
                           {"name": "batch", "devices": [0], "args": {"max-num-seqs": 8}}]))
    assert [(i["name"], i["port"], i["devices"]) for i in p["instances"]] == [
        ("chat", 9000, [1]), ("batch", 8001, [0])]
    assert p["instances"][1]["args"]["max-num-seqs"] == 8 and "max-num-seqs" not in p["instances"][0]["args"]


@pytest.mark.parametrize("declared, message", [
    ([{"name": "a", "devices": [0]}, {"name": "b", "devices": [0]}],
     "instances[1] (b): device 0 is also a's; two instances cannot share a GPU"),
    ([{"name": "a", "devices": [2]}],
     "instances[0] (a): device 2 does not exist; the host has 2 GPU(s), 0-1"),
    ([{"name": "a", "devices": [0, 1]}],
     "instances[0] (a): 2 device(s) [0, 1], but tensor_parallel_size is 1: an instance takes exactly "
     "tensor_parallel_size GPUs"),
    ([{"name": "a", "devices": [0]}, {"name": "a", "devices": [1]}],
     "instances: name a is given to instances[0] and instances[1]; each instance needs its own name"),
    ([{"name": "a", "port": 9000, "devices": [0]}, {"name": "b", "port": 9000, "devices": [1]}],
     "instances: port 9000 is given to instances[0] and instances[1]; each instance needs its own port"),
    ([{"name": "a b", "devices": [0]}],
     "instances[0] (a b): the name must be made of letters, digits, '.', '_' or '-'"),
    ([{"name": "a", "devices": [0], "args": {"swap-space": 4}}],
     "instances[0] (a): args['swap-space']: --swap-space was removed from vLLM"),
])
def test_declared_instances_that_cannot_run_are_refused(declared, message):
    with pytest.raises(PlanError) as refused:
        plan(model("gemma-4-31B-it-FP8-block"), [dict(H200, count=2)], max_model_len=8192,
             tensor_parallel_size=1, serving=dict(SERVING, declared=declared))
    assert str(refused.value).startswith(message)


def test_streams_keep_alive_behind_a_gateway_only_where_the_release_has_the_flag():
    cpu = plan(model("tiny-gemma4"), [], engine="cpu", max_model_len=1024, cpu_kv_cache_bytes=1 << 30,
               serving=dict(SERVING, sse_keep_alive_interval=30))
    assert cpu["instances"][0]["args"]["sse-keep-alive-interval"] == 30
    old = plan(model("gemma-4-31B-it-FP8-block"), [H200], max_model_len=8192, engine_version="0.25.1",
               serving=dict(SERVING, sse_keep_alive_interval=30))
    assert "sse-keep-alive-interval" not in old["instances"][0]["args"]


@pytest.mark.parametrize("max_model_len, expected", [(1024, 52), (32768, 1639), (256, 30), (131072, 3600)])
def test_the_graceful_stop_is_planned_from_the_longest_request(max_model_len, expected):
    p = plan(model("gemma-4-31B-it-FP8-block"), [H200], max_model_len=max_model_len, serving=SERVING)
    assert p["shutdown_timeout"] == expected
    assert p["instances"][0]["args"]["shutdown-timeout"] == expected


def test_a_graceful_stop_of_the_operators_own_or_none():
    p = plan(model("gemma-4-31B-it-FP8-block"), [H200], max_model_len=8192, shutdown_timeout=0)
    assert p["shutdown_timeout"] == 0 and "shutdown-timeout" not in p["instances"][0]["args"]
    p = plan(model("gemma-4-31B-it-FP8-block"), [H200], max_model_len=8192, shutdown_timeout=7,
             decode_seconds_per_token=1)
    assert p["shutdown_timeout"] == 7


def test_a_release_without_the_flag_says_a_restart_aborts():
    p = plan(model("gemma-4-31B-it-FP8-block"), [H200], max_model_len=8192, engine_version="0.25.1")
    assert p["shutdown_timeout"] == 0 and "shutdown-timeout" not in p["instances"][0]["args"]
    assert p["warnings"] == ["shutdown_timeout: vLLM 0.25.1 has no --shutdown-timeout in the version table: "
                             "a restart aborts its running requests (drain the host first)"]


@pytest.mark.parametrize("kwargs, says", [
    ({"shutdown_timeout": -1}, "shutdown_timeout: -1 is not 'auto' or a whole number"),
    ({"shutdown_timeout": "soon"}, "shutdown_timeout: 'soon' is not"),
    ({"decode_seconds_per_token": 0}, "decode_seconds_per_token: 0 is not a number of seconds above 0"),
    ({"decode_seconds_per_token": 50}, "at most 10"),
])
def test_a_bad_graceful_stop_is_refused(kwargs, says):
    with pytest.raises(PlanError, match=re.escape(says)):
        plan(model("gemma-4-31B-it-FP8-block"), [H200], max_model_len=8192, **kwargs)


def test_the_served_name_has_one_owner_the_plan():
    """With vllm_fleet_served_model_name empty (its default) the instances serve the whole
    repository name; the benchmark and diagnose ask for the plan's name, not a name of
    their own making (they asked for the repository's last part)."""
    root = Path(__file__).resolve().parents[2]
    settings = {"vllm_fleet_served_model_name": "", "vllm_fleet_model_repo": "google/gemma-4-31B-it"}
    env = jinja2.Environment()

    def value(text: str, **context):
        return env.from_string(text).render(**settings, **context)
    task = next(t for t in yaml.safe_load((root / "roles/preflight/tasks/plan.yml").read_text()) if "vllm_plan" in t)
    served = value(task["vllm_plan"]["served_model_name"])
    p = plan(model("gemma-4-31B-it-FP8-block"), [H200], max_model_len=8192,
             serving=dict(SERVING, served_model_name=served))
    assert p["served_model_name"] == p["instances"][0]["args"]["served-model-name"] == "google/gemma-4-31B-it"
    benchmark = yaml.safe_load((root / "roles/benchmark/vars/main.yml").read_text())["_benchmark_served"]
    diagnose = yaml.safe_load((root / "playbooks/diagnose.yml").read_text())[0]["vars"]["diagnose_served_model_name"]
    assert value(benchmark, preflight_plan=p) == value(diagnose, preflight_plan=p) == "google/gemma-4-31B-it"


def test_float16_on_gemma4_warns_with_the_reason_and_is_refused_where_vllm_refuses_it():
    """vLLM refuses --dtype float16 for gemma2/gemma3/gemma3_text/glm4 (_FLOAT16_NOT_SUPPORTED_MODELS)
    and starts Gemma 4 with it: the plan warns there and refuses where vLLM would."""
    config = model("gemma-4-31B-it")
    p = plan(config, [H200], max_model_len=8192, vllm_args={"dtype": "half"})
    assert [w for w in p["warnings"] if w.startswith("vllm_args['dtype']=half: ")] == [
        "vllm_args['dtype']=half: vLLM starts gemma4_text in float16 (vllm-cpu 0.32.0 refuses it only for gemma2, "
        "gemma3, gemma3_text and glm4: 'Numerical instability'), but the checkpoint is bfloat16 and Gemma's "
        "activations can exceed float16's range (65,504): keep the checkpoint's dtype"]
    assert not any("float16" in w for w in plan(config, [H200], max_model_len=8192,
                                                 vllm_args={"dtype": "bfloat16"})["warnings"])
    with pytest.raises(PlanError) as err:
        plan(dict(config, model_type="gemma3_text"), [H200], max_model_len=8192, vllm_args={"dtype": "float16"})
    assert str(err.value) == ("vllm_args['dtype']: vLLM refuses float16 for model type 'gemma3_text': "
                              "Numerical instability. Please use bfloat16 or float32 instead.")


def test_a_rotating_engine_key_needs_a_release_whose_log_redacts_it():
    """Several keys go into the --config file, which vLLM logs at start-up: only the
    releases whose log prints '***' for --api-key take them."""
    assert redacting_releases() == ["cpu 0.32.0", "cuda 0.33.0"]
    assert plan(model("gemma-4-31B-it-FP8-block"), [H200], max_model_len=8192, also_accepted=1)["engine_version"] \
        == "0.33.0"
    with pytest.raises(PlanError, match="rotate the engines' key on a release that redacts it "
                                        r"\(cpu 0.32.0, cuda 0.33.0\), or change it at once"):
        plan(model("gemma-4-31B-it-FP8-block"), [H200], max_model_len=8192, also_accepted=1, engine_version="0.25.1")
