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
  - With O(sysctl_file), also returns the parameters whose line in that file or whose live
    value differs from the wanted one, so that a converged host skips writing them.
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
  extra:
    description: More kernel parameters, checked the same way, that win over O(settings).
    type: dict
    default: {}
  extra_variable:
    description: Name of the variable O(extra) came from, used in error messages.
    type: str
    default: extra
  sysctl_file:
    description:
      - The sysctl.d file the parameters are written to. When set, RV(drift) lists those not
        yet in place, compared as C(ansible.posix.sysctl) compares them.
    type: path
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
    extra: "{{ os_tuning_sysctl_extra }}"
    extra_variable: os_tuning_sysctl_extra
    sysctl_file: /etc/sysctl.d/90-vllm-fleet.conf
  register: os_tuning_sysctl_checked
"""

RETURN = r"""
settings:
  description: The settings (O(extra) winning) with values rendered as the kernel spells them.
  returned: success
  type: dict
  sample: {"vm.swappiness": "0", "net.core.somaxconn": "65535"}
drift:
  description: The settings whose line in O(sysctl_file) or live value differs from the wanted one.
  returned: when O(sysctl_file) is set
  type: dict
  sample: {"vm.swappiness": "0"}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.kernel_tuning import TuningError, merge_sysctl, sysctl_drift


def main():
    module = AnsibleModule(
        argument_spec=dict(
            settings=dict(type="dict", required=True),
            variable=dict(type="str", default="settings"),
            extra=dict(type="dict", default={}),
            extra_variable=dict(type="str", default="extra"),
            sysctl_file=dict(type="path"),
            proc_root=dict(type="path", default="/proc/sys"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    try:
        settings = merge_sysctl([(params["variable"], params["settings"]),
                                 (params["extra_variable"], params["extra"])], params["proc_root"])
    except TuningError as exc:
        module.fail_json(msg=str(exc))
    result = dict(changed=False, settings=settings)
    if params["sysctl_file"]:
        result["drift"] = sysctl_drift(settings, params["sysctl_file"], params["proc_root"])
    module.exit_json(**result)


if __name__ == "__main__":
    main()
