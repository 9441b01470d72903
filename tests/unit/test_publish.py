"""What one host publishes about itself (module_utils/publish.py): its entries are the
fleet's entries for that host, so the files the hosts write one by one add up to what
the whole inventory would give; and the upstream file nginx includes."""
from __future__ import annotations

from pathlib import Path

import jinja2
import pytest
from ansible.module_utils.gateway import upstreams
from ansible.module_utils.monitoring import targets
from ansible.module_utils.publish import JOBS, PublishError, entries, instances_from_settings

ROOT = Path(__file__).resolve().parents[2]
UPSTREAM = ROOT / "roles" / "gateway" / "templates" / "upstream.conf.j2"
PORTS = {"node": 9100, "nginx": 9113, "dcgm": 9400, "npu": 8082, "health_path": "/health"}
GROUPS = {"mirrors": ["mirror"], "gateways": ["mirror"], "monitoring": ["mirror"],
          "inference": ["node1", "node2", "node3"]}
ADDRESSES = {"mirror": "10.0.0.1", "node1": "10.0.0.2", "node2": "10.0.0.3", "node3": "fd00::4"}
PLANS = {"node1": {"instances": [{"name": "main", "port": 8000, "args": {"host": "0.0.0.0"}}], "engine": "cuda"},
         "node2": {"instances": [{"name": "replica0", "port": 8000, "args": {"host": "0.0.0.0"}},
                                 {"name": "replica1", "port": 8001, "args": {"host": "0.0.0.0"}}]},
         "node3": {"instances": [{"name": "main", "port": 9000, "args": {"host": "::"}}]}}


def own(host: str, **given) -> dict:
    names = [group for group, members in GROUPS.items() if host in members]
    return entries(host, ADDRESSES[host], names, PLANS.get(host), PORTS, **given)


def test_the_hosts_own_files_add_up_to_the_whole_fleets_targets():
    fleet = targets(GROUPS, ADDRESSES, PLANS, {}, PORTS)
    hosts = sorted({h for members in GROUPS.values() for h in members})
    for job in JOBS:
        published = [group for host in hosts for group in own(host)["targets"][job]]
        assert sorted(map(repr, published)) == sorted(map(repr, fleet[job])), job
    assert [u for host in hosts for u in own(host)["upstreams"]] == upstreams(
        GROUPS["inference"], [ADDRESSES[h] for h in GROUPS["inference"]],
        [PLANS[h]["instances"] for h in GROUPS["inference"]])


def test_a_host_publishes_only_what_it_runs():
    gateway = own("mirror")
    assert gateway["upstreams"] == []
    assert {job for job, found in gateway["targets"].items() if found} == {"node", "nginx"}
    node1 = own("node1")
    assert {job for job, found in node1["targets"].items() if found} == {"vllm", "vllm_health", "node", "dcgm"}
    assert [u["server"] for u in node1["upstreams"]] == ["10.0.0.2:8000"]
    assert [u["server"] for u in own("node3")["upstreams"]] == ["[fd00::4]:9000"]
    assert own("node3")["targets"]["vllm_health"][0]["targets"] == ["http://[fd00::4]:9000/health"]


def test_a_gateway_publishes_its_tls_port_when_its_own_run_gives_it():
    """The gateway role publishes job gateway_tls with its port; the node exporter's call
    (the fleet's ports alone) and the inference hosts have none."""
    ports = dict(PORTS, gateway=8443)
    assert own("mirror")["targets"]["gateway_tls"] == []
    names = [group for group, members in GROUPS.items() if "mirror" in members]
    gateway = entries("mirror", ADDRESSES["mirror"], names, None, ports)
    assert gateway["targets"]["gateway_tls"] == [{"targets": ["10.0.0.1:8443"], "labels": {"host": "mirror"}}]
    assert entries("node1", ADDRESSES["node1"], ["inference"], PLANS["node1"], ports)["targets"]["gateway_tls"] == []


def test_a_retired_host_publishes_nothing():
    gone = own("node2", state="absent")
    assert gone["upstreams"] == [] and gone["targets"] == {job: [] for job in JOBS}


def test_a_rollback_publishes_what_served_before_not_the_plan():
    before = {"main": {"model": "/m/a", "port": 8010, "host": "0.0.0.0", "served-model-name": "gemma"},
              "worker": {"model": "/m/a", "port": 8011, "headless": True}}
    back = own("node1", instances=instances_from_settings(before))
    assert [(u["instance"], u["server"]) for u in back["upstreams"]] == [("main", "10.0.0.2:8010")]
    assert [g["targets"] for g in back["targets"]["vllm"]] == [["10.0.0.2:8010"]]
    assert instances_from_settings({"x": {}}) == [{"name": "x", "port": 8000, "args": {}}]


def test_an_unknown_state_is_refused_by_name():
    with pytest.raises(PublishError) as refused:
        own("node1", state="drained")
    assert str(refused.value).startswith("state: 'drained'")


@pytest.mark.parametrize("state, flag", [("in", ""), ("out", " down")])
def test_the_upstream_file_marks_the_host_down_while_it_changes(state, flag):
    template = jinja2.Environment(trim_blocks=True, undefined=jinja2.StrictUndefined).from_string(UPSTREAM.read_text())
    text = template.render(ansible_managed="managed", inventory_hostname="node2", gateway_publish_state=state,
                           _gateway_entries=own("node2"), item="mirror", gateway_max_fails=3,
                           gateway_fail_timeout=10, hostvars={"mirror": {"gateway_max_fails": 5}})
    servers = [line for line in text.splitlines() if not line.startswith("#")]
    # the gateway's own setting where its host has one, the role's default where not
    assert servers == ["server 10.0.0.3:8000%s max_fails=5 fail_timeout=10s;  # node2/replica0" % flag,
                       "server 10.0.0.3:8001%s max_fails=5 fail_timeout=10s;  # node2/replica1" % flag]
