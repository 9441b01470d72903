"""Bad os_tuning inputs fail before any task changes the host, naming the variable.

Runs the real role against this machine with --check, so even a broken validation
could not change anything here; the assertions prove that the failing task is a
validation task and that nothing before it reported a change.
"""
from __future__ import annotations

import pytest

VALIDATION, CHECK = "Validating arguments", "Check "
# case: (variables, the message, the kind of task that refuses: argument specs or the role's checks)
CASES = {
    "swappiness-500": ({"os_tuning_sysctl": {"vm.swappiness": 500}},
                       "os_tuning_sysctl['vm.swappiness']=500 is out of range: the kernel accepts 0 to 200", CHECK),
    "thp-off": ({"os_tuning_transparent_hugepages": "off"},
                "value of os_tuning_transparent_hugepages must be one of: never, madvise, always, got: off",
                VALIDATION),
    "typo-key": ({"os_tuning_sysctl_extra": {"vm.swapiness": 10}},
                 "os_tuning_sysctl_extra['vm.swapiness']: this host's kernel has no such parameter", CHECK),
    "bool-value": ({"os_tuning_sysctl_extra": {"vm.overcommit_memory": True}},
                   "os_tuning_sysctl_extra['vm.overcommit_memory']: a boolean is not a kernel parameter value", CHECK),
    "swap-off-string": ({"os_tuning_swap_off": "sometimes"},
                        "argument 'os_tuning_swap_off' is of type str", VALIDATION),
    "nofile-too-low": ({"os_tuning_nofile_user": "vllm", "os_tuning_nofile_limit": 64},
                       "os_tuning_nofile_limit=64 is out of range", CHECK),
}
# site.yml plans first: a CPU plan of the tiny model lets the os_tuning play run.
PLANNABLE = {"vllm_fleet_engine": "cpu", "preflight_model": "tiny-gemma4",
             "preflight_max_model_len": 1024, "ansible_become": False}


@pytest.mark.parametrize("extra,message,refused_by", CASES.values(), ids=CASES.keys())
def test_refused_before_any_change(playbook, localhost_inventory, extra, message, refused_by):
    run = playbook("site.yml", localhost_inventory, dict(PLANNABLE, **extra), check=True)
    assert run.rc != 0
    task, text = run.failure("localhost")
    assert message in text
    assert task.startswith(refused_by), task
    assert run.changed() == 0
