#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Wait until a vLLM instance holds no request, changing nothing."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_idle
short_description: Wait until a vLLM instance has no running or waiting request
description:
  - Polls the instance's C(/metrics) (open without the API key) until C(vllm:num_requests_running) and
    C(vllm:num_requests_waiting) are both 0, or O(timeout) seconds have passed.
  - Used after the gateway took the instance out of rotation, before it restarts.  A timeout is not a
    failure, since the unit's graceful stop (C(--shutdown-timeout)) still lets the rest finish; the result
    says whether it became idle.
  - An instance that does not answer (stopped, still starting) holds no request. Fails when C(/metrics) answers
    without the gauges or with an HTTP error.  Read-only; never reports a change.
version_added: "0.1.0"
author: vllm-fleet
options:
  url:
    description: Base URL of the instance, without C(/v1).
    type: str
    required: true
  timeout:
    description: Seconds to wait at most.
    type: int
    default: 120
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Wait until the drained instance holds no request
  vllm_idle:
    url: http://10.0.0.5:8000
    timeout: 60
"""

RETURN = r"""
idle:
  description: Whether the instance held no request when the wait ended.
  returned: success
  type: bool
running:
  description: Requests running when the wait ended.
  returned: success
  type: int
waiting:
  description: Requests waiting when the wait ended.
  returned: success
  type: int
seconds:
  description: Seconds waited.
  returned: success
  type: float
answered:
  description: Whether C(/metrics) answered; an instance that does not (stopped, still starting) holds no request.
  returned: success
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.vllm_probe import ProbeError, wait_idle


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type="str", required=True),
            timeout=dict(type="int", default=120),
        ),
        supports_check_mode=True,
    )
    try:
        result = wait_idle(module.params["url"].rstrip("/"), module.params["timeout"])
    except (ProbeError, OSError) as exc:
        module.fail_json(msg=str(exc))
    if not result["idle"]:
        module.warn("%s still holds %d running and %d waiting request(s) after %ss; the graceful stop "
                    "(--shutdown-timeout) gives them more time" % (module.params["url"], result["running"],
                                                                   result["waiting"], result["seconds"]))
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
