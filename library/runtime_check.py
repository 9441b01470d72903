#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Decide the vLLM release and the Python for a host, before installing anything."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: runtime_check
short_description: Decide the vLLM release and the Python interpreter for a host
description:
  - Picks the engine release (the requested one, the default, or on an old glibc such as Kylin
    V10's 2.28 the newest release whose wheels install there).
  - Finds the CPython interpreters of the host and picks one in the release's range that can make
    a venv, or says to install the distribution's packages, or to unpack the operator's archive.
  - Checks the NVIDIA driver branch against the release when a driver version is given.
  - Changes nothing; returns C(problems), each naming the variable to change.
version_added: "0.1.0"
author: vllm-fleet
options:
  engine:
    description: The engine whose releases the version table (C(module_utils/vllm_versions.py)) lists.
    type: str
    required: true
    choices: [cuda, cpu, ascend]
  version:
    description: The requested release; empty for automatic.
    type: str
    default: ""
  python_packages:
    description: Distribution packages that provide a suitable Python and its venv module.
    type: list
    elements: str
    default: []
  python_archive:
    description: Whether the operator gave a relocatable CPython archive (its path).
    type: str
    default: ""
  driver_version:
    description: The loaded NVIDIA driver (from gpu_topology), when known.
    type: str
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Decide release and Python
  runtime_check:
    engine: cpu
    python_packages: [python3.11, python3.11-venv]
  register: decision
"""

RETURN = r"""
version:
  description: The release to install.
  returned: always
  type: str
  sample: "0.32.0"
python:
  description: How the venv gets its interpreter.
  returned: always
  type: dict
  sample: {"action": "use", "path": "/usr/bin/python3.11", "version": "3.11"}
host:
  description: What host_runtime_facts reports (glibc, the platform tags pip accepts, the Pythons, ...).
  returned: always
  type: dict
problems:
  description: What stops the install, each naming the variable.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.host_runtime import runtime_facts
from ansible.module_utils.runtime_check import choose_python, driver_problem, pick_release
from ansible.module_utils.vllm_versions import RELEASES


def main():
    module = AnsibleModule(
        argument_spec=dict(
            engine=dict(type="str", required=True, choices=["cuda", "cpu", "ascend"]),
            version=dict(type="str", default=""),
            python_packages=dict(type="list", elements="str", default=[]),
            python_archive=dict(type="str", default=""),
            driver_version=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    host = runtime_facts([], pythons=True)
    problems = []
    releases = RELEASES[params["engine"]]
    version, problem = pick_release(releases, params["version"], host["glibc_version"])
    if problem:
        module.exit_json(changed=False, version=None, python={}, host=host, problems=[problem])
    release = releases["versions"][version]
    python = choose_python(host["pythons"], release["python"][0], release["python"][1],
                           params["python_packages"], params["python_archive"])
    problems += [p for p in (python.get("problem"),
                             driver_problem(params["driver_version"], release.get("driver_min")))
                 if p]
    module.exit_json(changed=False, version=version, release=release, python=python, host=host,
                     problems=problems)


if __name__ == "__main__":
    main()
