#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Plan a vLLM deployment: tensor parallelism, context, KV cache, concurrency."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_plan
short_description: Plan vLLM's tensor parallelism, context length, KV cache and concurrency
description:
  - Computes, from a model's config.json and the GPUs (gathered by gpu_topology or declared in
    the inventory), what vLLM will do - weights per GPU, KV-cache bytes per token, KV-cache
    tokens, maximum concurrency at O(max_model_len) - and the flags to pass.
  - Models Gemma 4's hybrid attention (sliding-window layers with their own KV heads and head
    size, full layers with C(global_head_dim) and K=V) and dense models, with vLLM's own KV
    grouping and page arithmetic. Formulas and the vLLM source files they follow are in
    C(module_utils/vllm_planner.py).
  - Fails, naming the parameter, when the model does not fit, when the tensor-parallel size does
    not divide the attention heads or exceeds the GPU count, when a value is out of range, or
    when operator flags are ones vLLM does not have (C(--swap-space), C(--prometheus-port), ...; the
    version table C(module_utils/vllm_versions.py) says which), or when the instances do not fit the
    host.
  - Returns the instances with the final vLLM flags of each, which the C(vllm_service) role
    renders as they are.
version_added: "0.1.0"
author: vllm-fleet
options:
  model_config:
    description: The model's config.json, as a dict or a path on the managed host.
    type: raw
    required: true
  gpus:
    description: GPUs with C(name), C(memory_total_bytes) and C(compute_capability).
    type: list
    elements: dict
    default: []
  nvlink_fully_connected:
    description: Whether every GPU pair is NVLink/NVSwitch connected.
    type: bool
    default: false
  max_model_len:
    description: Context length in tokens, or C(auto) for the longest that fits.
    type: raw
    default: auto
  tensor_parallel_size:
    description: An integer, or C(auto) for the smallest that fits.
    type: raw
    default: auto
  kv_cache_dtype:
    description: KV cache data type.
    type: str
    default: auto
    choices: [auto, bfloat16, float16, fp8, fp8_e4m3, fp8_e5m2]
  gpu_memory_utilization:
    description: Fraction of each GPU's memory vLLM may use (vLLM's default is 0.92).
    type: float
    default: 0.92
  weight_bytes:
    description: Exact weight size (from the pinned revision's safetensors metadata); estimated from the config when omitted.
    type: int
  block_size:
    description: KV-cache block size in tokens; vLLM's default when omitted.
    type: int
  engine:
    description: The vLLM build.
    type: str
    default: cuda
    choices: [cuda, cpu, ascend]
  cpu_kv_cache_bytes:
    description: KV cache size of the cpu engine (C(VLLM_CPU_KVCACHE_SPACE)).
    type: int
  quantization:
    description: An operator's C(--quantization); refused when it contradicts the checkpoint.
    type: str
  vllm_args:
    description: Extra vLLM flags (name without C(--) to value), checked and merged into the plan.
    type: dict
    default: {}
  vllm_env:
    description: Extra environment for vLLM, checked for variables vLLM does not have.
    type: dict
    default: {}
  engine_version:
    description:
      - The engine's release the host will run, from the version table (C(module_utils/vllm_versions.py));
        empty is the table's default. A plan for another vLLM release than the one the planner's factors
        were measured on warns.
    type: str
    default: ""
  instances:
    description:
      - The operator's instances, C([{name, port, devices, args}]); empty runs one instance per
        group of C(tensor_parallel_size) GPUs. Overlapping devices, devices the host does not have,
        a device count other than the tensor-parallel size, duplicate names or ports are refused.
    type: list
    elements: raw
    default: []
  port:
    description: Port of the first instance; the others take the next ones unless they name a port.
    type: int
    default: 8000
  bind_address:
    description: Address every instance listens on.
    type: str
    default: 0.0.0.0
  served_model_name:
    description: The model name clients send (C(--served-model-name)); empty leaves vLLM's default.
    type: str
    default: ""
  sse_keep_alive_interval:
    description:
      - Seconds after which an idle stream gets an SSE comment (C(--sse-keep-alive-interval)), so that a
        gateway's read timeout does not cut it; 0 for none. Set only where the release has the flag.
    type: int
    default: 0
  shutdown_timeout:
    description:
      - Seconds a stopping instance lets its running requests finish (C(--shutdown-timeout); vLLM's own
        default 0 aborts them). C(auto) plans it from the longest request the plan allows, C(max_model_len)
        tokens at O(decode_seconds_per_token) each, within 30 s and an hour. Set only where the release
        has the flag.
    type: raw
    default: auto
  decode_seconds_per_token:
    description: The slowest decode step C(auto) plans the graceful stop with, in seconds per token.
    type: float
    default: 0.05
  slo:
    description:
      - The latency objective, C(ttft_p99_s) (seconds) and C(tpot_mean_ms) (milliseconds); empty for none.
        With it the plan carries C(tuning) (tuned or computed, and the candidates C(playbooks/tune.yml)
        measures).
    type: dict
    default: {}
  workload:
    description: The workload shape the SLO is for, C(input_len), C(output_len), C(target_concurrency).
    type: dict
    default: {}
  fleet_request_rate:
    description:
      - Requests per second the whole fleet must hold at the SLO; 0 for none. With it the plan's
        C(capacity) says how many hosts like this one that takes.
    type: float
    default: 0
  tuned:
    description:
      - The tuned-settings records by hardware profile (C(roles/preflight/files/tuned/*.json)); a record
        that matches the profile, SLO and workload and beat vLLM's defaults joins its settings to the flags.
    type: dict
    default: {}
  model_name:
    description: The model's name in the hardware profile (catalogue entry or C(org/name)).
    type: str
    default: ""
  pipeline_parallel_size:
    description: Pipeline stages across the serving group's hosts, or C(auto) (one host when the model fits).
    type: raw
    default: auto
  nodes:
    description: Hosts in this host's serving group (1 serves alone).
    type: int
    default: 1
  node_rank:
    description: This host's place in its serving group (0 is the head).
    type: int
    default: 0
  master_addr:
    description: The head's address, which the workers of a plan across hosts reach.
    type: str
    default: ""
  interconnect:
    description: How the serving group's hosts are connected (C(infiniband), C(roce), C(ethernet)).
    type: str
    default: ""
  load_format:
    description: C(auto) serves the weights; C(dummy) random weights (a capacity rehearsal).
    type: str
    default: auto
    choices: [auto, dummy]
  variable_prefix:
    description: Prefix for parameter names in error messages (a role passes its own, e.g. C(preflight_)).
    type: str
    default: ""
  variable_names:
    description:
      - Inventory variable to name in error messages, per parameter, where it is not I(variable_prefix)
        + the parameter (e.g. C(engine) is C(vllm_fleet_engine)).
    type: dict
    default: {}
  also_accepted:
    description:
      - How many keys the engines accept besides the fleet's while it rotates (the count, never the keys);
        refused above 0 for a release whose start-up log prints C(--api-key).
    type: int
    default: 0
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Plan Gemma-4-31B FP8-block on this host's GPUs
  vllm_plan:
    model_config: /var/lib/vllm/models/RedHatAI/gemma-4-31B-it-FP8-block/current/config.json
    gpus: "{{ ansible_facts.gpu_topology.gpus }}"
    nvlink_fully_connected: "{{ ansible_facts.gpu_topology.nvlink_fully_connected }}"
    max_model_len: 32768
  register: plan
"""

RETURN = r"""
plan:
  description: The plan.
  returned: success
  type: dict
  sample:
    tensor_parallel_size: 1
    replicas: 1
    device_groups: [[0]]
    max_model_len: 32768
    parameters: 30696013824
    weight_bytes_per_gpu: 32215400448
    kv_bytes_per_token: 983040
    kv_cache_tokens: 265558
    max_concurrency: 8.1
    vllm_args: {tensor-parallel-size: 1, max-model-len: 32768, gpu-memory-utilization: 0.92}
    vllm_env: {}
    engine_version: 0.33.0
    vllm_version: 0.33.0
    calibrated_on: {vllm: 0.25.1, hardware: NVIDIA H200}
    instances:
      - name: main
        port: 8000
        devices: [0]
        args: {tensor-parallel-size: 1, max-model-len: 32768, gpu-memory-utilization: 0.92,
               host: 0.0.0.0, port: 8000, served-model-name: gemma-4-31B}
    served_model_name: gemma-4-31B
    warnings: []
"""

import json
import re

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.vllm_planner import PlanError, plan

PARAMETERS = ("max_model_len", "tensor_parallel_size", "kv_cache_dtype", "gpu_memory_utilization",
              "nvlink_fully_connected", "weight_bytes", "block_size", "engine",
              "cpu_kv_cache_bytes", "quantization", "vllm_args", "vllm_env", "engine_version",
              "decode_seconds_per_token", "slo", "workload", "fleet_request_rate", "tuned", "model_name",
              "nodes", "node_rank", "master_addr", "interconnect", "also_accepted")
SERVING = ("port", "bind_address", "served_model_name", "load_format", "sse_keep_alive_interval")


def auto_or_int(value, name):
    if value in ("auto", None) or isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    raise PlanError("%s: %r is not a positive integer or 'auto'" % (name, value))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            model_config=dict(type="raw", required=True),
            gpus=dict(type="list", elements="dict", default=[]),
            nvlink_fully_connected=dict(type="bool", default=False),
            max_model_len=dict(type="raw", default="auto"),
            tensor_parallel_size=dict(type="raw", default="auto"),
            kv_cache_dtype=dict(type="str", default="auto",
                                choices=["auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2"]),
            gpu_memory_utilization=dict(type="float", default=0.92),
            weight_bytes=dict(type="int"),
            block_size=dict(type="int"),
            engine=dict(type="str", default="cuda", choices=["cuda", "cpu", "ascend"]),
            cpu_kv_cache_bytes=dict(type="int"),
            quantization=dict(type="str"),
            vllm_args=dict(type="dict", default={}),
            vllm_env=dict(type="dict", default={}),
            engine_version=dict(type="str", default=""),
            instances=dict(type="list", elements="raw", default=[]),
            port=dict(type="int", default=8000),
            bind_address=dict(type="str", default="0.0.0.0"),
            served_model_name=dict(type="str", default=""),
            load_format=dict(type="str", default="auto", choices=["auto", "dummy"]),
            sse_keep_alive_interval=dict(type="int", default=0),
            shutdown_timeout=dict(type="raw", default="auto"),
            decode_seconds_per_token=dict(type="float", default=0.05),
            slo=dict(type="dict", default={}),
            workload=dict(type="dict", default={}),
            fleet_request_rate=dict(type="float", default=0.0),
            tuned=dict(type="dict", default={}),
            model_name=dict(type="str", default=""),
            pipeline_parallel_size=dict(type="raw", default="auto"),
            nodes=dict(type="int", default=1),
            node_rank=dict(type="int", default=0),
            master_addr=dict(type="str", default=""),
            interconnect=dict(type="str", default=""),
            variable_prefix=dict(type="str", default=""),
            variable_names=dict(type="dict", default={}),
            also_accepted=dict(type="int", default=0),
        ),
        supports_check_mode=True,
    )
    params = module.params
    config = params["model_config"]
    if isinstance(config, str):
        try:
            with open(config) as handle:
                config = json.load(handle)
        except (OSError, ValueError) as exc:
            module.fail_json(msg="%smodel_config: cannot read %s: %s"
                             % (params["variable_prefix"], config, exc))
    kwargs = {name: params[name] for name in PARAMETERS}
    kwargs["serving"] = dict({name: params[name] for name in SERVING}, declared=params["instances"])
    try:
        kwargs["max_model_len"] = auto_or_int(params["max_model_len"], "max_model_len")
        kwargs["tensor_parallel_size"] = auto_or_int(params["tensor_parallel_size"],
                                                     "tensor_parallel_size")
        kwargs["shutdown_timeout"] = auto_or_int(params["shutdown_timeout"], "shutdown_timeout")
        kwargs["pipeline_parallel_size"] = auto_or_int(params["pipeline_parallel_size"], "pipeline_parallel_size")
        result = plan(config, params["gpus"], **kwargs)
    except PlanError as exc:
        names = params["variable_names"]
        module.fail_json(msg=re.sub(r"(^|; )([a-z_]+)(?=[=:\[])",
                                    lambda m: m.group(1) + names.get(m.group(2),
                                                                     params["variable_prefix"] + m.group(2)),
                                    str(exc)))
    module.exit_json(changed=False, plan=result)


if __name__ == "__main__":
    main()
