#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""STAND-IN for tests: present a Debian container with dnf and rpm as a RHEL-family host."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: rhel_standin_facts
short_description: STAND-IN (tests only) - report a RHEL-family distribution
description:
  - Sets C(os_family), C(distribution) and C(distribution_major_version) so that roles take their
    RHEL-family path on a Debian container that has Debian's dnf and rpm. Only the molecule scenario
    nvidia_driver_dnf uses it; no RHEL-family host can be built on these machines.
options:
  distribution:
    description: The distribution to report.
    type: str
    default: RedHat
  major_version:
    description: Its major version.
    type: str
    default: "10"
author: vllm-fleet
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec=dict(distribution=dict(type="str", default="RedHat"),
                                              major_version=dict(type="str", default="10")),
                           supports_check_mode=True)
    module.exit_json(changed=False, ansible_facts={
        "os_family": "RedHat", "distribution": module.params["distribution"],
        "distribution_major_version": module.params["major_version"]})


if __name__ == "__main__":
    main()
