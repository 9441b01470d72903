"""Read vLLM's start-up log: the figures the planner is calibrated against.

Lines (vLLM 0.33; the CPU build says "CPU" where the CUDA build says "GPU"):
  Model loading took 29.97 GiB memory and 41.2 seconds
  Available KV cache memory: 97.61 GiB
  GPU KV cache size: 335,123 tokens
  Maximum concurrency for 32,768 tokens per request: 10.23x
(the last two may share one line).
"""
from __future__ import annotations

import re

import yaml
from ansible.module_utils.vllm_planner import plan

PATTERNS = {
    "model_loading_gib": r"Model loading took ([\d.]+) GiB",
    "available_kv_cache_gib": r"Available KV cache memory: ([\d.]+) GiB",
    "kv_cache_tokens": r"(?:GPU|CPU|NPU) KV cache size: ([\d,]+) tokens",
    "max_model_len": r"Maximum concurrency for ([\d,]+) tokens per request",
    "max_concurrency": r"Maximum concurrency for [\d,]+ tokens per request: ([\d.]+)x",
}


def parse_startup_log(text: str) -> dict:
    """Return the figures found (the last occurrence of each), numbers as numbers."""
    found = {}
    for key, pattern in PATTERNS.items():
        matches = re.findall(pattern, text)
        if matches:
            value = matches[-1].replace(",", "")
            found[key] = float(value) if "." in value else int(value)
    return found


def replay(case: dict, model_config: dict) -> tuple[dict, dict]:
    """A recorded start-up (tests/fixtures/calibration/*.json): the planner's plan for the
    settings vLLM ran with, and the figures vLLM logged."""
    ran_with = yaml.safe_load(case.get("config", "")) or {}
    predicted = plan(model_config, case.get("gpus", []), engine=case["engine"],
                     max_model_len=case["max_model_len"],
                     cpu_kv_cache_bytes=case.get("cpu_kv_cache_bytes"),
                     kv_cache_dtype=case.get("kv_cache_dtype", "auto"),
                     vllm_args={k: v for k, v in ran_with.items() if k == "enforce-eager"})
    return predicted, parse_startup_log(case["log"])
