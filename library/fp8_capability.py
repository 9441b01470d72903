#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Say how vLLM will run a checkpoint's quantization on each GPU."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: fp8_capability
short_description: Say how vLLM runs a checkpoint (FP8, FP8-block, AWQ, BF16) on each GPU
description:
  - Per GPU, the FP8 capability from the compute capability - C(native) (8.9 and up - Ada,
    Hopper, Blackwell - W8A8), C(weight_only) (7.5 to 8.8, A100 and friends - W8A16 through
    Marlin) or C(unsupported).
  - Given the checkpoint's C(quantization_config) (compressed-tensors FP8-block, fp8, AWQ, GPTQ
    or none), how vLLM will run it and which C(--quantization) flag to pass - none for
    pre-quantized checkpoints, whose method vLLM reads from config.json.
  - Refuses an operator's C(--quantization) that contradicts the checkpoint (the seed guide's
    C(--quantization fp8) on a compressed-tensors checkpoint, which makes vLLM stop).
  - Optionally probes FP8 for real with a tiny C(torch._scaled_mm) in C(float8_e4m3fn) when
    torch is importable on the host.
version_added: "0.1.0"
author: vllm-fleet
options:
  gpus:
    description: GPUs as gpu_topology reports them; each needs C(compute_capability).
    type: list
    elements: dict
    required: true
  quantization_config:
    description: The checkpoint's C(quantization_config) from config.json; omit for unquantized.
    type: dict
  quantization:
    description: The C(--quantization) value an operator asks for, if any.
    type: str
  probe:
    description: Run the C(torch._scaled_mm) FP8 probe on each GPU that claims native FP8.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Decide how the FP8-block checkpoint runs here
  fp8_capability:
    gpus: "{{ ansible_facts.gpu_topology.gpus }}"
    quantization_config: "{{ (lookup('ansible.builtin.file', 'config.json') | from_json).quantization_config }}"
    probe: true
  register: fp8
"""

RETURN = r"""
gpus:
  description: Per GPU, the FP8 mode and how vLLM runs the checkpoint on it.
  returned: always
  type: list
  elements: dict
  sample:
    - index: 0
      name: NVIDIA H200
      compute_capability: "9.0"
      fp8: native
      mode: fp8_native
      detail: W8A8 FP8 (weights and activations in FP8)
      scheme: fp8_block
      probe: ok (32, 32) torch.bfloat16
quantization_flag:
  description: The C(--quantization) value to pass; null means pass none.
  returned: always
  type: str
omit_quantization_flag:
  description: True when the checkpoint is pre-quantized and vLLM reads the method from config.json.
  returned: always
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.fp8 import how_vllm_runs, probe_scaled_mm


def main():
    module = AnsibleModule(
        argument_spec=dict(
            gpus=dict(type="list", elements="dict", required=True),
            quantization_config=dict(type="dict"),
            quantization=dict(type="str"),
            probe=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    qconfig, requested = module.params["quantization_config"], module.params["quantization"]
    torch = None
    if module.params["probe"]:
        try:
            import torch
        except ImportError:
            torch = None
    results, errors = [], []
    for position, gpu in enumerate(module.params["gpus"]):
        if not gpu.get("compute_capability"):
            module.fail_json(msg="gpus[%d]: no compute_capability" % position)
        run = how_vllm_runs(gpu["compute_capability"], qconfig, requested)
        entry = dict(index=gpu.get("index", position), name=gpu.get("name"),
                     compute_capability=str(gpu["compute_capability"]), **run)
        if module.params["probe"] and run["fp8"] == "native":
            entry["probe"] = (probe_scaled_mm(torch, entry["index"]) if torch
                              else "skipped: torch is not installed on this host")
        if not run["supported"]:
            errors.append("GPU %s (%s): %s" % (entry["index"], entry["name"], run["error"]))
        results.append(entry)
    if errors:
        module.fail_json(msg="; ".join(errors), gpus=results)
    flags = {r["quantization_flag"] for r in results}
    module.exit_json(changed=False, gpus=results,
                     quantization_flag=flags.pop() if len(flags) == 1 else None,
                     omit_quantization_flag=bool(qconfig))


if __name__ == "__main__":
    main()
