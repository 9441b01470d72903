#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Check that a vLLM server serves: health, model list and one real chat completion."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_probe
short_description: Check that a vLLM OpenAI-compatible server answers a real chat completion
description:
  - Waits until C(/health) answers 200, checks that C(/v1/models) lists O(model) (served from O(root) when
    given) and that C(/version) is O(version) when given, sends one chat completion and checks that the
    answer has the OpenAI shape (a message, a finish reason, a positive completion token count).
  - Read-only; never reports a change.
version_added: "0.1.0"
author: vllm-fleet
options:
  url:
    description: Base URL of the server, without C(/v1).
    type: str
    required: true
  api_key:
    description: The server's API key (C(VLLM_API_KEY)); empty when it has none.
    type: str
    default: ""
  model:
    description: The served model name.
    type: str
    required: true
  prompt:
    description: The user message of the chat completion.
    type: str
    default: Say hello to the fleet operator.
  max_tokens:
    description: Tokens to generate.
    type: int
    default: 16
  timeout:
    description: Seconds to wait for C(/health), and for the completion.
    type: int
    default: 600
  root:
    description: The model path the server must serve O(model) from (C(root) in C(/v1/models)); empty checks
      nothing.
    type: str
    default: ""
  version:
    description: The vLLM release C(/version) must report (a local suffix such as C(+cpu) aside); empty checks
      nothing.
    type: str
    default: ""
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Check that the instance answers a chat completion
  vllm_probe:
    url: http://127.0.0.1:8000
    api_key: "{{ vllm_fleet_api_key }}"
    model: google/gemma-4-31B-it
"""

RETURN = r"""
answer:
  description: The generated text.
  returned: success
  type: str
finish_reason:
  description: C(stop) or C(length).
  returned: success
  type: str
usage:
  description: Token counts of the completion.
  returned: success
  type: dict
  sample: {"prompt_tokens": 22, "completion_tokens": 16, "total_tokens": 38}
models:
  description: The model names the server lists.
  returned: success
  type: list
  elements: str
root:
  description: The model path the server serves O(model) from.
  returned: success
  type: str
version:
  description: The vLLM release C(/version) reported (empty when O(version) was not asked).
  returned: success
  type: str
health_seconds:
  description: Seconds until C(/health) answered 200.
  returned: success
  type: float
chat_seconds:
  description: Seconds the chat completion took.
  returned: success
  type: float
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.vllm_probe import ProbeError, probe


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type="str", required=True),
            api_key=dict(type="str", default="", no_log=True),
            model=dict(type="str", required=True),
            prompt=dict(type="str", default="Say hello to the fleet operator."),
            max_tokens=dict(type="int", default=16),
            timeout=dict(type="int", default=600),
            root=dict(type="str", default=""),
            version=dict(type="str", default=""),
        ),
        supports_check_mode=True,
    )
    params = module.params
    try:
        result = probe(params["url"].rstrip("/"), params["api_key"], params["model"],
                       prompt=params["prompt"], max_tokens=params["max_tokens"],
                       timeout=params["timeout"], root=params["root"], version=params["version"])
    except (ProbeError, OSError) as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
