"""Every host publishes itself: its instances in the gateway's upstream and its scrape
targets are files of its own on the gateway and the monitoring host (here both the
mirror), written by its own run.  A host taken out with playbooks/retire.yml --limit and
put back with site.yml --limit leaves and joins the gateway and Prometheus, under a load
through the gateway that loses no request."""
from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from fleet_load import Load  # noqa: E402
from serve_hosts import CA, address, api, other, playbook, site  # noqa: E402

testinfra_hosts = ["ansible://mirror"]
KEY, MODEL = "molecule-tester-key-0123", "tiny-gemma4"
UPSTREAMS = "/etc/nginx/vllm-fleet-upstreams"
FILE_SD = "/etc/prometheus/file_sd"
LOG = "/var/log/nginx/vllm-fleet-access.log"
# Requests a second through the gateway while node2 leaves and joins (4 clients): as
# test_changes.py's rollouts; at 2 a second the join's site.yml took 156-217 s in CI, on
# the two cores the engines share with Ansible.
LOAD_RATE = 1.0


def published(host) -> dict:
    """Upstream and target files on the mirror, by the host that wrote them."""
    found: dict = {}
    for path in host.check_output("find %s %s -name '*.conf' -o -name '*.json'" % (UPSTREAMS, FILE_SD)).split():
        name = Path(path)
        found.setdefault(name.stem, set()).add("upstream" if name.suffix == ".conf" else name.parent.name)
    return found


def servers(host, node: str) -> list:
    text = host.file("%s/%s.conf" % (UPSTREAMS, node)).content_string
    return [line.split("#")[0].strip() for line in text.splitlines() if line.startswith("server ")]


def prometheus_hosts(host, job: str, wanted: set, timeout: float = 90) -> dict:
    """host -> health of the job's active targets, once the hosts are ``wanted`` (all up)."""
    deadline, seen = time.monotonic() + timeout, {}
    while time.monotonic() < deadline:
        active = api(host, "/api/v1/targets?state=active")["data"]["activeTargets"]
        seen = {t["labels"].get("host"): t["health"] for t in active if t["labels"]["job"] == job}
        if set(seen) == wanted and set(seen.values()) == {"up"}:
            break
        time.sleep(3)
    return seen


def engines_serving(host, gateway: str, count: int = 6) -> set:
    """The engines (addresses) that answered ``count`` chats sent one after another through
    the gateway, as its access log names them; every chat must succeed."""
    since = len(host.file(LOG).content_string.splitlines())
    results = [Load(gateway, str(CA), KEY, MODEL).one(streaming=False) for _ in range(count)]
    assert [r[0] for r in results] == ["ok"] * count, results
    entries = [json.loads(line) for line in host.file(LOG).content_string.splitlines()[since:]]
    return {u.split(":")[0] for e in entries for u in re.split(r"[ ,]+", e["upstream"]) if u}


def test_each_host_writes_its_own_files_and_nginx_conf_lists_no_host(host):
    node1, node2 = address(other(host, "node1")), address(other(host, "node2"))
    assert published(host) == {
        "node1": {"upstream", "vllm", "vllm_health", "node"}, "node2": {"upstream", "vllm", "vllm_health", "node"},
        "mirror": {"node", "nginx", "gateway_tls"}, "fleet": {"mirror"}}
    assert servers(host, "node1") == ["server %s:8000 max_fails=3 fail_timeout=10s;" % node1]
    assert servers(host, "node2") == ["server %s:8000 max_fails=3 fail_timeout=10s;" % node2]
    conf = host.file("/etc/nginx/nginx.conf").content_string
    assert re.findall(r"^\s*server ([^\s{]+)", conf, re.M) == ["127.0.0.1:9"]  # the never-chosen placeholder
    assert "include %s/*.conf;" % UPSTREAMS in conf


def test_retire_refuses_to_run_without_a_limit(host):
    rc, output, _took = playbook("retire.yml")
    assert rc != 0
    assert "name them with --limit" in output, output[-2000:]
    assert published(host)["node2"] == {"upstream", "vllm", "vllm_health", "node"}


def test_a_host_leaves_and_joins_by_its_own_run_under_load(host):
    node2 = other(host, "node2")
    gateway, node2_address = "https://%s:443" % address(host), address(node2)
    with Load(gateway, str(CA), KEY, MODEL, rate=LOAD_RATE) as load:
        time.sleep(3)
        rc, output, took = playbook("retire.yml", "--limit", "node2")
        time.sleep(3)
    leaving = load.summary()
    print("retire.yml --limit node2 (%.0fs) under load: %s" % (took, leaving))
    assert rc == 0, output[-3000:]
    assert "node2 left the fleet: main stopped" in output
    assert "node2" not in published(host)
    assert not node2.service("vllm@main").is_running and not node2.service("vllm@main").is_enabled
    assert leaving["failed"] == 0, leaving["failures"]
    assert prometheus_hosts(host, "vllm", {"node1"}) == {"node1": "up"}
    assert engines_serving(host, gateway) == {address(other(host, "node1"))}

    with Load(gateway, str(CA), KEY, MODEL, rate=LOAD_RATE) as load:
        rc, output, took = site("--limit", "node2")
    joining = load.summary()
    print("site.yml --limit node2 (%.0fs) under load: %s" % (took, joining))
    assert rc == 0, output[-3000:]
    assert joining["failed"] == 0, joining["failures"]
    assert published(host)["node2"] == {"upstream", "vllm", "vllm_health", "node"}
    assert servers(host, "node2") == ["server %s:8000 max_fails=3 fail_timeout=10s;" % node2_address]
    assert prometheus_hosts(host, "vllm", {"node1", "node2"}) == {"node1": "up", "node2": "up"}
    assert node2_address in engines_serving(host, gateway)
