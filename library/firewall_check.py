#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Compare the live nftables table of the engines with the rules the fleet asks for."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: firewall_check
short_description: Read the engines' live firewall table and say what differs from the fleet's rules
description:
  - Lists C(table inet vllm_fleet) from the kernel (C(nft -j)) and compares its input chain, rule by rule
    and in order, with loopback accepted, the engine ports accepted from the given IPv4 and IPv6 addresses,
    and every other connection to them reset.
  - A missing table (after C(nft flush ruleset), or a C(systemctl restart nftables) on Debian, whose
    C(/etc/nftables.conf) starts with C(flush ruleset)) and a changed rule are problems; the role reloads
    the table when there is any. Changes nothing itself.
version_added: "0.1.0"
author: vllm-fleet
options:
  ports:
    description: The engine ports the table closes.
    type: list
    elements: int
    required: true
  ipv4:
    description: The IPv4 addresses admitted to them.
    type: list
    elements: str
    default: []
  ipv6:
    description: The IPv6 addresses admitted to them.
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
- name: Read the live firewall
  firewall_check:
    ports: [8000]
    ipv4: [10.0.0.20, 10.0.0.30]
  register: firewall
"""

RETURN = r"""
loaded:
  description: Whether the kernel holds the table at all.
  returned: success
  type: bool
problems:
  description: What differs from the rules asked for, in words; empty when the live table is right.
  returned: success
  type: list
  elements: str
  sample: ["table inet vllm_fleet is not loaded: the engine ports are open to every host"]
"""

import json

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.firewall import TABLE, problems


def main():
    module = AnsibleModule(
        argument_spec=dict(
            ports=dict(type="list", elements="int", required=True),
            ipv4=dict(type="list", elements="str", default=[]),
            ipv6=dict(type="list", elements="str", default=[]),
        ),
        supports_check_mode=True,
    )
    nft = module.get_bin_path("nft")
    if not nft:
        # (check mode on a host that has no nftables yet: the run installs it first)
        module.exit_json(changed=False, loaded=False, problems=["nft is not installed"])
    rc, out, err = module.run_command([nft, "-j", "list", "table", *TABLE])
    if rc != 0 and "No such file or directory" not in err:
        module.fail_json(msg="nft -j list table %s %s: %s" % (TABLE + (err.strip(),)))
    listing = json.loads(out) if rc == 0 else None
    found = problems(listing, module.params["ports"], module.params["ipv4"], module.params["ipv6"])
    module.exit_json(changed=False, loaded=listing is not None, problems=found)


if __name__ == "__main__":
    main()
