#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Download a checked model revision, verify it, and switch the current link."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: hf_snapshot
short_description: Download a pinned model revision, verify it, then point current at it
description:
  - Downloads with huggingface_hub's C(snapshot_download) into C(ROOT/ORG/REPO/SHA.partial)
    (an interrupted run resumes there), checks every file against the size and hash from
    hf_revision (the commit tree's LFS sha256, or the git blob sha1; a torn file is fetched once
    more), checks that C(tokenizer.json) loads as a fast tokenizer, renames the folder to
    C(ROOT/ORG/REPO/SHA) and atomically points C(ROOT/ORG/REPO/current) at it.
  - A verified snapshot is never downloaded or touched again; a re-run changes nothing.
  - Runs with a Python that has huggingface_hub and tokenizers (the role's tool venv).
version_added: "0.1.0"
author: vllm-fleet
requirements:
  - huggingface_hub
  - tokenizers
options:
  revision_info:
    description: What hf_revision returned (C(sha), C(files), C(bytes)).
    type: dict
    required: true
  root:
    description: Where models live.
    type: path
    default: /var/lib/vllm/models
extends_documentation_fragment:
  - hf_hub
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Download the checked revision
  hf_snapshot:
    repo: demo/tiny-gemma4
    revision_info: "{{ model_revision }}"
    endpoint: http://mirror:8090
  vars:
    ansible_python_interpreter: /opt/vllm/model-tools/bin/python
"""

RETURN = r"""
path:
  description: The verified snapshot.
  returned: success
  type: str
  sample: /var/lib/vllm/models/demo/tiny-gemma4/6b30899999e079f0aa0e6ed629ebcaf6de0dae99
current:
  description: The link that points at it.
  returned: success
  type: str
downloaded:
  description: Whether files were downloaded in this run.
  returned: success
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible.module_utils.hf_hub_check import HUB_ARGUMENT_SPEC, ModelError
from ansible.module_utils.hf_snapshot import fetch


def main():
    module = AnsibleModule(
        argument_spec=dict(
            HUB_ARGUMENT_SPEC,
            revision_info=dict(type="dict", required=True),
            root=dict(type="path", default="/var/lib/vllm/models"),
        ),
        supports_check_mode=True,
    )
    try:
        import huggingface_hub
    except ImportError:
        module.fail_json(msg=missing_required_lib("huggingface_hub"))
    params = module.params
    try:
        result = fetch(huggingface_hub, params["repo"], params["revision_info"], params["root"],
                       params["endpoint"], params["token"], params["allow_patterns"],
                       module.check_mode)
    except ModelError as exc:
        module.fail_json(msg=str(exc))
    except Exception as exc:  # the hub client's own errors, reported with their text
        module.fail_json(msg="vllm_fleet_model_endpoint: download of %s failed: %s"
                         % (params["repo"], exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
