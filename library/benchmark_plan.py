#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Check a benchmark's settings against the plans and list what it runs."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: benchmark_plan
short_description: Check a benchmark's settings against the fleet's plans and list its targets and levels
description:
  - Checks the label, the levels of concurrency, the lengths and the prompt count; refuses a level above what
    the plan lets the target run at once (the C(max_num_seqs) of the instances behind it - every instance of
    the fleet through the gateway, one instance on its own) unless O(allow_overload).
  - Lists the targets (the gateway, or this host's instances with the URL the host reaches each at) and the
    levels with their prompt counts.  Read-only; never reports a change.
version_added: "0.1.0"
author: vllm-fleet
options:
  label:
    description: The configuration's name in the results.
    type: str
    required: true
  concurrency:
    description: The levels of concurrent requests.
    type: list
    elements: raw
    required: true
  input_len:
    description: Prompt tokens per request.
    type: raw
    required: true
  output_len:
    description: Generated tokens per request.
    type: raw
    required: true
  prompts_per_level:
    description: Prompts per level (at least twice its concurrency are sent).
    type: raw
    required: true
  plans:
    description: Every inference host's plan (C(preflight_plan)).
    type: list
    elements: dict
    required: true
  gateway:
    description: The gateway's URL; empty to benchmark O(instances).
    type: str
    default: ""
  instances:
    description: This host's planned instances.
    type: list
    elements: dict
    default: []
  allow_overload:
    description: Run levels above the plan's concurrency.
    type: bool
    default: false
  request_rate:
    description:
      - Open-loop levels instead of O(concurrency), in requests per second; each is the capacity search's point
        (Poisson arrivals, lengths within 25 % of O(input_len) and O(output_len), every request's figures saved).
    type: list
    elements: raw
    default: []
  seed:
    description: The first closed-loop level's seed (each level adds its concurrency); an open-loop point's seed
      is made from it and the rate.
    type: raw
    default: 0
  ramp_s:
    description: Seconds of each open-loop point's arrivals left out of its figures.
    type: raw
    default: 20
  window_s:
    description: Seconds of each open-loop point's arrivals measured.
    type: raw
    default: 90
  dataset:
    description: Whether the prompts come from a dataset file (closed-loop levels only).
    type: bool
    default: false
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Check the benchmark
  benchmark_plan:
    label: plan
    concurrency: [1, 4, 16]
    input_len: 1024
    output_len: 256
    prompts_per_level: 8
    plans: "{{ groups['inference'] | map('extract', hostvars, 'preflight_plan') }}"
    gateway: https://gw-1:443
  register: bench
"""

RETURN = r"""
targets:
  description: What is benchmarked, C(name) and C(url).
  returned: success
  type: list
  elements: dict
  sample: [{name: gateway, url: "https://gw-1:443"}]
levels:
  description: Each level's C(name) (C(c4), C(r0.5)), its C(concurrency) or C(rate) and its own C(args), the flags of
    C(vllm bench serve) that make it.
  returned: success
  type: list
  elements: dict
target_capacity:
  description: What the plan lets one target run at once.
  returned: success
  type: int
fleet_capacity:
  description: What the plan lets the whole fleet run at once.
  returned: success
  type: int
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.bench_report import BenchError, plan


def main():
    module = AnsibleModule(
        argument_spec=dict(
            label=dict(type="str", required=True),
            concurrency=dict(type="list", elements="raw", required=True),
            input_len=dict(type="raw", required=True),
            output_len=dict(type="raw", required=True),
            prompts_per_level=dict(type="raw", required=True),
            plans=dict(type="list", elements="dict", required=True),
            gateway=dict(type="str", default=""),
            instances=dict(type="list", elements="dict", default=[]),
            allow_overload=dict(type="bool", default=False),
            request_rate=dict(type="list", elements="raw", default=[]),
            seed=dict(type="raw", default=0),
            ramp_s=dict(type="raw", default=20),
            window_s=dict(type="raw", default=90),
            dataset=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        result = plan(p["label"], p["concurrency"], p["input_len"], p["output_len"], p["prompts_per_level"],
                      p["plans"], p["gateway"], p["instances"], p["allow_overload"], request_rate=p["request_rate"],
                      seed=p["seed"], ramp_s=p["ramp_s"], window_s=p["window_s"], dataset=p["dataset"])
    except BenchError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
