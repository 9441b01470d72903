#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Compare the staged configuration of the vLLM instances with the one they run, changing nothing."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_changes
short_description: Say which files of the vLLM instances a change replaces, and what changes in each
description:
  - Compares each staged file (what the role rendered for the next start) with the live one the instance
    runs with, and says what changes - each vLLM flag with its old and new value for C(config) files, the
    changed lines for C(unit) files, and only that something changed for C(secret) files (the environment
    holds the API key).
  - A live file that does not exist is C(new); a staged file that does not exist (check mode) is
    C(not staged yet).
  - Read-only; never reports a change.
version_added: "0.1.0"
author: vllm-fleet
options:
  files:
    description: The files, C([{name, staged, live, kind}]), C(kind) one of C(config), C(unit), C(secret).
    type: list
    elements: dict
    required: true
  read:
    description: Live vLLM config files to read the settings of (what the instances run with now).
    type: list
    elements: path
    default: []
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Find what the staged configuration changes
  vllm_changes:
    files:
      - {name: main.yaml, staged: /etc/vllm/next/main.yaml, live: /etc/vllm/main.yaml, kind: config}
      - {name: main.env, staged: /etc/vllm/next/main.env, live: /etc/vllm/main.env, kind: secret}
  register: changes
"""

RETURN = r"""
changed_files:
  description: The names of the files whose live version differs from the staged one.
  returned: success
  type: list
  elements: str
  sample: [main.yaml]
details:
  description: For each of them, what changes.
  returned: success
  type: dict
  sample: {main.yaml: ["model: \"/var/lib/vllm/models/a\" -> \"/var/lib/vllm/models/b\""]}
settings:
  description: The settings of each file of O(read) that exists, by its name without C(.yaml).
  returned: success
  type: dict
  sample: {main: {model: /var/lib/vllm/models/a, port: 8000, host: 10.0.0.5}}
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.vllm_config import parse, staged_changes


def read(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def main():
    module = AnsibleModule(
        argument_spec=dict(files=dict(type="list", elements="dict", required=True),
                           read=dict(type="list", elements="path", default=[])),
        supports_check_mode=True,
    )
    try:
        result = staged_changes(module.params["files"], read)
    except (KeyError, OSError) as exc:
        module.fail_json(msg="files: %s" % exc)
    settings = {}
    for path in module.params["read"]:
        text = read(path)
        if text is not None:
            settings[os.path.basename(path)[:-len(".yaml")]] = parse(text)
    module.exit_json(changed=False, changed_files=result["changed"], details=result["details"], settings=settings)


if __name__ == "__main__":
    main()
