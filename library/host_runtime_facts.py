#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""glibc version, Python and free disk space of a host."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: host_runtime_facts
short_description: Report a host's glibc, Python and free disk space where files will go
description:
  - Sets C(ansible_facts.host_runtime) - the glibc version as pip reads it
    (C(os.confstr("CS_GNU_LIBC_VERSION")); manylinux wheel tags are checked against it), the
    Python that runs modules, the machine architecture, and for each path in O(disk_paths) the
    free and total bytes of the file system that holds it (or will hold it - the nearest
    existing parent is measured).
version_added: "0.1.0"
author: vllm-fleet
options:
  disk_paths:
    description: Paths whose file system's free space to report.
    type: list
    elements: path
    default: []
  find_pythons:
    description:
      - Also list the CPython 3 interpreters in C(/usr/bin), C(/usr/local/bin) and
        C(/opt/vllm/python/bin) with their versions and whether they can create a venv.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  facts:
    support: full
"""

EXAMPLES = r"""
- name: Read glibc and the free space under the model root
  host_runtime_facts:
    disk_paths: [/var/lib/vllm/models]
"""

RETURN = r"""
ansible_facts:
  description: Facts to add to ansible_facts.
  returned: always
  type: dict
  contains:
    host_runtime:
      description: glibc, Python, machine and disk space.
      type: dict
      sample:
        glibc_version: "2.36"
        pip_platforms: [manylinux_2_36_x86_64, "...", manylinux2014_x86_64, linux_x86_64]
        python_version: "3.11.2"
        python_executable: /usr/bin/python3
        machine: x86_64
        disk:
          - path: /var/lib/vllm/models
            measured_at: /var/lib
            free_bytes: 85899345920
            total_bytes: 107374182400
        pythons:
          - {path: /usr/bin/python3.11, version: "3.11.2", venv: true}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.host_runtime import runtime_facts


def main():
    module = AnsibleModule(
        argument_spec=dict(disk_paths=dict(type="list", elements="path", default=[]),
                           find_pythons=dict(type="bool", default=False)),
        supports_check_mode=True,
    )
    module.exit_json(changed=False,
                     ansible_facts={"host_runtime": runtime_facts(module.params["disk_paths"],
                                                                  module.params["find_pythons"])})


if __name__ == "__main__":
    main()
