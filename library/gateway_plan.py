#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Check the gateway's clients, limits, allowlist and TLS inputs; list its upstreams."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: gateway_plan
short_description: Check the gateway's clients, limits, allowlist and TLS inputs, changing nothing
description:
  - Refuses, naming the variable, a client without a key, two clients with one name or one key, a
    key nginx could not hold, a limit of 0 or below (rate, burst, concurrent requests) or a body size
    that is not one, an allowlist entry that is not a path, a certificate without its key, and a fleet
    whose plans have no instance to balance over.
  - Returns the clients with their effective limits (each falls back to the gateway-wide default) and
    without their keys, and the upstream instances sorted, for the role's nginx template.
version_added: "0.1.0"
author: vllm-fleet
options:
  clients:
    description: C([{name, rate_per_second, burst, connections, max_body_size}]), without the keys.
    type: list
    elements: raw
    required: true
  keys:
    description:
      - The clients' keys, in the same order (kept apart so that only they are hidden from logs); each a key, a
        list of keys, or the client's C({key}) or C({keys}) (a rotation - C([new, old])).
    type: list
    elements: raw
    required: true
  defaults:
    description: The limits a client does not set - C(rate_per_second), C(burst), C(connections), C(max_body_size).
    type: dict
    required: true
  allowed_paths:
    description: The paths that reach an engine.
    type: list
    elements: raw
    required: true
  tls:
    description: C(certificate) and C(private_key), both or neither; C(names), more names for the certificate
      (C(gateway_tls_names)), each a DNS name or an IP address.
    type: dict
    default: {}
  inference_hosts:
    description: The inference hosts.
    type: list
    elements: str
    default: []
  inference_addresses:
    description: Their inventory addresses (C(ansible_host)), in the same order; empty for the host's name.
    type: list
    elements: str
    default: []
  inference_instances:
    description: Their plans' instances (C(preflight_plan.instances)), in the same order.
    type: list
    elements: list
    default: []
  engine_key:
    description: The engines' key (C(vllm_fleet_api_key)), which the gateway sends them; checked, never returned.
    type: str
    default: ""
  address:
    description: The gateway's inventory address (C(ansible_host)), the certificate's first name.
    type: str
    default: ""
  other_names:
    description: More names the certificate carries where each is a DNS name or an IP address (the inventory
      name, the host's own address); the others are left out.
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
- name: Check the gateway's settings
  gateway_plan:
    clients: [{name: alice}]
    keys: ["{{ vault_alice_key }}"]
    defaults: {rate_per_second: 5, burst: 10, connections: 8, max_body_size: 1m}
    allowed_paths: [/v1/chat/completions, /v1/models]
    inference_hosts: "{{ groups['inference'] }}"
    inference_addresses: "{{ groups['inference'] | map('extract', hostvars, 'ansible_host') }}"
    inference_instances: "{{ groups['inference'] | map('extract', hostvars, ['preflight_plan', 'instances']) }}"
  register: gateway
"""

RETURN = r"""
clients:
  description: The clients with their effective limits, without keys.
  returned: success
  type: list
  elements: dict
  sample: [{name: alice, rate_per_second: 5, burst: 10, connections: 8, max_body_size: 1m}]
largest_body_bytes:
  description: The largest body size any client may send, in bytes.
  returned: success
  type: int
allowed_paths:
  description: The allowlist.
  returned: success
  type: list
  elements: str
upstreams:
  description: The instances to balance over, sorted by host and port.
  returned: success
  type: list
  elements: dict
names:
  description: The names and addresses the server certificate and C(server_name) carry, checked.
  returned: success
  type: list
  elements: str
  sample: [10.0.0.1, gw1, gateway.example.com]
subject_alt_name:
  description: The same as the certificate's subject alternative names (C(IP:) for an IPv4 or IPv6 address).
  returned: success
  type: list
  elements: str
  sample: ["IP:10.0.0.1", "DNS:gw1", "DNS:gateway.example.com"]
name_constraints:
  description:
    - The fleet CA's permitted subtrees, one per name (the CA signs for this gateway's names only).
  returned: success
  type: list
  elements: str
  sample: ["IP:10.0.0.1/32", "DNS:gw1", "DNS:gateway.example.com"]
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gateway import GatewayError, plan, upstreams


def main():
    module = AnsibleModule(
        argument_spec=dict(
            clients=dict(type="list", elements="raw", required=True),
            keys=dict(type="list", elements="raw", required=True, no_log=True),
            defaults=dict(type="dict", required=True),
            allowed_paths=dict(type="list", elements="raw", required=True),
            tls=dict(type="dict", default={}),
            inference_hosts=dict(type="list", elements="str", default=[]),
            inference_addresses=dict(type="list", elements="str", default=[]),
            inference_instances=dict(type="list", elements="list", default=[]),
            engine_key=dict(type="str", default="", no_log=True),
            address=dict(type="str", default=""),
            other_names=dict(type="list", elements="str", default=[]),
        ),
        supports_check_mode=True,
    )
    params = module.params
    try:
        result = plan(params["clients"], params["keys"], params["defaults"], params["allowed_paths"], params["tls"],
                      upstreams(params["inference_hosts"], params["inference_addresses"],
                                params["inference_instances"]),
                      params["engine_key"], params["address"], params["other_names"])
    except GatewayError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
