#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: the measured SLO search on one inference host."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_tune
short_description: Measure the planner's candidate engine settings against an SLO on this host
description:
  - Starts each candidate (the plan's C(tuning.candidates), vLLM's defaults first) from the host's
    engine venv on a loopback port, as the engine user, its C(--config) checked by vLLM's parser first;
    after unmeasured warm-up traffic, finds its capacity at SLO in requests/s with the venv's own
    C(vllm bench serve) at Poisson request rates (upward through O(rates), then bisection to 5 %), each
    point judged over its window (p99 time to first token, mean time per output token, no failed request,
    the engine keeping up); repeats the best candidate against the defaults while the budget lasts.
    The search is C(module_utils/tuning.py), a point C(module_utils/capacity.py), the runner
    C(module_utils/tuning_host.py).
  - Returns every start, the summary (capacity at SLO per configuration, concurrency in flight there)
    and the tuned-settings record for C(roles/preflight/files/tuned/). The GPU must be free; the
    playbook stops the host's instances first.
  - In check mode it only checks its inputs and says what it would measure.
options:
  python:
    description: The engine venv's Python.
    type: path
    required: true
  base:
    description: The flags every candidate shares (C(model) path, C(served-model-name), C(load-format)).
    type: dict
    required: true
  env:
    description: The plan's environment for the engine (its C(vllm_env)).
    type: dict
    default: {}
  candidates:
    description: The plan's C(tuning.candidates) (name, settings, why); C(defaults) first.
    type: list
    elements: dict
    required: true
  rates:
    description: The request rates (requests/s) the search goes up through before it bisects.
    type: list
    elements: float
    required: true
  warmup_s:
    description: Seconds of unmeasured traffic at the first rate after each start.
    type: float
    default: 45
  ramp_s:
    description: Seconds of each point's arrivals left out of its figures.
    type: float
    default: 20
  window_s:
    description:
      - Seconds of each point's arrivals measured and judged; at the lowest rate they must hold 20 requests.
      - A window shorter than the default is a quick check of the search, not a capacity to plan a fleet by.
    type: float
    default: 90
  slo:
    description: C(ttft_p99_s) and C(tpot_mean_ms).
    type: dict
    required: true
  workload:
    description: C(input_len), C(output_len), C(target_concurrency).
    type: dict
    required: true
  profile:
    description: The hardware profile the record is for (the plan's C(tuning.profile)).
    type: str
    required: true
  measured_on:
    description: What the record says it was measured on (host, date, hardware, vLLM).
    type: dict
    default: {}
  folder:
    description: Where the configs, logs, results and the search's cache go.
    type: path
    required: true
  port:
    description: The loopback port the candidates listen on.
    type: int
    default: 8099
  user:
    description: The user the engines and the benchmark run as (empty for the module's own).
    type: str
    default: ""
  api_key:
    description: The engines' API key (C(VLLM_API_KEY)), sent by the benchmark.
    type: str
    default: ""
    no_log: true
  budget_starts:
    description: At most this many engine starts.
    type: int
    default: 6
  budget_seconds:
    description: No start begins when the last one's cost would take the search past this many seconds.
    type: int
    default: 3600
  repeats:
    description: Starts of the best candidate and of the defaults in all (alternating).
    type: int
    default: 2
  start_timeout:
    description: Seconds a candidate has to answer C(/health).
    type: int
    default: 900
attributes:
  check_mode:
    support: partial
    details: checks the inputs and says what it would measure; starts nothing
  diff_mode:
    support: none
author: vllm-fleet
"""

EXAMPLES = r"""
- name: Measure the candidates against the SLO
  vllm_tune:
    python: /opt/vllm/venv/bin/python
    base: {model: /var/lib/vllm/models/org/name/abc123, served-model-name: name, load-format: auto}
    candidates: "{{ preflight_plan.tuning.candidates }}"
    rates: "{{ preflight_plan.tuning.rates }}"
    slo: {ttft_p99_s: 2, tpot_mean_ms: 50}
    workload: {input_len: 1024, output_len: 256, target_concurrency: 32}
    profile: "{{ preflight_plan.tuning.profile }}"
    folder: /var/lib/vllm/tune
    user: vllm
"""

RETURN = r"""
starts:
  description: Every start in order (candidate, phase, seconds to healthy, each point's figures, capacity), or why it was skipped.
  type: list
  returned: always
summary:
  description: Per configuration its capacity at SLO in requests/s (lowest over its starts) and the figures there; verdict, winner, ratio, why.
  type: dict
  returned: success
record:
  description: The tuned-settings record, keyed by the profile (the file roles/preflight/files/tuned/ reads).
  type: dict
  returned: success
record_file:
  description: The record's file name in roles/preflight/files/tuned/.
  type: str
  returned: success
table:
  description: The summary as Markdown rows.
  type: list
  returned: success
"""

import os
import pwd

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.capacity import check_window
from ansible.module_utils.tuning import (TuneError, check_slo, check_workload, record, record_file, search, summarize,
                                         table)
from ansible.module_utils.tuning_host import Runner, TuneRunError


def main():
    module = AnsibleModule(
        argument_spec=dict(
            python=dict(type="path", required=True),
            base=dict(type="dict", required=True),
            env=dict(type="dict", default={}),
            candidates=dict(type="list", elements="dict", required=True),
            rates=dict(type="list", elements="float", required=True),
            warmup_s=dict(type="float", default=45.0),
            ramp_s=dict(type="float", default=20.0),
            window_s=dict(type="float", default=90.0),
            slo=dict(type="dict", required=True),
            workload=dict(type="dict", required=True),
            profile=dict(type="str", required=True),
            measured_on=dict(type="dict", default={}),
            folder=dict(type="path", required=True),
            port=dict(type="int", default=8099),
            user=dict(type="str", default=""),
            api_key=dict(type="str", default="", no_log=True),
            budget_starts=dict(type="int", default=6),
            budget_seconds=dict(type="int", default=3600),
            repeats=dict(type="int", default=2),
            start_timeout=dict(type="int", default=900),
        ),
        supports_check_mode=True,
    )
    p = module.params
    problems = check_slo(p["slo"]) + check_workload(p["workload"])
    if not p["candidates"] or p["candidates"][0].get("name") != "defaults":
        problems.append("candidates: the plan's tuning.candidates, vLLM's defaults first (is vllm_fleet_slo set?)")
    rates_ok = bool(p["rates"]) and min(p["rates"]) > 0
    if not rates_ok:
        problems.append("rates: %r is not a list of request rates > 0" % (p["rates"],))
    problems += check_window(p["rates"] if rates_ok else [], p["ramp_s"], p["window_s"],
                             ("tune_ramp_s", "tune_window_s"))
    if problems:
        module.fail_json(msg="; ".join(problems))
    if module.check_mode:
        module.exit_json(changed=False, starts=[], msg="would measure %s from %s requests/s"
                         % (", ".join(c["name"] for c in p["candidates"]), p["rates"]))
    os.makedirs(p["folder"], mode=0o750, exist_ok=True)
    if p["user"]:
        entry = pwd.getpwnam(p["user"])
        os.chown(p["folder"], entry.pw_uid, entry.pw_gid)
    runner = Runner(p["python"], p["base"], {k: str(v) for k, v in p["env"].items()}, p["folder"],
                    port=p["port"], user=p["user"] or None, api_key=p["api_key"], workload=p["workload"],
                    slo=p["slo"], start_timeout=p["start_timeout"], ramp_s=p["ramp_s"], window_s=p["window_s"])
    starts = []

    def keep(line, so_far):
        starts[:] = so_far

    try:
        starts = search(p["candidates"], p["rates"], p["slo"], runner.start,
                        lambda proc: runner.warm_up(proc, min(p["rates"]), p["warmup_s"]), runner.measure, runner.stop,
                        budget_starts=p["budget_starts"], budget_seconds=p["budget_seconds"],
                        repeats=p["repeats"], log=keep)
    except (TuneRunError, TuneError) as exc:
        module.fail_json(msg=str(exc), starts=starts)
    summary = summarize(p["candidates"], starts, p["slo"])
    module.exit_json(changed=True, starts=starts, summary=summary, table=table(summary),
                     record=record(p["profile"], p["slo"], p["workload"], summary, p["measured_on"]),
                     record_file=record_file(p["profile"]))


if __name__ == "__main__":
    main()
