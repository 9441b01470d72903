#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Check the monitoring settings and list what the monitoring host scrapes."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: monitoring_plan
short_description: Check the monitoring settings and make Prometheus's scrape targets from the inventory
description:
  - Checks the retention, the storage path and the alert thresholds; each message names its variable.
  - Lists, per job, the file-based service discovery target groups of the fleet; every vLLM instance of the
    inference hosts' plans (reached as the gateway reaches it), its C(/health) for the blackbox prober, every
    host's node exporter, every gateway's nginx exporter and the fleet's model mirror.
  - Read-only; never reports a change.
version_added: "0.1.0"
author: vllm-fleet
options:
  retention:
    description: How long Prometheus keeps samples (C(--storage.tsdb.retention.time)).
    type: str
    required: true
  storage_path:
    description: Where Prometheus keeps them (C(--storage.tsdb.path)).
    type: str
    required: true
  thresholds:
    description: The alert thresholds, by name (C(kv_cache_usage), C(requests_waiting), C(ttft_p99_seconds), ...).
    type: dict
    required: true
  groups:
    description: The inventory's groups (C(groups)).
    type: dict
    required: true
  addresses:
    description: Host to its inventory address (C(ansible_host)); a host left out is reached by its name.
    type: dict
    default: {}
  plans:
    description: Inference host to its plan (C(preflight_plan)).
    type: dict
    default: {}
  model:
    description: The fleet's model, C(endpoint) (its mirror), C(repo), C(revision) and C(root) (the model root).
    type: dict
    default: {}
  durations:
    description: Variable name to a Prometheus duration it holds (the scrape interval, the alerts' windows).
    type: dict
    default: {}
  webhook_url:
    description: Where Alertmanager sends the alerts; empty for nowhere.
    type: str
    default: ""
  mounts:
    description: Inference host to its mount points (C(ansible_facts.mounts)); where unknown, C(/).
    type: dict
    default: {}
  ports:
    description: C(node) and C(nginx), the exporters' ports, and C(health_path), the engines' health path.
    type: dict
    required: true
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Check the monitoring settings and list the targets
  monitoring_plan:
    retention: 15d
    storage_path: /var/lib/prometheus/metrics2
    thresholds: {kv_cache_usage: 0.9, requests_waiting: 8, ttft_p99_seconds: 2, failed_ratio: 0.05,
                 disk_free_ratio: 0.1, gpu_temperature_celsius: 85, gpu_memory_used_ratio: 0.97,
                 certificate_days: 14}
    groups: "{{ groups }}"
    plans: "{{ dict(groups['inference'] | zip(groups['inference'] | map('extract', hostvars, 'preflight_plan'))) }}"
    ports: {node: 9100, nginx: 9113, health_path: /health}
  register: monitoring
"""

RETURN = r"""
targets:
  description: Job name to its file_sd target groups (C(targets), C(labels)).
  returned: success
  type: dict
  sample: {vllm: [{targets: ["10.0.0.2:8000"], labels: {host: node1, vllm_instance: main}}]}
thresholds:
  description: The checked thresholds.
  returned: success
  type: dict
model_mounts:
  description: The mount points that hold the model root on the inference hosts (the disk alert watches them).
  returned: success
  type: list
  elements: str
  sample: [/, /data]
counts:
  description: Job name to its number of target groups.
  returned: success
  type: dict
  sample: {vllm: 2, vllm_health: 2, node: 3, nginx: 1, gateway_tls: 0, mirror: 1}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.monitoring import plan


def main():
    module = AnsibleModule(
        argument_spec=dict(
            retention=dict(type="str", required=True),
            storage_path=dict(type="str", required=True),
            thresholds=dict(type="dict", required=True),
            groups=dict(type="dict", required=True),
            addresses=dict(type="dict", default={}),
            plans=dict(type="dict", default={}),
            model=dict(type="dict", default={}),
            ports=dict(type="dict", required=True),
            mounts=dict(type="dict", default={}),
            durations=dict(type="dict", default={}),
            webhook_url=dict(type="str", default="", no_log=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        result = plan(p["retention"], p["storage_path"], p["thresholds"], p["groups"], p["addresses"], p["plans"],
                      p["model"], p["ports"], p["mounts"], p["durations"], p["webhook_url"])
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
