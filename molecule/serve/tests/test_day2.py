"""The operator's day-2 playbooks on the converged fleet: playbooks/diagnose.yml on the
healthy fleet (all good), then on a fleet broken on purpose three ways (the clients ask for
a name it does not serve, a file of a snapshot changed on disk, an engine stopped): each
named.  The fleet is mended afterwards, for the tests that follow.  Every test takes
``host`` (the mirror), so that they run with the other host tests, on the fleet as
converged.  (benchmark.yml runs on the demo fleet: tests/operator.)"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tools"))
from playbook_output import printed  # noqa: E402
from serve_hosts import other, playbook  # noqa: E402

testinfra_hosts = ["ansible://mirror"]


def verdicts(output: str) -> dict:
    """host -> {check: (VERDICT, evidence)} from diagnose.yml's tables."""
    return {host: {check: (verdict, evidence) for check, verdict, evidence in
                   (re.split(r"\s{2,}", row, maxsplit=2) for row in rows)}
            for host, rows in printed(output, "Print the verdicts").items()}


def test_a_healthy_fleet_is_all_good(host):
    rc, output, _took = playbook("diagnose.yml")
    found = verdicts(output)
    print("diagnose (healthy):", json.dumps({h: sorted(c for c, (v, _e) in checks.items() if v != "ok")
                                             for h, checks in found.items()}))
    assert rc == 0, output[-4000:]
    assert sorted(found) == ["node1", "node2"]
    for host, checks in found.items():
        assert {c: v for c, (v, _e) in checks.items() if v != "ok"} == {}, (host, checks)


def test_a_fleet_broken_three_ways_is_named(host):
    node1, node2 = other(host, "node1"), other(host, "node2")
    config = node1.file("/etc/vllm/main.yaml").content_string
    snapshot = json.loads(re.search(r"^model: (.*)$", config, re.M).group(1))
    changed = snapshot + "/generation_config.json"
    original = node1.file(changed).content_string
    node1.check_output("sh -c %s", "printf '\\n' >> %s" % changed)
    node2.check_output("systemctl stop vllm@main.service")
    try:
        rc, output, _took = playbook("diagnose.yml", "-e", "diagnose_served_model_name=gemma-4-31B")
    finally:
        subprocess.run(["docker", "exec", "-i", node1.ansible.get_variables()["ansible_host"], "sh", "-c",
                        "cat > %s" % changed], input=original, text=True, check=True)
        node2.check_output("systemctl start vllm@main.service")
    found = verdicts(output)
    print("diagnose (broken):", json.dumps({h: {c: e for c, (v, e) in checks.items() if v != "ok"}
                                            for h, checks in found.items()}, indent=1))
    assert rc != 0
    assert found["node1"]["main: served model"][0] == "PROBLEM"
    assert "clients ask for gemma-4-31B" in found["node1"]["main: served model"][1]
    assert found["node1"]["snapshot"][0] == "PROBLEM"
    assert "differs from the pinned revision in generation_config.json" in found["node1"]["snapshot"][1]
    assert found["node2"]["main: unit"][0] == "PROBLEM"
    assert found["node2"]["main: unit"][1].startswith("vllm@main is inactive")
    # what a stopped engine cannot answer is unknown, not good
    assert found["node2"]["main: served model"][0] == "UNKNOWN"
    assert found["node2"]["main: queue"][0] == "UNKNOWN"
    assert node2.service("vllm@main.service").is_running
