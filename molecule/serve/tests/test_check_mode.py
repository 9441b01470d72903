"""Check mode on the converged fleet changes nothing: what an operator runs to preview a
change (`site.yml --check`) must report changed=0 on every host of a fleet that has
nothing to change, or it previews changes that a run would not make.  (Molecule's own
`check` step runs it without looking at what it reports.)"""
from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from serve_hosts import site  # noqa: E402

testinfra_hosts = ["ansible://mirror"]


def changed_tasks(output: str) -> list:
    """'host: task' for every task check mode says it would change."""
    found = []
    for section in output.split("\nTASK [")[1:]:
        name = section.split("]", 1)[0]
        found += ["%s: %s" % (host, name) for host in re.findall(r"^changed: \[([^\]]+)\]", section, re.M)]
    return found


def test_check_mode_on_the_converged_fleet_changes_nothing():
    rc, output, took = site("--check")
    recap = {host: int(changed) for host, changed in
             re.findall(r"^(\S+)\s+: ok=\d+\s+changed=(\d+)", output, re.M)}
    print("site.yml --check on the converged fleet: %.0fs, changed %s" % (took, recap))
    assert rc == 0, output[-3000:]
    assert sorted(recap) == ["mirror", "node1", "node2"], recap
    assert recap == {"mirror": 0, "node1": 0, "node2": 0}, changed_tasks(output)
