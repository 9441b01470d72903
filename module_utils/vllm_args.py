"""Operator-supplied vLLM flags and environment variables, checked against vLLM 0.33.

The project's seed guides recommend flags and variables that vLLM does not have or
no longer has; each is refused (or warned about) here with the reason, before any
host changes.  Facts: shared/reference/deployment-facts.md (vLLM 0.33
``engine/arg_utils.py`` and ``envs.py``).
"""
from __future__ import annotations

REFUSED_FLAGS = {
    "swap-space": "was removed from vLLM; `vllm serve` exits with 'unrecognized arguments'",
    "prometheus-port": "does not exist: metrics are served on /metrics of the API port",
    "prometheus-host": "does not exist: metrics are served on /metrics of the API port",
    "enable-request-id": "does not exist (--enable-request-id-headers does); argparse prefix "
                         "matching could silently turn it into another flag",
}
REFUSED_ENV = {
    "VLLM_USE_RoPE_KERNEL": "is not a vLLM variable (vllm/envs.py has no such setting)",
    "VLLM_USE_TOKENIZER_KERNEL": "is not a vLLM variable (vllm/envs.py has no such setting)",
    "VLLM_MAX_NUM_BATCHED_TOKENS": "is not a vLLM variable; set the max-num-batched-tokens flag",
    "VLLM_DISABLE_LOG_STATS": "is not a vLLM variable; the flag --disable-log-stats exists "
                              "but removes every vllm:* metric",
    "VLLM_ATTENTION_BACKEND": "was removed from vLLM; use the attention-backend flag",
}
# Flags the planner decides; operators set the planner's variables instead so that
# the plan and the running configuration cannot disagree.
PLANNED_FLAGS = {
    "tensor-parallel-size": "tensor_parallel_size",
    "max-model-len": "max_model_len",
    "gpu-memory-utilization": "gpu_memory_utilization",
    "kv-cache-dtype": "kv_cache_dtype",
    "block-size": "block_size",
    "quantization": "quantization",
}


def flag_name(key: str) -> str:
    return str(key).lstrip("-").replace("_", "-")


def check(args: dict, env: dict) -> tuple[list, list]:
    """Return (errors, warnings); each error is ``(key, reason)``."""
    errors, warnings = [], []
    for key, value in (args or {}).items():
        flag = flag_name(key)
        if flag in REFUSED_FLAGS:
            errors.append((key, "--%s %s" % (flag, REFUSED_FLAGS[flag])))
        elif flag in PLANNED_FLAGS:
            errors.append((key, "--%s is planned: set %s instead" % (flag, PLANNED_FLAGS[flag])))
        elif flag == "disable-log-stats" and value:
            warnings.append("--disable-log-stats removes every vllm:* series from /metrics, "
                            "so Prometheus monitoring sees nothing")
        elif flag == "enforce-eager" and value:
            warnings.append("--enforce-eager turns CUDA graphs off and costs decode throughput "
                            "(the seed's '15% kernel launch timeout' claim is unsupported)")
    for name in (env or {}):
        if name in REFUSED_ENV:
            errors.append((name, "%s %s" % (name, REFUSED_ENV[name])))
    return errors, warnings
