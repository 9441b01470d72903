"""Check mode on the converged hosts changes nothing, in every scenario: what an operator
runs to preview a change (`--check`) must report changed=0 on hosts that have nothing to
change, or it previews changes that a run would not make.  Molecule's own `check` step
runs a playbook with --check without looking at what it reports; this test runs the
scenario's converge playbook that way after converge and idempotence, and asserts the
recap of every host, naming each task that says it would change.  A scenario whose side
effect leaves another desired state than converge.yml's says so in a check.yml of its
own.  (Every scenario's verifier collects this file: .config/molecule/config.yml.)"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from testinfra.utils.ansible_runner import AnsibleRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tools"))
from playbook_output import changed_tasks, recap_changed, run_playbook  # noqa: E402


def test_check_mode_on_the_converged_hosts_changes_nothing():
    inventory = os.environ["MOLECULE_INVENTORY_FILE"]
    scenario = Path(os.environ["MOLECULE_SCENARIO_DIRECTORY"])
    converge = scenario / "check.yml" if (scenario / "check.yml").exists() else scenario / "converge.yml"
    started = time.monotonic()
    returncode, output = run_playbook(inventory, str(converge), "--check",
                                      cwd=os.environ.get("MOLECULE_PROJECT_DIRECTORY"))
    recap = recap_changed(output)
    print("%s --check on the converged hosts: %.0fs, changed %s" % (converge.name, time.monotonic() - started, recap))
    assert returncode == 0, output[-3000:]
    hosts = sorted(AnsibleRunner(inventory).get_hosts("all"))
    assert recap == dict.fromkeys(hosts, 0), changed_tasks(output)
