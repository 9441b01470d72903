#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Check a model revision on a Hugging Face hub or mirror before anything is installed."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: hf_revision
short_description: Check a model revision on a Hugging Face hub or fleet mirror, changing nothing
description:
  - Asks the hub (C(GET /api/models/REPO/revision/REV)) for the commit sha, then the commit's tree
    (C(GET /api/models/REPO/tree/SHA?recursive=true)) for each file's size and hash - the LFS sha256
    its pointer names, or the git blob id - which the download will be verified against.
  - Refuses, naming the file, a file the endpoint would serve with another hash than the revision
    lists (C(HEAD /REPO/resolve/SHA/FILE), its C(X-Linked-Etag) or C(ETag)), before anything is downloaded.
  - Refuses a branch or tag name unless O(allow_floating), in which case it is resolved to a sha; a pinned
    sha that the hub answers with another commit is refused before any file is asked for.
  - An unknown repository or revision, a refused token or an unreachable hub fail with a message
    naming the variable to fix. Uses the Python standard library only, so it runs before any
    package is installed on the host.
  - With O(config), returns instead what the capacity planner needs of the revision - its own
    C(config.json) and the total size of its C(*.safetensors) files - and reports a hub that does not
    answer at all (a mirror not running yet) as C(reachable=false) rather than failing, so the caller
    can plan from its offline catalogue and say so.
version_added: "0.1.0"
author: vllm-fleet
options:
  revision:
    description: A 40-hex commit sha (or, with O(allow_floating), a branch or tag).
    type: str
    required: true
  allow_floating:
    description: Accept a branch or tag name and resolve it to a sha.
    type: bool
    default: false
  config:
    description: Read the revision's C(config.json) and weight sizes (O(allow_patterns) is then not used).
    type: bool
    default: false
extends_documentation_fragment:
  - hf_hub
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Check the pinned revision on the fleet mirror
  hf_revision:
    repo: demo/tiny-gemma4
    revision: 6b30899999e079f0aa0e6ed629ebcaf6de0dae99
    endpoint: http://mirror:8090
  register: model_revision

- name: Read the served revision's config.json and weight sizes
  hf_revision:
    repo: demo/tiny-gemma4
    revision: 115893f75ee34252aa70c6877eb37a13cc541e38
    endpoint: http://mirror:8090
    config: true
  register: model
"""

RETURN = r"""
sha:
  description: The commit sha.
  returned: success
  type: str
files:
  description: Files with the size and hash (LFS sha256, or git blob id) the download is verified against.
  returned: success
  type: list
  elements: dict
  sample: [{"name": "model.safetensors", "size": 683780, "hash": "f3b59aec423d53b30f8b86865c494d199b35d8c7"}]
bytes:
  description: Total size of the files.
  returned: success, without config
  type: int
reachable:
  description: Whether the hub answered; when false, C(reason) says why and nothing else is returned.
  returned: with config
  type: bool
reason:
  description: Why the hub could not be read.
  returned: with config, when reachable is false
  type: str
config:
  description: The revision's config.json.
  returned: with config, when reachable
  type: dict
weight_bytes:
  description: Total size of the revision's safetensors files (0 when it has none).
  returned: with config, when reachable
  type: int
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.hf_hub_check import (HUB_ARGUMENT_SPEC, ModelError, Unreachable,
                                               check_revision_format, model_files, revision_info)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            HUB_ARGUMENT_SPEC,
            revision=dict(type="str", required=True),
            allow_floating=dict(type="bool", default=False),
            config=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    params = module.params
    try:
        check_revision_format(params["revision"], params["allow_floating"])
        if params["config"]:
            info = dict(model_files(params["endpoint"], params["repo"], params["revision"],
                                    params["token"]), reachable=True)
        else:
            info = revision_info(params["endpoint"], params["repo"], params["revision"],
                                 params["token"], params["allow_patterns"])
    except ModelError as exc:
        # (only the planner's read of config.json may go on without the hub: it falls back
        # to the catalogue and says so; a download cannot)
        if isinstance(exc, Unreachable) and params["config"]:
            module.exit_json(changed=False, reachable=False, reason=str(exc))
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, **info)


if __name__ == "__main__":
    main()
