#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Set transparent hugepage modes in the running kernel."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: transparent_hugepage
short_description: Set the running kernel's transparent hugepage (THP) modes
description:
  - Reads C(enabled) and C(defrag) under C(/sys/kernel/mm/transparent_hugepage) and writes
    only the ones that differ, so a re-run reports no change.
  - Affects the running kernel only; pair it with a boot-time mechanism (the os_tuning role
    installs a oneshot systemd unit) to survive a reboot.
version_added: "0.1.0"
author: vllm-fleet
options:
  enabled:
    description: Mode for C(enabled). Omit to leave it alone.
    type: str
    choices: [always, madvise, never]
  defrag:
    description: Mode for C(defrag). Omit to leave it alone.
    type: str
    choices: [always, defer, defer+madvise, madvise, never]
  sysfs_root:
    description: The THP sysfs directory (tests point this elsewhere).
    type: path
    default: /sys/kernel/mm/transparent_hugepage
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
notes:
  - THP is not namespaced; inside a container this changes the host kernel.
"""

EXAMPLES = r"""
- name: Turn transparent hugepages off
  transparent_hugepage:
    enabled: never
    defrag: never
"""

RETURN = r"""
before:
  description: Modes in force before the run, for the knobs that were asked for.
  returned: success
  type: dict
  sample: {"enabled": "always", "defrag": "madvise"}
after:
  description: Modes in force after the run (what they would be, in check mode).
  returned: success
  type: dict
  sample: {"enabled": "never", "defrag": "never"}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.kernel_tuning import (
    THP_DEFRAG_MODES, THP_ENABLED_MODES, TuningError, thp_apply, thp_plan)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            enabled=dict(type="str", choices=list(THP_ENABLED_MODES)),
            defrag=dict(type="str", choices=list(THP_DEFRAG_MODES)),
            sysfs_root=dict(type="path", default="/sys/kernel/mm/transparent_hugepage"),
        ),
        required_one_of=[("enabled", "defrag")],
        supports_check_mode=True,
    )
    wanted = {"enabled": module.params["enabled"], "defrag": module.params["defrag"]}
    try:
        changes = thp_plan(module.params["sysfs_root"], wanted)
        if changes and not module.check_mode:
            thp_apply(module.params["sysfs_root"], changes)
    except TuningError as exc:
        module.fail_json(msg=str(exc))
    after = {k: v for k, v in wanted.items() if v is not None}
    before = dict(after, **{k: cur for k, (cur, _new) in changes.items()})
    module.exit_json(
        changed=bool(changes), before=before, after=after,
        diff={"before": "".join("%s: %s\n" % kv for kv in sorted(before.items())),
              "after": "".join("%s: %s\n" % kv for kv in sorted(after.items()))})


if __name__ == "__main__":
    main()
