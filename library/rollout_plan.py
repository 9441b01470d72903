#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Check how a change reaches the serving fleet, changing nothing."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: rollout_plan
short_description: Check the batches a change reaches the inference hosts in, against the capacity guard
description:
  - Computes the batches of hosts Ansible's C(serial) makes of O(hosts) and refuses a batch that would leave
    fewer than O(min_serving) instances serving while its hosts are out of rotation.
  - When no host serves yet there is nothing to protect and every host goes at once.
  - Refuses an O(limit) that names a host or group the inventory does not have (Ansible only warns and
    changes the others).
  - A serving group (one engine across hosts) moves as one unit, in one batch; O(serial) counts units.
  - Read-only; never reports a change.  Each message names the variable it is about.
version_added: "0.1.0"
author: vllm-fleet
options:
  hosts:
    description: The inference hosts of the play, in order.
    type: list
    elements: str
    required: true
  serial:
    description: Batch sizes, as Ansible's C(serial) takes them (numbers or percentages such as C(25%)).
    type: list
    elements: raw
    required: true
  instances:
    description:
      - Every inference host of the fleet (also those outside a limit) and the planned instances it serves an
        endpoint for (a serving group's workers serve none).
    type: dict
    required: true
  groups:
    description: The serving groups, each the hosts of one engine across hosts, head first.
    type: list
    elements: list
    default: []
  serving:
    description: The hosts that serve now.
    type: list
    elements: str
    default: []
  min_serving:
    description: The fewest instances that must serve during every batch.
    type: int
    default: 1
  limit:
    description: The run's C(--limit) (C(ansible_limit)); empty when there is none.
    type: str
    default: ""
  known:
    description: The inventory's host and group names.
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Check the rollout's batches against the capacity guard
  rollout_plan:
    hosts: "{{ groups['inference'] | intersect(ansible_play_hosts_all) }}"
    serial: "{{ vllm_fleet_rollout_serial }}"
    instances: {node1: 1, node2: 1}
    serving: [node1, node2]
    min_serving: "{{ vllm_fleet_min_serving }}"
  run_once: true
"""

RETURN = r"""
serial:
  description: What the serve play's C(serial) is, the size of each batch in hosts.
  returned: success
  type: list
  sample: [1, 2]
batches:
  description: The hosts of each batch.
  returned: success
  type: list
  sample: [[node1], [node2, node3]]
serving_instances:
  description: Instances serving before the change.
  returned: success
  type: int
reason:
  description: Why these batches, in a sentence.
  returned: success
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.rollout import RolloutError, plan, unknown_limit


def main():
    module = AnsibleModule(
        argument_spec=dict(
            hosts=dict(type="list", elements="str", required=True),
            serial=dict(type="list", elements="raw", required=True),
            instances=dict(type="dict", required=True),
            serving=dict(type="list", elements="str", default=[]),
            min_serving=dict(type="int", default=1),
            limit=dict(type="str", default=""),
            known=dict(type="list", elements="str", default=[]),
            groups=dict(type="list", elements="list", default=[]),
        ),
        supports_check_mode=True,
    )
    params = module.params
    unknown = unknown_limit(params["limit"], params["known"])
    if unknown:
        module.fail_json(msg="--limit %s names %s, which the inventory does not have; nothing was changed"
                         % (params["limit"], ", ".join(unknown)))
    try:
        result = plan(params["hosts"], params["serial"], {h: int(n) for h, n in params["instances"].items()},
                      params["serving"], params["min_serving"], [list(g) for g in params["groups"]])
    except RolloutError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
