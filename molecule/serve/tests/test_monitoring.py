"""The fleet watched from its monitoring host (the mirror): Prometheus scrapes every target
the inventory has, the engines' series count the tokens they generate, the rules are the
checked file and fire as designed in promtool's rule tests, and an instance stopped on
purpose pages a webhook receiver (a real HTTP POST from Alertmanager) and resolves."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).parent))
import alert_cases  # noqa: E402
from serve_hosts import api, other, playbook  # noqa: E402

testinfra_hosts = ["ansible://mirror"]
PROJECT = Path(__file__).resolve().parents[3]
RULES = "/etc/prometheus/rules/vllm-fleet.rules.yml"
DEFAULTS = yaml.safe_load((PROJECT / "roles" / "monitoring" / "defaults" / "main.yml").read_text())
THRESHOLDS = {name[len("monitoring_alert_"):]: value for name, value in DEFAULTS.items()
              if name.startswith("monitoring_alert_")}
# The scenario's fleet: two inference hosts of one instance each; the mirror is its
# gateway and its monitoring host.
EXPECTED = {("vllm", "node1"), ("vllm", "node2"), ("vllm_health", "node1"), ("vllm_health", "node2"),
            ("node", "mirror"), ("node", "node1"), ("node", "node2"), ("nginx", "mirror"), ("gateway_tls", "mirror"),
            ("mirror", None)}
ENGINE_KEY, MODEL = "molecule-serve-key", "tiny-gemma4"
# The webhook receiver Alertmanager posts to (molecule.yml: monitoring_alertmanager_webhook_url),
# run on the monitoring host: each POST's body and the time it came, one JSON line each.
RECEIVER = r"""
import http.server, json, time
class Hook(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with open("/tmp/webhook.jsonl", "a") as out:
            out.write(json.dumps({"received": time.time(), "body": body}) + "\n")
        self.send_response(200)
        self.end_headers()
http.server.HTTPServer(("127.0.0.1", 9099), Hook).serve_forever()
"""


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


def query(host, promql: str) -> list:
    return api(host, "/api/v1/query?query=" + urllib.parse.quote(promql))["data"]["result"]


def test_the_engines_series_count_the_tokens_they_generate(host):
    """Two completions of 16 tokens on each engine (from the monitoring host, which the
    engines' firewall lets in): Prometheus's counter of generated tokens grows by them."""
    def generated() -> dict:
        return {r["metric"]["host"]: float(r["value"][1]) for r in query(host, "vllm:generation_tokens_total")}

    targets = {t["labels"]["host"]: t["scrapeUrl"].rsplit("/", 1)[0]
               for t in api(host, "/api/v1/targets?state=active")["data"]["activeTargets"]
               if t["labels"]["job"] == "vllm"}
    before = generated()
    for url in targets.values():
        body = json.dumps({"model": MODEL, "prompt": "The fleet", "max_tokens": 16, "ignore_eos": True})
        for _ in range(2):
            host.check_output("python3 -c %s", "import urllib.request; urllib.request.urlopen(urllib.request.Request("
                              "%r, data=%r.encode(), headers={'Authorization': 'Bearer %s', 'Content-Type': "
                              "'application/json'}), timeout=120).read()" % (url + "/v1/completions", body, ENGINE_KEY))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not all(generated().get(h, 0) >= before.get(h, 0) + 32 for h in targets):
        time.sleep(2)
    after = generated()
    print("generated tokens (Prometheus):", json.dumps(before), "->", json.dumps(after))
    assert sorted(after) == ["node1", "node2"]
    assert all(after[h] - before.get(h, 0) >= 32 for h in targets), (before, after)


def test_the_engines_series_reach_prometheus(host):
    result = api(host, "/api/v1/query?query=vllm:kv_cache_usage_perc")["data"]["result"]
    assert sorted(r["metric"]["host"] for r in result) == ["node1", "node2"]
    assert all(0 <= float(r["value"][1]) <= 1 for r in result)
    probes = api(host, "/api/v1/query?query=probe_success")["data"]["result"]
    assert {(r["metric"]["job"], r["value"][1]) for r in probes} == {("vllm_health", "1"), ("mirror", "1"),
                                                                     ("gateway_tls", "1")}


def test_the_loaded_rules_are_the_checked_file_and_the_fleet_is_up(host):
    rules = yaml.safe_load(host.file(RULES).content_string)
    names = sorted(rule["alert"] for group in rules["groups"] for rule in group["rules"])
    loaded = api(host, "/api/v1/rules?type=alert")["data"]["groups"]
    assert sorted(r["name"] for g in loaded for r in g["rules"]) == names
    assert {r["health"] for g in loaded for r in g["rules"]} == {"ok"}
    # (test_gateway's kill of an engine may leave its aborted streams in the failure
    # ratio's 5-minute window: that alert is not asserted here)
    firing = [a["labels"]["alertname"] for a in api(host, "/api/v1/alerts")["data"]["alerts"] if a["state"] == "firing"]
    print("firing:", firing)
    down = {"VllmInstanceDown", "VllmEngineUnhealthy", "HostExporterDown", "GatewayDown", "GatewayTlsHandshakeFailing",
            "GatewayCertificateExpiresSoon", "MirrorCannotServeTheRevision"}
    assert sorted(set(firing) & down) == []


NOT_AFTER = ("import calendar; from cryptography import x509; c = x509.load_pem_x509_certificate(open("
             "'/etc/nginx/vllm-fleet/server.crt', 'rb').read()); print(calendar.timegm(c.not_valid_after.utctimetuple()))")


def test_prometheus_reads_the_gateway_certificates_expiry_through_a_tls_probe(host):
    """The blackbox exporter's TLS probe of the gateway's port (job gateway_tls, which the
    gateway's own run publishes): the expiry Prometheus has is the notAfter of the server
    certificate on the gateway, about 825 days away, and its alert does not fire."""
    not_after = float(host.check_output("python3 -c %s", NOT_AFTER))
    deadline, seen = time.monotonic() + 90, []
    while time.monotonic() < deadline:
        seen = query(host, 'probe_ssl_earliest_cert_expiry{job="gateway_tls"}')
        if [r["metric"]["host"] for r in seen] == ["mirror"] and abs(float(seen[0]["value"][1]) - not_after) < 1:
            break
        time.sleep(3)
    print("gateway_tls:", json.dumps(seen), "server.crt notAfter:", not_after,
          "days left: %.1f" % ((not_after - time.time()) / 86400))
    reached = host.ansible.get_variables().get("ansible_host") or "mirror"  # as the gateway's run publishes it
    assert [(r["metric"]["host"], r["metric"]["target"]) for r in seen] == [("mirror", reached + ":443")]
    assert abs(float(seen[0]["value"][1]) - not_after) < 1
    assert 800 < (not_after - time.time()) / 86400 < 826
    assert [r["value"][1] for r in query(host, 'probe_success{job="gateway_tls"}')] == ["1"]
    rules = [r for g in api(host, "/api/v1/rules?type=alert")["data"]["groups"] for r in g["rules"]]
    assert [r["state"] for r in rules if r["name"] == "GatewayCertificateExpiresSoon"] == ["inactive"]


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


def test_alertmanager_runs_its_checked_configuration(host):
    assert host.run("amtool check-config /etc/prometheus/alertmanager.yml").rc == 0
    # the webhook URL (a secret for Slack-style receivers) is Alertmanager's group's alone
    config = host.file("/etc/prometheus/alertmanager.yml")
    assert (config.user, config.group, config.mode) == ("root", "prometheus", 0o640)
    status = api(host, "/api/v2/status", port=9093)
    assert status["cluster"]["status"] == "disabled"
    assert "receiver: operator" in status["config"]["original"]


def webhook(host, status: str, since: float) -> float | None:
    """When the receiver got a notification of VllmInstanceDown for node2 in ``status``."""
    lines = host.run("cat /tmp/webhook.jsonl").stdout.splitlines()
    for line in map(json.loads, lines):
        alerts = line["body"]["alerts"]
        if line["received"] >= since and any(a["labels"]["alertname"] == "VllmInstanceDown"
                                              and a["labels"].get("host") == "node2" and a["status"] == status
                                              for a in alerts):
            return line["received"]
    return None


def test_fleet_status_prints_a_row_per_instance_as_prometheus_has_it():
    """playbooks/fleet_status.yml, what an operator runs first: one row per instance,
    each up, with the figures Prometheus holds."""
    rc, output, _took = playbook("fleet_status.yml")
    assert rc == 0, output[-3000:]
    printed = re.search(r"^ok: \[mirror\] => (?=\{)", output, re.M)  # the table's debug task
    assert printed, output[-3000:]
    table = json.JSONDecoder().raw_decode(output, printed.end())[0]["msg"]
    print("\n".join(table))
    rows = {line.split()[0]: line.split()[1:] for line in table[1:]}
    assert table[0].split()[:2] == ["instance", "up"]
    assert sorted(rows) == ["node1/main", "node2/main"], table
    assert {row[0] for row in rows.values()} == {"yes"}, table


def test_a_stopped_instance_pages_the_webhook_and_resolves(host):
    """node2's API server is stopped (SIGSTOP: its scrapes and /health time out, as a hung
    engine's do) and continued: Alertmanager posts the firing alert and then its
    resolution to the receiver.  Times from the stop, on the machine's one clock."""
    container = host.ansible.get_variables()["ansible_host"]
    subprocess.run(["docker", "exec", "-d", container, "python3", "-c", RECEIVER], check=True)
    host.run("python3 -c %s", "import socket, time\nfor _ in range(50):\n    try:\n        "
             "socket.create_connection(('127.0.0.1', 9099), 1); break\n    except OSError: time.sleep(0.2)")
    node2 = other(host, "node2")
    pid = node2.check_output("systemctl show --property MainPID --value vllm@main.service")
    stopped = time.time()
    node2.check_output("kill -STOP %s", pid)
    try:
        deadline, fired = time.monotonic() + 180, None
        while time.monotonic() < deadline and fired is None:
            time.sleep(2)
            fired = webhook(host, "firing", stopped)
    finally:
        node2.check_output("kill -CONT %s", pid)
        continued = time.time()
    deadline, resolved = time.monotonic() + 180, None
    while fired and time.monotonic() < deadline and resolved is None:
        time.sleep(2)
        resolved = webhook(host, "resolved", continued)
    print("instance down: stopped -> firing alert at the webhook %s s; continued -> resolved %s s "
          "(scrape 5s, for 15s, group_wait 5s, group_interval 10s)"
          % (round(fired - stopped, 1) if fired else None, round(resolved - continued, 1) if resolved else None))
    assert fired is not None, host.run("journalctl -u prometheus-alertmanager -n 30 --no-pager").stdout
    assert resolved is not None
