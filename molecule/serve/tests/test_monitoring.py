"""The fleet watched from its monitoring host (the mirror): Prometheus scrapes every target
the inventory has, its rules are the checked file and fire as designed in promtool's
rule tests, Alertmanager runs, and the engines' own series are there."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parent))
import alert_cases  # noqa: E402

testinfra_hosts = ["ansible://mirror"]
PROJECT = Path(__file__).resolve().parents[3]
RULES = "/etc/prometheus/rules/vllm-fleet.rules.yml"
DEFAULTS = yaml.safe_load((PROJECT / "roles" / "monitoring" / "defaults" / "main.yml").read_text())
THRESHOLDS = {name[len("monitoring_alert_"):]: value for name, value in DEFAULTS.items()
              if name.startswith("monitoring_alert_")}
# The scenario's fleet: two inference hosts of one instance each; the mirror is its
# gateway and its monitoring host.
EXPECTED = {("vllm", "node1"), ("vllm", "node2"), ("vllm_health", "node1"), ("vllm_health", "node2"),
            ("node", "mirror"), ("node", "node1"), ("node", "node2"), ("nginx", "mirror"), ("mirror", None)}


def api(host, path: str, port: int = 9090):
    """GET a Prometheus (9090) or Alertmanager (9093) API path on the monitoring host, where
    they listen on loopback alone."""
    out = host.check_output("python3 -c %s", "import sys, urllib.request; sys.stdout.write(urllib.request.urlopen("
                            "'http://127.0.0.1:%d%s', timeout=10).read().decode())" % (port, path))
    return json.loads(out)


def test_prometheus_scrapes_every_target_of_the_inventory(host):
    deadline, seen = time.monotonic() + 120, {}
    while time.monotonic() < deadline:
        active = api(host, "/api/v1/targets?state=active")["data"]["activeTargets"]
        seen = {(t["labels"]["job"], t["labels"].get("host")): t["health"] for t in active}
        if set(seen) == EXPECTED and set(seen.values()) == {"up"}:
            break
        time.sleep(5)
    print("targets:", json.dumps(sorted("%s/%s: %s" % (j, h, s) for (j, h), s in seen.items())))
    assert set(seen) == EXPECTED
    assert {target: health for target, health in seen.items() if health != "up"} == {}


def test_the_engines_series_reach_prometheus(host):
    result = api(host, "/api/v1/query?query=vllm:kv_cache_usage_perc")["data"]["result"]
    assert sorted(r["metric"]["host"] for r in result) == ["node1", "node2"]
    assert all(0 <= float(r["value"][1]) <= 1 for r in result)
    probes = api(host, "/api/v1/query?query=probe_success")["data"]["result"]
    assert {(r["metric"]["job"], r["value"][1]) for r in probes} == {("vllm_health", "1"), ("mirror", "1")}


def test_the_loaded_rules_are_the_checked_file_and_none_fires(host):
    rules = yaml.safe_load(host.file(RULES).content_string)
    names = sorted(rule["alert"] for group in rules["groups"] for rule in group["rules"])
    loaded = api(host, "/api/v1/rules?type=alert")["data"]["groups"]
    assert sorted(r["name"] for g in loaded for r in g["rules"]) == names
    assert {r["health"] for g in loaded for r in g["rules"]} == {"ok"}
    firing = api(host, "/api/v1/alerts")["data"]["alerts"]
    assert [a for a in firing if a["state"] == "firing"] == []


def test_every_alert_fires_on_its_series_and_none_on_a_healthy_fleet(host):
    """promtool's rule tests, on the monitoring host, against the file Prometheus runs."""
    rules = yaml.safe_load(host.file(RULES).content_string)
    cases = yaml.safe_dump(alert_cases.tests(rules, THRESHOLDS, RULES), sort_keys=False)
    container = host.ansible.get_variables()["ansible_host"]
    subprocess.run(["docker", "exec", "-i", container, "sh", "-c", "cat > /tmp/vllm-fleet.rules-test.yml"],
                   input=cases, text=True, check=True)
    run = host.run("promtool test rules /tmp/vllm-fleet.rules-test.yml")
    print("promtool test rules:", run.stdout.strip().splitlines()[-1] if run.stdout else run.stderr[-500:])
    assert run.rc == 0, run.stdout[-4000:] + run.stderr[-2000:]


@pytest.mark.parametrize("path", ["/etc/prometheus/alertmanager.yml"])
def test_alertmanager_runs_its_checked_configuration(host, path):
    assert host.run("amtool check-config %s", path).rc == 0
    status = api(host, "/api/v2/status", port=9093)
    assert status["cluster"]["status"] == "disabled"
    assert "receiver: operator" in status["config"]["original"]
