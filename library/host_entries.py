#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What one host publishes about itself to the gateways and the monitoring hosts."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: host_entries
short_description: Make one host's entries for the gateways' upstream and Prometheus's targets
description:
  - Lists this host's vLLM instances as the gateways reach them (nginx C(server) addresses, IPv6 in brackets)
    and its scrape targets for each job (C(vllm), C(vllm_health), C(node), C(nginx), C(gateway_tls), C(dcgm),
    C(npu)), by the rules the gateway and monitoring plans use for the whole fleet.
  - The host's own run writes them, one file per host on each gateway and monitoring host (roles gateway and
    monitoring, C(tasks_from=publish)).
  - Refuses an inventory address or a bound address that is not a host name or an IP address, naming it.
  - Read-only; never reports a change.
version_added: "0.1.0"
author: vllm-fleet
options:
  host:
    description: The host (C(inventory_hostname)).
    type: str
    required: true
  address:
    description: Its inventory address (C(ansible_host)); empty for its name.
    type: str
    default: ""
  group_names:
    description: Its groups (C(group_names)) - an C(inference) host's engines are scrape targets, a C(gateways)
      host's nginx exporter is one.
    type: list
    elements: str
    default: []
  plan:
    description: Its plan (C(preflight_plan)) - its instances, C(vllm_env) and C(engine).
    type: dict
    default: {}
  settings:
    description: Instance name to the vLLM settings it runs with, instead of the plan's instances (what served
      before a change, for a rollback).
    type: dict
  ports:
    description: C(node), C(nginx), C(dcgm), C(npu), the exporters' ports, C(health_path), the engines'
      health path, and on a gateway C(gateway), its TLS port (job C(gateway_tls), probed for the certificate's
      expiry).
    type: dict
    required: true
  state:
    description: C(in) (served), C(out) (kept, marked down while the host changes) or C(absent) (the host leaves
      the fleet - no entry).
    type: str
    choices: [in, out, absent]
    default: in
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Make this host's entries
  host_entries:
    host: "{{ inventory_hostname }}"
    address: "{{ ansible_host | default('') }}"
    group_names: "{{ group_names }}"
    plan: "{{ preflight_plan }}"
    ports: {node: 9100, nginx: 9113, dcgm: 9400, npu: 8082, health_path: /health}
  register: entries
"""

RETURN = r"""
state:
  description: The state the entries are for.
  returned: success
  type: str
  sample: in
upstreams:
  description: The host's instances (C(host), C(instance), C(address), C(port), C(server)), by port.
  returned: success
  type: list
  elements: dict
  sample: [{host: node1, instance: main, address: 10.0.0.2, port: 8000, server: "10.0.0.2:8000"}]
targets:
  description: Job name to the host's file_sd target groups (C(targets), C(labels)); empty where it has none.
  returned: success
  type: dict
  sample: {vllm: [{targets: ["10.0.0.2:8000"], labels: {host: node1, vllm_instance: main}}], nginx: []}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.publish import entries, instances_from_settings


def main():
    module = AnsibleModule(
        argument_spec=dict(
            host=dict(type="str", required=True),
            address=dict(type="str", default=""),
            group_names=dict(type="list", elements="str", default=[]),
            plan=dict(type="dict", default={}),
            settings=dict(type="dict"),
            ports=dict(type="dict", required=True),
            state=dict(type="str", choices=["in", "out", "absent"], default="in"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    given = None if p["settings"] is None else instances_from_settings(p["settings"])
    try:
        result = entries(p["host"], p["address"], p["group_names"], p["plan"], p["ports"], given, p["state"])
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
