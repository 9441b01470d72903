#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Say what is wrong with an inference host, with the evidence, changing nothing."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_diagnose
short_description: A verdict per check of an inference host, with the evidence, changing nothing
description:
  - For each vLLM instance of the plan - its unit's state and restarts, out-of-memory lines in its journal,
    its queue from C(/metrics) against the plan's C(max-num-seqs), the served name C(/v1/models) lists
    against the one clients ask for, the release C(/version) reports against the plan's.
  - For the host - the snapshot on disk against the pinned revision's file sizes and hashes, its chat
    template, whether C(tokenizer.json) loads as a fast tokenizer in the engine's own Python, THP and the
    kernel parameters against what os_tuning set, the free disk under the model root, and on CUDA hosts the
    processes holding GPU memory (NVML) and the driver's drift.
  - What could not be read is C(unknown), never C(ok).  Read-only; never reports a change.
version_added: "0.1.0"
author: vllm-fleet
options:
  instances:
    description: The plan's instances (C(preflight_plan.instances)).
    type: list
    elements: dict
    required: true
  api_key:
    description: The engines' key, for C(/v1/models).
    type: str
    default: ""
  files:
    description: The pinned revision's files (C(name), C(size), C(hash)) as hf_revision lists them; empty when unknown.
    type: list
    elements: dict
    default: []
  model_root:
    description: Where the models live.
    type: path
    required: true
  served_model_name:
    description: The model name the clients send.
    type: str
    required: true
  max_num_seqs:
    description: The plan's requests an instance runs at once (C(preflight_plan.max_num_seqs)), where its flags do not say.
    type: int
    default: 0
  revision:
    description: The commit sha the fleet pins (C(vllm_fleet_model_revision)).
    type: str
    default: ""
  vllm_version:
    description: The vLLM release the plan is for.
    type: str
    default: ""
  engine:
    description: The fleet's engine (C(cuda), C(cpu), C(ascend)).
    type: str
    required: true
  thp:
    description: The transparent hugepage mode os_tuning set (empty - not checked).
    type: str
    default: ""
  sysctl:
    description: The kernel parameters os_tuning set, by name.
    type: dict
    default: {}
  disk_free_ratio:
    description: The free share of the model root's filesystem under which it is a problem.
    type: float
    default: 0.1
  driver:
    description: The nvidia_driver facts (C(nvidia_driver_facts)), on CUDA hosts.
    type: dict
  firewall:
    description:
      - What differs between the engines' live firewall table and the fleet's rules (C(firewall_check)'s
        C(problems)), in a fleet with a gateway; omitted where the fleet has none (not checked).
    type: list
    elements: str
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Diagnose the host
  vllm_diagnose:
    instances: "{{ preflight_plan.instances }}"
    api_key: "{{ vllm_fleet_api_key }}"
    model_root: /var/lib/vllm/models
    served_model_name: gemma-4-31B
    vllm_version: "{{ preflight_plan.vllm_version }}"
    engine: cuda
  register: diagnosis
"""

RETURN = r"""
lines:
  description: One verdict per check - C(check), C(verdict) (ok, problem or unknown) and C(evidence).
  returned: always
  type: list
  elements: dict
table:
  description: The lines as a printable table.
  returned: always
  type: list
  elements: str
problems:
  description: How many checks found a problem.
  returned: always
  type: int
unknown:
  description: How many checks could not tell.
  returned: always
  type: int
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.diagnose import exec_python, gather, table, tokenizer_check, verdicts


def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            instances=dict(type="list", elements="dict", required=True),
            api_key=dict(type="str", default="", no_log=True),
            files=dict(type="list", elements="dict", default=[]),
            model_root=dict(type="path", required=True),
            served_model_name=dict(type="str", required=True),
            vllm_version=dict(type="str", default=""),
            revision=dict(type="str", default=""),
            max_num_seqs=dict(type="int", default=0),
            engine=dict(type="str", required=True),
            thp=dict(type="str", default=""),
            sysctl=dict(type="dict", default={}),
            disk_free_ratio=dict(type="float", default=0.1),
            driver=dict(type="dict"),
            firewall=dict(type="list", elements="str"),
        ),
        supports_check_mode=True,
    )
    p = module.params

    def run(argv):
        rc, out, err = module.run_command(argv)
        return rc, out + err

    try:
        import pynvml as nvml
    except ImportError:
        nvml = None
    evidence = gather(p["instances"], p["api_key"], p["files"], run, read, os.statvfs, model_root=p["model_root"],
                      sysctl=p["sysctl"], max_num_seqs=p["max_num_seqs"], nvml=nvml if p["engine"] == "cuda" else None)
    first = p["instances"][0]["name"] if p["instances"] else ""
    _rc, exec_start = run(["systemctl", "show", "vllm@%s.service" % first, "--property", "ExecStart", "--value"])
    snapshots = sorted(evidence["snapshots"])
    expected = dict(served_model_name=p["served_model_name"], vllm_version=p["vllm_version"], engine=p["engine"],
                    revision=p["revision"],
                    thp=p["thp"], sysctl=p["sysctl"], model_root=p["model_root"],
                    disk_free_ratio=p["disk_free_ratio"], driver=p["driver"], firewall=p["firewall"],
                    tokenizer_problem=tokenizer_check(exec_python(exec_start), snapshots[0], run)
                    if snapshots and os.path.isdir(snapshots[0]) else "unknown")
    lines = verdicts(evidence, expected)
    module.exit_json(changed=False, lines=lines, table=table(lines),
                     problems=sum(line["verdict"] == "problem" for line in lines),
                     unknown=sum(line["verdict"] == "unknown" for line in lines))


if __name__ == "__main__":
    main()
