#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Check wheels against the host's Python, glibc and architecture, as pip would."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: wheel_compat
short_description: Check wheels against a host's Python, glibc and architecture as pip does
description:
  - Runs on the target. Computes the tags pip would accept there - CPython version, C(abi3),
    C(manylinux_2_N) up to the host's glibc (read with C(os.confstr), as pip reads it), the
    legacy manylinux aliases, the machine architecture - and checks each wheel's file name.
  - Says why a wheel cannot install, e.g. C(needs glibc 2.35, host has 2.31) or
    C(cp312-cp312 only, host python 3.11). Only file names are needed, so a wheelhouse can be
    checked before anything is copied to the host.
  - Wheels link glibc dynamically; no pip flag (C(--force-reinstall --no-deps)) makes an
    incompatible wheel run, and there is no "statically linked glibc" vLLM wheel.
  - Does not need the C(packaging) library on the host.
version_added: "0.1.0"
author: vllm-fleet
options:
  wheels:
    description: Wheel file names or paths.
    type: list
    elements: str
    default: []
  python_version:
    description: The Python the wheels are for, e.g. C(3.11) (the venv's); default the module's interpreter.
    type: str
  glibc_version:
    description: Override the host's glibc version (e.g. to check for another host).
    type: str
  machine:
    description: Override the host's architecture (C(x86_64), C(aarch64)).
    type: str
  variable:
    description: Name of the variable the wheels came from, for messages.
    type: str
    default: wheels
  fail_on_incompatible:
    description: Fail when any wheel cannot install.
    type: bool
    default: true
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Check the wheelhouse before creating the venv
  wheel_compat:
    wheels: "{{ lookup('ansible.builtin.fileglob', wheelhouse ~ '/*.whl', wantlist=true) | map('basename') }}"
    python_version: "3.11"
    variable: vllm_runtime_wheelhouse
"""

RETURN = r"""
wheels:
  description: One entry per wheel.
  returned: always
  type: list
  elements: dict
  sample: [{"wheel": "vllm-0.20.0-cp38-abi3-manylinux_2_35_x86_64.whl", "compatible": false,
            "reason": "needs glibc 2.35, host has 2.31"}]
problems:
  description: One message per wheel that cannot install, starting with O(variable).
  returned: always
  type: list
  elements: str
  sample: ["vllm_runtime_wheelhouse: vllm-0.20.0-cp38-abi3-manylinux_2_35_x86_64.whl needs glibc 2.35, host has 2.31"]
host:
  description: What the wheels were checked against.
  returned: always
  type: dict
  sample: {"python_version": "3.11", "glibc_version": "2.31", "machine": "x86_64"}
"""

import platform

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.host_runtime import glibc_version
from ansible.module_utils.wheel_tags import WheelNameError, check_wheel


def main():
    module = AnsibleModule(
        argument_spec=dict(
            wheels=dict(type="list", elements="str", default=[]),
            python_version=dict(type="str"),
            glibc_version=dict(type="str"),
            machine=dict(type="str"),
            variable=dict(type="str", default="wheels"),
            fail_on_incompatible=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    params = module.params
    host = {"python_version": params["python_version"] or "%d.%d" % tuple(
                int(x) for x in platform.python_version_tuple()[:2]),
            "glibc_version": params["glibc_version"] or glibc_version(),
            "machine": params["machine"] or platform.machine()}
    try:
        results = [check_wheel(w, host["python_version"], host["glibc_version"], host["machine"])
                   for w in params["wheels"]]
    except WheelNameError as exc:
        module.fail_json(msg="%s: %s" % (params["variable"], exc), host=host)
    bad = [r for r in results if not r["compatible"]]
    problems = ["%s: %s %s" % (params["variable"], r["wheel"], r["reason"]) for r in bad]
    if bad and params["fail_on_incompatible"]:
        module.fail_json(msg="%s: %d wheel(s) cannot install on this host (Python %s, glibc %s, %s): %s"
                         % (params["variable"], len(bad), host["python_version"],
                            host["glibc_version"], host["machine"],
                            "; ".join("%s %s" % (r["wheel"], r["reason"]) for r in bad)),
                         wheels=results, host=host, problems=problems)
    module.exit_json(changed=False, wheels=results, host=host, problems=problems)


if __name__ == "__main__":
    main()
