"""Operator-supplied vLLM flags and environment variables, checked before any host changes.

The project's seed guides recommend flags and variables that vLLM does not have or
no longer has; each is refused (or warned about) here with the reason.  Which ones,
and why, is the version table's (``vllm_versions``; facts in docs/vllm.md).
"""
from __future__ import annotations

import re

from ansible.module_utils.vllm_versions import REFUSED_ENV, REFUSED_FLAGS

# What POSIX calls a portable name (IEEE Std 1003.1, Base Definitions 8.1): each variable is
# written as NAME=value into the instance's environment file, so anything else in a name
# (a space, an '=', a line break) would become part of another line.
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# Flags the planner decides; operators set the planner's variables instead so that
# the plan and the running configuration cannot disagree.
PLANNED_FLAGS = {
    "tensor-parallel-size": "preflight_tensor_parallel_size",
    "max-model-len": "preflight_max_model_len",
    "gpu-memory-utilization": "preflight_gpu_memory_utilization",
    "kv-cache-dtype": "preflight_kv_cache_dtype",
    "block-size": "preflight_block_size",
    "quantization": "preflight_quantization",
    "model": "vllm_fleet_model_repo",
    "served-model-name": "vllm_fleet_served_model_name",
    "port": "preflight_port (or an instance's port in preflight_instances)",
    "host": "preflight_bind_address",
    "api-key": "vllm_fleet_api_key (vllm_fleet_api_key_also_accepted while it rotates)",
    "load-format": "vllm_fleet_model_load_format",
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
    for name, value in (env or {}).items():
        if not isinstance(name, str) or not ENV_NAME.match(name):
            errors.append((name, "%r is not an environment variable name (letters, digits and '_', not "
                                 "starting with a digit)" % (name,)))
        elif name in REFUSED_ENV:
            errors.append((name, "%s %s" % (name, REFUSED_ENV[name])))
        elif value is None or isinstance(value, (dict, list)):
            errors.append((name, "%s has the value %r: give a string or a number" % (name, value)))
    return errors, warnings
