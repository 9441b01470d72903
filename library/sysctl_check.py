#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Validate kernel parameters before any of them is written."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: sysctl_check
short_description: Validate kernel parameters (sysctl) before they are applied
description:
  - Checks a dict of kernel parameters on the target without changing anything.
  - Names must look like C(vm.swappiness) and exist under C(/proc/sys) on the host,
    so a typo fails instead of being written to a sysctl.d file that the kernel then ignores.
  - Values must be integers or strings; booleans are refused. Parameters with a known range
    (C(vm.swappiness) 0-200, C(vm.overcommit_memory) 0-2, ...) are range-checked.
  - Every problem is reported at once, each naming the variable and the parameter.
version_added: "0.1.0"
author: vllm-fleet
options:
  settings:
    description: Kernel parameters to check, name to value.
    type: dict
    required: true
  variable:
    description: Name of the variable the settings came from, used in error messages.
    type: str
    default: settings
  proc_root:
    description: Where the kernel's parameters are mounted (tests point this elsewhere).
    type: path
    default: /proc/sys
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
notes:
  - C(vm.*) parameters are not namespaced; C(net.core.*) and C(net.ipv4.*) are per network namespace.
"""

EXAMPLES = r"""
- name: Check the kernel parameters before writing them
  sysctl_check:
    settings: "{{ os_tuning_sysctl }}"
    variable: os_tuning_sysctl
  register: os_tuning_sysctl_checked
"""

RETURN = r"""
settings:
  description: The settings with values rendered as the kernel spells them.
  returned: success
  type: dict
  sample: {"vm.swappiness": "0", "net.core.somaxconn": "65535"}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.kernel_tuning import TuningError, validate_sysctl


def main():
    module = AnsibleModule(
        argument_spec=dict(
            settings=dict(type="dict", required=True),
            variable=dict(type="str", default="settings"),
            proc_root=dict(type="path", default="/proc/sys"),
        ),
        supports_check_mode=True,
    )
    try:
        settings = validate_sysctl(module.params["settings"], module.params["variable"],
                                   module.params["proc_root"])
    except TuningError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, settings=settings)


if __name__ == "__main__":
    main()
