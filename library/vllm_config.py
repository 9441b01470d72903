#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Write a vLLM --config file only after the installed vLLM's parser accepted it."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_config
short_description: Write vLLM's --config YAML after the installed vLLM's own parser accepted it
description:
  - Renders O(settings) as a vLLM C(--config) file (keys are flag names, one per line, sorted, so
    the same settings always give the same file). The settings are an instance's from the plan
    (role C(preflight), which has checked the operator's flags already) and the model's path.
  - When the file would change, the vLLM installed beside O(python) parses the new file exactly as
    the API server will (C(make_arg_parser) and C(validate_parsed_serve_args)); a refusal fails the
    task with the parser's message and leaves the existing file, and so the running service, as it was.
version_added: "0.1.0"
author: vllm-fleet
options:
  path:
    description: The config file (must end in C(.yaml) or C(.yml), as vLLM requires).
    type: path
    required: true
  settings:
    description: The instance's flags (the plan's, with the model's path).
    type: dict
    required: true
  python:
    description: The Python of the vLLM venv whose parser checks the file.
    type: path
    required: true
  validate:
    description: Run vLLM's parser on a changed file before writing it.
    type: bool
    default: true
  variable:
    description: The inventory variable named in error messages.
    type: str
    default: preflight_vllm_args
extends_documentation_fragment:
  - files
attributes:
  check_mode:
    support: full
    details: The parser still runs in check mode when vLLM is installed; nothing is written.
  diff_mode:
    support: full
notes:
  - Importing vLLM's parser takes some seconds; it only runs when the file would change.
"""

EXAMPLES = r"""
- name: Write the instance's vLLM configuration
  vllm_config:
    path: /etc/vllm/main.yaml
    python: /opt/vllm/cuda-0.33.0/bin/python
    settings:
      model: /var/lib/vllm/models/google/gemma-4-31B-it/0123456789abcdef0123456789abcdef01234567
      port: 8000
      tensor-parallel-size: 1
      max-model-len: 32768
      enable-prefix-caching: true
    owner: root
    group: vllm
    mode: "0640"
"""

RETURN = r"""
path:
  description: The config file.
  returned: always
  type: str
validated:
  description: Whether vLLM's parser checked the file in this run (only when it changed).
  returned: always
  type: bool
vllm_version:
  description: The vLLM version whose parser accepted the file.
  returned: when validated
  type: str
  sample: 0.32.0
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.vllm_config import ConfigError, converge


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            settings=dict(type="dict", required=True),
            python=dict(type="path", required=True),
            validate=dict(type="bool", default=True),
            variable=dict(type="str", default="preflight_vllm_args"),
        ),
        add_file_common_args=True,
        supports_check_mode=True,
    )
    params = module.params
    if not params["path"].endswith((".yaml", ".yml")):
        module.fail_json(msg="path: vLLM reads only *.yaml / *.yml config files, not %s" % params["path"])
    try:
        result = converge(params["path"], params["settings"], params["python"], validate=params["validate"],
                          check_mode=module.check_mode, variable=params["variable"])
    except ConfigError as exc:
        module.fail_json(msg=str(exc))
    for warning in result.pop("warnings"):
        module.warn(warning)
    file_args = module.load_file_common_arguments(params)
    if module.check_mode and not os.path.exists(params["path"]):
        module.exit_json(**result)
    result["changed"] = module.set_fs_attributes_if_different(file_args, result["changed"])
    module.exit_json(**result)


if __name__ == "__main__":
    main()
