#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Summarise, plot and tabulate the results of vllm bench serve."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: benchmark_report
short_description: Summarise, plot and tabulate the JSON results of vllm bench serve
description:
  - Reads every C(<label>--<target>--c<concurrency>.json) and C(<label>--<target>--r<rate>.json) under
    O(folder), judges each open-loop point against O(slo), writes O(summary) (every point and the series per
    label and target) and O(plot) (output tokens/s and p99 time to first token against the level, one line
    per label, target and kind; matplotlib) and returns a printable table.
  - Runs on the control node.  Reports a change when it wrote the files; in check mode it reads and
    tabulates, and writes nothing.
version_added: "0.1.0"
author: vllm-fleet
requirements:
  - matplotlib
options:
  folder:
    description: Where the results are (one folder per label).
    type: path
    required: true
  summary:
    description: The summary JSON to write.
    type: path
    required: true
  plot:
    description: The PNG to write.
    type: path
    required: true
  slo:
    description:
      - The objective each open-loop point is judged against over its window (C(ttft_p99_s), C(tpot_mean_ms)), as
        the capacity search judges; empty to report their figures alone.
    type: dict
    default: {}
  ramp_s:
    description: Seconds of each open-loop point's arrivals left out of its judgement (as they were run).
    type: float
    default: 20
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Summarise the results
  benchmark_report:
    folder: ~/.cache/vllm-fleet/bench
    summary: ~/.cache/vllm-fleet/bench/summary.json
    plot: ~/.cache/vllm-fleet/bench/benchmark.png
  delegate_to: localhost
"""

RETURN = r"""
points:
  description: Every result - label, target, concurrency, completed, failed, throughput and latency figures.
  returned: success
  type: list
  elements: dict
table:
  description: The points as a printable table.
  returned: success
  type: list
  elements: str
failed:
  description: The points with failed requests (or none completed), as sentences.
  returned: success
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.bench_report import BenchError, report


def main():
    module = AnsibleModule(
        argument_spec=dict(
            folder=dict(type="path", required=True),
            summary=dict(type="path", required=True),
            plot=dict(type="path", required=True),
            slo=dict(type="dict", default={}),
            ramp_s=dict(type="float", default=20.0),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        result = report(p["folder"], p["summary"], p["plot"], write=not module.check_mode, slo=p["slo"],
                        ramp_s=p["ramp_s"])
    except BenchError as exc:
        module.fail_json(msg=str(exc))
    except ImportError as exc:
        module.fail_json(msg="benchmark_report needs matplotlib on the control node (make setup installs it): %s"
                         % exc)
    module.exit_json(changed=not module.check_mode, points=result["points"], table=result["table"], failed=result["failed"])


if __name__ == "__main__":
    main()
