#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Look an engine release up in the project's version table, changing nothing."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_release
short_description: Look a vLLM engine release up in the project's version table
description:
  - Returns the row of the version table (C(module_utils/vllm_versions.py)) for an engine's release -
    the packages it installs, its Python range, glibc, NVIDIA driver branch or CANN release - so that
    a role reads the one table instead of keeping a copy.
  - An unknown release fails naming C(vllm_fleet_engine_version) and the releases the table has.
version_added: "0.1.0"
author: vllm-fleet
options:
  engine:
    description: The vLLM build.
    type: str
    required: true
    choices: [cuda, cpu, ascend]
  version:
    description: The release; empty is the table's default for the engine.
    type: str
    default: ""
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Read the vllm-ascend release's CANN
  vllm_release:
    engine: ascend
  register: release
"""

RETURN = r"""
version:
  description: The release.
  returned: success
  type: str
  sample: 0.23.0
release:
  description: Its row of the table.
  returned: success
  type: dict
  sample: {packages: [vllm==0.23.0, vllm-ascend==0.23.0], python: ["3.10", "3.13"], glibc_min: "2.34",
           cann: 9.1.0, vllm: 0.23.0}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.vllm_versions import UnknownRelease, release


def main():
    module = AnsibleModule(
        argument_spec=dict(
            engine=dict(type="str", required=True, choices=["cuda", "cpu", "ascend"]),
            version=dict(type="str", default=""),
        ),
        supports_check_mode=True,
    )
    engine, version = module.params["engine"], module.params["version"]
    try:
        version, row = release(engine, version)
    except UnknownRelease as exc:
        module.fail_json(msg="vllm_fleet_engine_version: %s" % exc)
    module.exit_json(changed=False, version=version, release=row)


if __name__ == "__main__":
    main()
