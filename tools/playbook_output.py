"""What ansible-playbook printed, read back (the default stdout callback, results as JSON:
ANSIBLE_STDOUT_CALLBACK=default ANSIBLE_CALLBACK_RESULT_FORMAT=json): the recap's changed
count per host, the tasks that changed, and what a task printed; and a playbook run so
that it prints that way.  Shared by the molecule scenarios' tests and the operator's path
(tests/operator)."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess


def run_playbook(inventory: str, playbook: str, *args: str, cwd=None) -> tuple[int, str]:
    """ansible-playbook on ``inventory``, printing as the readers here expect: (rc, stdout + stderr)."""
    run = subprocess.run([shutil.which("ansible-playbook") or "ansible-playbook", "-i", inventory, playbook, *args],
                         cwd=cwd, capture_output=True, text=True,
                         env=dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
                                  ANSIBLE_STDOUT_CALLBACK="default", ANSIBLE_CALLBACK_RESULT_FORMAT="json"))
    return run.returncode, run.stdout + run.stderr


def recap_changed(output: str) -> dict:
    """{host: changed} from the PLAY RECAP."""
    return {host: int(changed) for host, changed in re.findall(r"^(\S+)\s+: ok=\d+\s+changed=(\d+)", output, re.M)}


def changed_tasks(output: str) -> list:
    """'host: task' for every task the run says it changed (or, in check mode, would)."""
    found = []
    for section in output.split("\nTASK [")[1:]:
        name = section.split("]", 1)[0]
        found += ["%s: %s" % (host, name) for host in re.findall(r"^changed: \[([^\]]+)\]", section, re.M)]
    return found


def printed(output: str, task: str) -> dict:
    """host -> the msg a task printed (the default callback's ``ok: [host] => {...}``)."""
    found, decoder = {}, json.JSONDecoder()
    for section in output.split("\nTASK [")[1:]:
        if not section.startswith(task + "]"):
            continue
        for match in re.finditer(r"^ok: \[([\w.-]+)\] => ", section, re.M):
            found[match.group(1)] = decoder.raw_decode(section, match.end())[0]["msg"]
    return found
