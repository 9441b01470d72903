"""Bad os_tuning inputs fail before any task changes the host, naming the variable.

Runs the real role against this machine with --check, so even a broken validation
could not change anything here; the assertions prove that the failing task is a
validation task and that nothing before it reported a change.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

CASES = {
    "swappiness-500": ({"os_tuning_sysctl": {"vm.swappiness": 500}},
                       "os_tuning_sysctl['vm.swappiness']=500 is out of range: the kernel accepts 0 to 200"),
    "thp-off": ({"os_tuning_transparent_hugepages": "off"},
                "value of os_tuning_transparent_hugepages must be one of: never, madvise, always, got: off"),
    "typo-key": ({"os_tuning_sysctl_extra": {"vm.swapiness": 10}},
                 "os_tuning_sysctl_extra['vm.swapiness']: this host's kernel has no such parameter"),
    "bool-value": ({"os_tuning_sysctl_extra": {"vm.overcommit_memory": True}},
                   "os_tuning_sysctl_extra['vm.overcommit_memory']: a boolean is not a kernel parameter value"),
    "swap-off-string": ({"os_tuning_swap_off": "sometimes"},
                        "os_tuning_swap_off"),
    "nofile-too-low": ({"os_tuning_nofile_user": "vllm", "os_tuning_nofile_limit": 64},
                       "os_tuning_nofile_limit=64 is out of range"),
}


@pytest.mark.parametrize("extra,message", CASES.values(), ids=CASES.keys())
def test_refused_before_any_change(root, tmp_path, extra, message):
    inventory = tmp_path / "hosts.ini"
    inventory.write_text(f"[inference]\nlocalhost ansible_connection=local "
                         f"ansible_python_interpreter={sys.executable}\n")
    (tmp_path / "vars.json").write_text(json.dumps(dict(extra, ansible_become=False)))
    # The project's paths without its ansible.cfg, whose timing callback would
    # print beside the JSON report.
    (tmp_path / "ansible.cfg").write_text("")
    env = dict(os.environ, ANSIBLE_CONFIG=str(tmp_path / "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="json",
               ANSIBLE_LIBRARY=str(root / "library"), ANSIBLE_MODULE_UTILS=str(root / "module_utils"),
               ANSIBLE_ROLES_PATH=str(root / "roles"), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "--check",
         "-i", str(inventory), "-e", f"@{tmp_path / 'vars.json'}", "playbooks/site.yml"],
        cwd=root, env=env, capture_output=True, text=True)
    assert proc.returncode != 0, proc.stdout[-2000:]
    report = json.loads(proc.stdout)
    tasks = [t for play in report["plays"] for t in play["tasks"]]
    failed = [t for t in tasks if t["hosts"]["localhost"].get("failed")]
    assert len(failed) == 1
    result = failed[0]["hosts"]["localhost"]
    text = result.get("msg", "") + " ".join(r.get("msg", "") for r in result.get("results", []))
    assert message in text
    assert failed[0]["task"]["name"].split(" : ", 1)[-1].startswith(("Validating arguments", "Check "))
    assert not any(t["hosts"]["localhost"].get("changed") for t in tasks)
    assert report["stats"]["localhost"]["changed"] == 0
