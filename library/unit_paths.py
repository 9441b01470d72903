#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Check the inventory's paths that the roles write into units and command lines."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: unit_paths
short_description: Check the inventory's paths that the roles write into unit files and command lines
description:
  - Refuses each path that is not absolute or holds a character other than letters, digits and C(._+-), or a
    C(.) or C(..) part, naming its variable. Such a path is written into C(ExecStart=), C(WorkingDirectory=),
    a C(bash -c) line or a daemon's C(ARGS=), where a space splits it, C(%) is a systemd specifier, C($)
    expands a variable and a quote ends the string.
  - Read-only; never reports a change.
version_added: "0.1.0"
author: vllm-fleet
options:
  paths:
    description: Variable name to its value (the variables the inventory sets; a role's default is a fixed path).
    type: dict
    required: true
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Check the paths typed in the inventory
  unit_paths:
    paths:
      vllm_runtime_root: /opt/vllm
      hf_mirror_root: /var/lib/olah
"""

RETURN = r"""
checked:
  description: The variables checked.
  returned: success
  type: list
  elements: str
  sample: [vllm_runtime_root]
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.host_paths import problems


def main():
    module = AnsibleModule(argument_spec=dict(paths=dict(type="dict", required=True)), supports_check_mode=True)
    found = problems(module.params["paths"])
    if found:
        module.fail_json(msg="; ".join(found))
    module.exit_json(changed=False, checked=sorted(module.params["paths"]))


if __name__ == "__main__":
    main()
