"""A third inference host on the serve fleet, the way operators add one, and a change rolled
through three hosts, under a load through the gateway the whole time (streams and short
requests, counts printed):

- node3 (a new container), admitted by the mirror's run (``--limit mirrors --tags mirror``)
  and converged with ``site.yml --limit node3``, joins the gateway's upstreams and
  Prometheus's targets by its own run, and answers through the gateway;
- a change of every engine's arguments rolls out in preflight's default batches, the canary
  node1 alone and then node2 and node3 **together** (a batch of more than one host, each
  publishing its own files on the shared gateway), and back again; no request fails;
- afterwards ``retire.yml --limit node3`` takes it out, and its container goes.

On request (``make test-three-hosts``): a third CPU engine and two more rollouts are more
than ``make test``'s 60 minutes on two cores hold beside the rest of serve.  Skipped unless
VLLM_FLEET_THREE_HOSTS=1."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tools"))
import fleet  # noqa: E402
from fleet_load import Load  # noqa: E402
from serve_hosts import CA, address, playbook, site  # noqa: E402
from test_publishing import engines_serving, prometheus_hosts, published, servers  # noqa: E402
from test_changes import rollout_report, slowest_tasks  # noqa: E402

pytestmark = pytest.mark.skipif(os.environ.get("VLLM_FLEET_THREE_HOSTS") != "1",
                                reason="on request: make test-three-hosts")
testinfra_hosts = ["ansible://mirror"]
KEY, MODEL = "molecule-tester-key-0123", "tiny-gemma4"
FLEET = "mol-serve"  # molecule/resources/create.yml's name for the scenario's containers
SERVE = "PLAY [Serve the model, batch by batch]"


@pytest.fixture(scope="module")
def node3(tmp_path_factory):
    """node3's container, booted like the scenario's hosts, and an inventory that adds it to
    the inference group; afterwards retired by its own run and removed."""
    fleet.up(FLEET, [("node3", "bookworm")])
    extra = tmp_path_factory.mktemp("inventory") / "node3.yml"
    extra.write_text(yaml.safe_dump({"inference": {"hosts": {"node3": {
        "ansible_connection": "ssh", "ansible_host": fleet.container_name(FLEET, "node3"), "ansible_user": "root",
        "ansible_ssh_common_args": "-F %s" % fleet.ssh_paths(FLEET)[0]}}}}))
    yield str(extra)
    rc, output, took = playbook("retire.yml", "-i", str(extra), "--limit", "node3")
    print("retire.yml --limit node3: %.0fs, rc %d" % (took, rc))
    subprocess.run(["docker", "rm", "-f", fleet.container_name(FLEET, "node3")], check=False, capture_output=True)
    assert rc == 0, output[-3000:]


def gateway(host) -> str:
    return "https://%s:443" % address(host)


def under_load(host, *args: str) -> tuple:
    """site.yml with ``args`` while 4 clients (2 streaming) send 2 requests a second."""
    with Load(gateway(host), str(CA), KEY, MODEL, clients=4, rate=2.0) as load:
        rc, output, took = site(*args)
    return rc, output, took, load.summary()


def report(what: str, took: float, rc: int, summary: dict) -> None:
    print("%s: site.yml %.0fs, rc %d; requests %d sent, %d failed (%d chat, %d streams ok, %d sent again on a "
          "new connection)" % (what, took, rc, summary["sent"], summary["failed"], summary["chat_ok"],
                               summary["stream_ok"], summary["reconnected"]))


def test_a_host_added_with_limit_joins_the_gateway_and_monitoring(host, node3):
    # the mirror admits the inventory's hosts by its own run (docs/stages.md), then node3's own
    rc, output, took = site("-i", node3, "--limit", "mirrors", "--tags", "mirror")
    print("site.yml --limit mirrors --tags mirror: %.0fs, rc %d" % (took, rc))
    assert rc == 0, output[-3000:]
    rc, output, took, summary = under_load(host, "-i", node3, "--limit", "node3")
    report("site.yml --limit node3", took, rc, summary)
    assert rc == 0, output[-5000:]
    assert summary["failed"] == 0, summary["failures"]
    node3_address = fleet.address(FLEET, "node3")
    assert published(host)["node3"] == {"upstream", "vllm", "vllm_health", "node"}
    assert servers(host, "node3") == ["server %s:8000 max_fails=3 fail_timeout=10s;" % node3_address]
    wanted = {"node1", "node2", "node3"}
    assert prometheus_hosts(host, "vllm", wanted) == dict.fromkeys(wanted, "up")
    assert node3_address in engines_serving(host, gateway(host), count=9)


def test_a_change_rolls_through_three_hosts_in_two_batches_and_loses_no_request(host, node3):
    change = json.dumps({"preflight_vllm_args": {"enforce-eager": True, "max-num-seqs": 32}})
    for what, args in (("change", ("-i", node3, "-e", change)), ("change back", ("-i", node3))):
        rc, output, took, summary = under_load(host, *args)
        # each serve play's output, up to the next play
        batches = [text.split("\nPLAY [")[0] for text in output.split(SERVE)[1:]]
        report(what, took, rc, summary)
        print("batches: %s; %s\nslowest tasks:\n%s" % (
            [sorted(name for name in ("node1", "node2", "node3") if "[%s]" % name in batch) for batch in batches],
            json.dumps(rollout_report(output)), slowest_tasks(output)))
        assert rc == 0, output[-5000:]
        assert summary["failed"] == 0, summary["failures"]
        assert summary["chat_ok"] > 0 and summary["stream_ok"] > 0
        assert sorted(rollout_report(output)) == ["node1", "node2", "node3"]
        # the canary alone, then the other two in one batch
        first, second = batches
        assert "[node1]" in first and "[node2]" not in first and "[node3]" not in first
        assert "[node2]" in second and "[node3]" in second and "[node1]" not in second
