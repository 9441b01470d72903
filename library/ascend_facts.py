#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Installed Ascend driver/firmware/CANN versions and the installer runs still needed."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: ascend_facts
short_description: Read the installed Ascend driver, firmware and CANN versions and order the installs
description:
  - Reads each component's C(version.info) and returns the installer runs still needed, in the
    documented order (first install - driver then firmware; upgrade - firmware then driver; then the
    CANN toolkit, the 910b ops/kernels package and nnal).
  - Read-only; sets C(ansible_facts.ascend).
version_added: "0.1.0"
author: vllm-fleet
options:
  version_files:
    description: Component name to the C(version.info) path that records its installed version.
    type: dict
    required: true
  wanted:
    description: Component name to the version the fleet runs (omit a component to leave it alone).
    type: dict
    required: true
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Read the installed versions
  ascend_facts:
    version_files:
      driver: /usr/local/Ascend/driver/version.info
      firmware: /usr/local/Ascend/firmware/version.info
    wanted: {driver: 25.2.0, firmware: 7.7.0.6.236}
"""

RETURN = r"""
ansible_facts:
  description: C(ascend) with C(installed) (component to version or null) and C(steps)
    (C(component), C(version), C(args), C(upgrade), in order).
  returned: always
  type: dict
"""

from ansible.module_utils.ascend import AscendError, parse_version_info, steps
from ansible.module_utils.basic import AnsibleModule


def read(path):
    try:
        with open(path) as handle:
            return parse_version_info(handle.read())
    except OSError:
        return None


def main():
    module = AnsibleModule(
        argument_spec=dict(version_files=dict(type="dict", required=True),
                           wanted=dict(type="dict", required=True)),
        supports_check_mode=True,
    )
    installed = {name: read(path) for name, path in module.params["version_files"].items()}
    try:
        todo = steps(installed, module.params["wanted"])
    except AscendError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, ansible_facts={"ascend": {"installed": installed, "steps": todo}})


if __name__ == "__main__":
    main()
