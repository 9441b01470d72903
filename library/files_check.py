#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Say whether the files and units a role's change path sets are already in place."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: files_check
short_description: Compare the files, commands and units a role's change path sets with the host, in one call
description:
  - Reads each file (its whole content, owner, group and mode) or folder, checks that each command is installed,
    that each path of O(absent) does not exist and that each systemd unit is active and enabled, and lists every
    difference in words.
  - A role calls it before its change path (templates, folders, units started) and skips that path when
    RV(in_place) is true, so that a converged host costs one task result instead of one per step.
  - Give O(files) the contents the change path writes, rendered the same way
    (C(lookup('ansible.builtin.template', ...)) for a template). The contents never appear in the result, so
    a file that holds a secret needs no C(no_log) on the task, and its differences stay readable.
  - Changes nothing.
version_added: "0.1.0"
author: vllm-fleet
options:
  files:
    description: The files (with O(files[].content)) and folders (O(files[].state=directory)) to compare.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: The path.
        type: path
        required: true
      content:
        description: The file's whole content (kept out of the result's invocation, as a secret would be).
        type: str
      state:
        description: C(file) for a file with O(files[].content), C(directory) for a folder.
        type: str
        choices: [file, directory]
        default: file
      owner:
        description: Its owner's name; not compared when omitted.
        type: str
      group:
        description: Its group's name; not compared when omitted.
        type: str
      mode:
        description: Its mode, a quoted octal number such as C("0644"); not compared when omitted.
        type: str
  commands:
    description: Executables that must be installed (a package's, say).
    type: list
    elements: path
    default: []
  absent:
    description: Paths that must not exist (what an earlier layout left, say).
    type: list
    elements: path
    default: []
  units:
    description: systemd units that must be active and enabled.
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
- name: Read whether the firewall's files and unit are in place
  files_check:
    commands: [/usr/sbin/nft]
    files:
      - path: /etc/vllm/firewall.nft
        content: "{{ lookup('ansible.builtin.template', 'firewall.nft.j2') }}"
        owner: root
        group: root
        mode: "0644"
    units: [vllm-fleet-firewall.service]
  register: firewall_state

- name: Write and load what differs
  ansible.builtin.include_tasks: firewall_change.yml
  when: not firewall_state.in_place
"""

RETURN = r"""
in_place:
  description: Whether nothing differs.
  returned: success
  type: bool
drift:
  description: What differs, in words; empty when in place.
  returned: success
  type: list
  elements: str
  sample: ["/etc/vllm/firewall.nft differs from what the role writes", "vllm-fleet-firewall.service is inactive, not active"]
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.files_state import drift


def main():
    module = AnsibleModule(
        argument_spec=dict(
            files=dict(type="list", elements="dict", default=[], options=dict(
                path=dict(type="path", required=True),
                content=dict(type="str", no_log=True),
                state=dict(type="str", choices=["file", "directory"], default="file"),
                owner=dict(type="str"),
                group=dict(type="str"),
                mode=dict(type="str"),
            ), required_if=[("state", "file", ["content"])]),
            commands=dict(type="list", elements="path", default=[]),
            absent=dict(type="list", elements="path", default=[]),
            units=dict(type="list", elements="str", default=[]),
        ),
        supports_check_mode=True,
    )
    systemctl = module.get_bin_path("systemctl", required=bool(module.params["units"]))

    def answer(verb: str, unit: str) -> str:
        return module.run_command([systemctl, verb, unit])[1].strip()

    params = module.params
    found = drift(params["files"], params["commands"], params["units"], answer, params["absent"])
    module.exit_json(changed=False, in_place=not found, drift=found)


if __name__ == "__main__":
    main()
