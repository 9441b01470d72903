#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Write one host's Prometheus file_sd files on a monitoring host, every job in one call."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: file_sd_publish
short_description: Write one host's Prometheus file_sd target files, every job in one call
description:
  - For each job of O(jobs), writes C(<folder>/<job>/<host>.json) with the host's target groups where it has
    any, making the job's folder, and removes the file where it has none.
  - Each file is written under a name with a leading dot beside its place and moved over it, so that
    Prometheus (file_sd pattern C([^.]*.json)) never reads half a file or the temporary one. Files C(0644),
    folders C(0755), owned by O(owner) and O(group); the text is what C(to_nice_json) writes, and a newline.
  - Refuses a host or job name that cannot name a file, and a job whose value is not a list of target groups.
version_added: "0.1.0"
author: vllm-fleet
options:
  folder:
    description: The file_sd folder of the monitoring host; one folder per job under it.
    type: path
    required: true
  host:
    description: The host whose files these are (C(inventory_hostname)); its file in each job is C(<host>.json).
    type: str
    required: true
  jobs:
    description: Job name to the host's target groups (C(targets), C(labels)), as module host_entries returns
      them; an empty list removes the host's file of that job.
    type: dict
    required: true
  owner:
    description: The files' and folders' owner.
    type: str
    default: root
  group:
    description: Their group.
    type: str
    default: root
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
"""

EXAMPLES = r"""
- name: Write the host's targets on every monitoring host
  file_sd_publish:
    folder: /etc/prometheus/file_sd
    host: "{{ inventory_hostname }}"
    jobs:
      vllm: [{targets: ["10.0.0.2:8000"], labels: {host: node1, vllm_instance: main}}]
      vllm_health: []
  delegate_to: "{{ item }}"
  loop: "{{ groups['monitoring'] }}"
"""

RETURN = r"""
written:
  description: The files written (new or different).
  returned: success
  type: list
  elements: str
  sample: [/etc/prometheus/file_sd/vllm/node1.json]
removed:
  description: The files removed.
  returned: success
  type: list
  elements: str
  sample: [/etc/prometheus/file_sd/vllm_health/node1.json]
"""

import grp
import pwd

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.file_sd import FileSdError, publish


def main():
    module = AnsibleModule(
        argument_spec=dict(
            folder=dict(type="path", required=True),
            host=dict(type="str", required=True),
            jobs=dict(type="dict", required=True),
            owner=dict(type="str", default="root"),
            group=dict(type="str", default="root"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        uid, gid = pwd.getpwnam(p["owner"]).pw_uid, grp.getgrnam(p["group"]).gr_gid
    except KeyError as exc:
        module.fail_json(msg="owner/group: %s is not on this host" % exc)
    try:
        result = publish(p["folder"], p["host"], p["jobs"], uid, gid, module.check_mode)
    except FileSdError as exc:
        module.fail_json(msg=str(exc))
    except OSError as exc:
        module.fail_json(msg="%s: %s" % (exc.filename or p["folder"], exc.strerror))
    if not module._diff:
        result.pop("diff")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
