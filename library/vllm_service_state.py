#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Say what a change of this host's vLLM instances is, changing nothing."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_service_state
short_description: Say what the staged configuration of this host's vLLM instances changes, and what acts on it
description:
  - Reads the instances configured now (each C(<name>.yaml) in O(config_dir)) and compares every staged file in
    O(next_dir) with the live one - each vLLM flag with its old and new value for configurations, the changed
    lines of the unit, only that something changed for environments (they hold the API key).
  - Returns what the role acts on - which instances restart, which retire, what is kept for a rollback
    (every file that served), the ports open while the host changes, the health gate's instances after the
    change and before it - so that the task files only orchestrate (C(module_utils/service_state.py)).
  - With O(instances) empty (a host that leaves the fleet) it only reads what serves.
  - Read-only; never reports a change.
version_added: "0.2.0"
author: vllm-fleet
options:
  instances:
    description: The plan's instances, C([{name, port, args}]).
    type: list
    elements: dict
    default: []
  config_dir:
    description: Where the live C(<name>.yaml) and C(<name>.env) of each instance are.
    type: path
    default: /etc/vllm
  next_dir:
    description: Where the role staged the next files.
    type: path
    default: /etc/vllm/next
  unit:
    description: The live template unit.
    type: path
    default: /etc/systemd/system/vllm@.service
  user:
    description: The group of the configuration files (the engine's user).
    type: str
    default: vllm
  model_path:
    description: The model path the instances serve after the change (the gate checks it).
    type: str
    default: ""
  version:
    description: The vLLM release the instances run after the change (the gate checks it).
    type: str
    default: ""
  staged_changed:
    description:
      - The staged files the staging tasks reported changed, by name (C(main.yaml), C(main.env),
        C(vllm@.service)). Read in check mode alone, where they are not written and still count as changes;
        in a real run the staged files themselves are compared (after a rollback next/ holds the failed change, and
        restaging the running one is no change of the host).
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Find what the staged configuration changes
  vllm_service_state:
    instances: "{{ preflight_plan.instances }}"
    model_path: /var/lib/vllm/models/google--gemma-4-31b/snapshots/0123abc
    version: 0.33.0
  register: next_state

- name: Read what serves (a host that leaves the fleet)
  vllm_service_state:
  register: serving
"""

RETURN = r"""
before:
  description: The instances configured now.
  returned: success
  type: list
  elements: str
  sample: [main]
serving:
  description: Whether any instance is configured now.
  returned: success
  type: bool
retired:
  description: The instances configured now that the plan no longer declares.
  returned: success
  type: list
  elements: str
  sample: []
settings:
  description: The settings of each instance configured now, by name.
  returned: success
  type: dict
  sample: {main: {model: /var/lib/vllm/models/a, port: 8000, host: 10.0.0.5}}
files:
  description: Every file the instances run with after the change, C({name, live, kind, group, mode}).
  returned: success
  type: list
  elements: dict
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
change:
  description: The change report, one line.
  returned: success
  type: str
  sample: "main.yaml: model: \"/var/lib/vllm/models/a\" -> \"/var/lib/vllm/models/b\""
stale:
  description: The instances whose files change (every one when the unit does).
  returned: success
  type: list
  elements: str
kept:
  description: Every file that serves now, kept in previous/ during a change, C({name, live, kind, group, mode}).
  returned: success
  type: list
  elements: dict
ports:
  description: The ports of the instances after the change.
  returned: success
  type: list
  elements: int
ports_before:
  description: The ports of the instances configured now.
  returned: success
  type: list
  elements: int
ports_changing:
  description: Both, open while the host changes.
  returned: success
  type: list
  elements: int
gate:
  description: The health gate's instances after the change, C({name, url, model, root, version, headless}).
  returned: success
  type: list
  elements: dict
gate_before:
  description: The health gate's instances as they serve now (a rollback's), with their C(shutdown_timeout).
  returned: success
  type: list
  elements: dict
"""

import glob
import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.service_state import plan


def read(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            instances=dict(type="list", elements="dict", default=[]),
            config_dir=dict(type="path", default="/etc/vllm"),
            next_dir=dict(type="path", default="/etc/vllm/next"),
            unit=dict(type="path", default="/etc/systemd/system/vllm@.service"),
            user=dict(type="str", default="vllm"),
            model_path=dict(type="str", default=""),
            version=dict(type="str", default=""),
            staged_changed=dict(type="list", elements="str", default=[]),
        ),
        supports_check_mode=True,
    )
    p = module.params
    existing = [os.path.basename(path)[:-len(".yaml")] for path in glob.glob(os.path.join(p["config_dir"], "*.yaml"))]
    try:
        result = plan(p["instances"], existing, read, config_dir=p["config_dir"], next_dir=p["next_dir"],
                      unit=p["unit"], user=p["user"], model_path=p["model_path"], version=p["version"],
                      staged_changed=p["staged_changed"] if module.check_mode else [])
    except (KeyError, TypeError, ValueError, OSError) as exc:
        module.fail_json(msg="instances: %s" % exc)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
