#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Gather NVIDIA GPU facts and topology through NVML."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_topology
short_description: Gather NVIDIA GPU facts and interconnect topology through NVML
description:
  - Reads every GPU through NVML (the C(nvidia-ml-py) binding, C(pynvml)) and sets
    C(ansible_facts.gpu_topology) - driver and CUDA driver versions, per GPU its name, UUID,
    compute capability, memory, persistence, MIG and ECC modes, PCIe generation and width and
    active NVLink count, and per GPU pair the connection (C(nvlink), C(nvswitch) or C(pcie)),
    the peer-to-peer read status and the common PCIe ancestor.
  - Derives C(nvlink_fully_connected), C(nvswitch_present) (fabric manager needed) and
    C(nccl_advice) for tensor parallelism on PCIe-only hosts.
  - A host without GPU, driver or C(nvidia-ml-py) gets C(gpus=[]) and a C(reason); the module
    does not fail.
  - Passthrough and PCIe-only GPUs raise NotSupported on NVLink calls; that is recorded, not fatal.
version_added: "0.1.0"
author: vllm-fleet
requirements:
  - nvidia-ml-py on the managed host (only to read live NVML)
options:
  snapshot:
    description:
      - Path (on the managed host) of a recorded NVML snapshot to use instead of live NVML,
        as returned in RV(gpu_topology_snapshot) with O(record=true).
    type: path
  record:
    description: Also return the raw NVML answers (RV(gpu_topology_snapshot)), to keep as a fixture.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  facts:
    support: full
notes:
  - NVML ignores C(CUDA_VISIBLE_DEVICES); every GPU of the host is reported.
"""

EXAMPLES = r"""
- name: Gather GPU facts
  gpu_topology:

- name: Report whether fabric manager is needed
  ansible.builtin.debug:
    msg: "NVSwitch present: {{ ansible_facts.gpu_topology.nvswitch_present }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts to add to ansible_facts.
  returned: always
  type: dict
  contains:
    gpu_topology:
      description: GPUs, pairs, flags and advice.
      type: dict
      sample:
        driver_version: "580.159.04"
        cuda_driver_version: "13.0"
        gpu_count: 1
        gpus:
          - index: 0
            name: NVIDIA H200
            compute_capability: "9.0"
            memory_total_bytes: 150754820096
            persistence_mode: true
            mig_enabled: false
            ecc_enabled: true
            nvlink_supported: false
            nvlink_active_links: 0
        pairs: []
        nvlink_fully_connected: false
        nvswitch_present: false
        nccl_advice: {env: {}, vllm_args: {}, notes: []}
gpu_topology_snapshot:
  description: The raw NVML answers, errors included.
  returned: when O(record=true)
  type: dict
"""

import json

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpu_facts import build_facts, read_nvml


def live_snapshot() -> dict:
    try:
        import pynvml
    except ImportError:
        return {"error": "nvidia-ml-py (pynvml) is not installed on this host", "devices": []}
    return read_nvml(pynvml)


def main():
    module = AnsibleModule(
        argument_spec=dict(snapshot=dict(type="path"), record=dict(type="bool", default=False)),
        supports_check_mode=True,
    )
    if module.params["snapshot"]:
        try:
            with open(module.params["snapshot"]) as handle:
                snap = json.load(handle)
        except (OSError, ValueError) as exc:
            module.fail_json(msg="snapshot: cannot read %s: %s" % (module.params["snapshot"], exc))
    else:
        snap = live_snapshot()
    result = dict(changed=False, ansible_facts={"gpu_topology": build_facts(snap)})
    if module.params["record"]:
        result["gpu_topology_snapshot"] = snap
    module.exit_json(**result)


if __name__ == "__main__":
    main()
