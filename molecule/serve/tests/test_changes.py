"""Changing the serving fleet while clients use it: playbooks/site.yml itself, under a load
through the gateway the whole time.  (a) A new revision of the model, published on the
fleet's mirror, reaches both hosts, a canary first, each out of the gateway's rotation while
it changes; (b) a revision whose weights do not match its config.json (vLLM's parser accepts
it, the engine cannot load it) fails on the canary, which is rolled back, and the rollout
stops there.  Afterwards the mirror's branch goes back to the inventory's pinned revision,
and, when any test follows in the session, the fleet too, both hosts in one batch: no file
after this one finds the fleet changed.  When this file is the session's last (molecule.yml
runs it last; molecule destroys the fleet next), the fleet is left on the good revision:
putting it back is a full site.yml with two engine restarts (~190 s) that nothing would
read.  The good change and the putting back run the whole site.yml, as an operator rolls a
change (the monitoring host's probe of the mirror follows the pinned revision, so it changes
with them); the bad one runs it over the inference hosts alone (`--limit node1,node2`: each
host's own run publishes it to the gateway and to monitoring and its rollback restores
that, so the mirror's plays add nothing but minutes on two shared cores).  (A raw restart
under streams: test_fail_closed.py.)"""
from __future__ import annotations

import json
import re
import shutil
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tools"))
from playbook_output import recap_changed  # noqa: E402
from fleet_load import Load  # noqa: E402
from serve_hosts import CA, address, other, PROJECT, site  # noqa: E402

testinfra_hosts = ["ansible://mirror"]
FIXTURE = PROJECT / "tests" / "fixtures" / "models" / "tiny-gemma4"
REPO = "demo/tiny-gemma4"
FIRST = "115893f75ee34252aa70c6877eb37a13cc541e38"
KEY, MODEL = "molecule-tester-key-0123", "tiny-gemma4"
MIRROR_REPO = "/var/lib/olah/mirrors/models/" + REPO


def served(host) -> dict:
    """Each inference host: the model path its instance runs (its config) and the revision in it."""
    out = {}
    for name in ("node1", "node2"):
        config = other(host, name).file("/etc/vllm/main.yaml").content_string
        model = json.loads(re.search(r"^model: (.*)$", config, re.M).group(1))
        out[name] = model.rsplit("/", 1)[1]
    return out


def messages(output: str, status: str) -> list:
    """(host, msg) of every task result the default callback printed as ``ok: [host] =>``
    or ``fatal: [host]: FAILED! =>`` (status ``ok`` or ``fatal``), read as JSON."""
    found, decoder = [], json.JSONDecoder()
    for match in re.finditer(r"^%s: \[([^\]]+)\](?:: FAILED!)? => " % status, output, re.M):
        try:
            result, _end = decoder.raw_decode(output, match.end())
        except ValueError:
            continue
        if isinstance(result.get("msg"), str):
            found.append((match.group(1).split(" ")[0], result["msg"]))
    return found


def rollout_report(output: str) -> dict:
    """host -> its "changed (...) out of the gateways' rotation for Xs (...)" line."""
    return {host: re.sub(r"\s+", " ", msg.split("; 1 instance")[0]) for host, msg in messages(output, "ok")
            if msg.startswith("changed (") and "out of the gateways' rotation" in msg}


def others_follow(request) -> bool:
    """Whether the session runs a test of another file after this file's tests."""
    items = request.session.items
    last = max(index for index, item in enumerate(items) if item.path == request.path)
    return any(item.path != request.path for item in items[last + 1:])


@pytest.fixture(scope="module")
def revisions(host, request, tmp_path_factory):
    """Two more revisions of the tiny model on the mirror: a good one (other generation
    defaults) and a bad one (config.json's MLP is twice the size its weights have).  After
    the file's tests the mirror's branch goes back to the pinned revision (whose files the
    inventory publishes) and, when a test follows, site.yml puts the fleet back on it."""
    good, bad = tmp_path_factory.mktemp("good"), tmp_path_factory.mktemp("bad")
    for folder in (good, bad):
        shutil.copytree(FIXTURE, folder, dirs_exist_ok=True)
    generation = json.loads((good / "generation_config.json").read_text())
    (good / "generation_config.json").write_text(json.dumps(dict(generation, temperature=0.7), indent=2) + "\n")
    config = json.loads((bad / "config.json").read_text())
    (bad / "config.json").write_text(json.dumps(dict(config, intermediate_size=2 * config["intermediate_size"]),
                                                indent=2) + "\n")
    publish = {"hf_mirror_publish": [{"repo": REPO, "src": str(good)}, {"repo": REPO, "src": str(bad)}]}
    rc, output, _ = site("--tags", "mirror", "-e", json.dumps(publish))
    assert rc == 0, output[-3000:]
    log = host.check_output("git -c safe.directory=* -C %s log --format=%%H -n 3" % MIRROR_REPO)
    shas = log.split()
    assert shas[2] == FIRST, shas
    yield {"good": shas[1], "bad": shas[0]}
    host.check_output("git -c safe.directory=* -C %s reset --quiet --hard %s" % (MIRROR_REPO, FIRST))
    if not others_follow(request):
        print("left on the good revision: no test follows (serving %s)" % json.dumps(served(host)))
        return
    # Both hosts in one batch: no client uses the fleet between tests, so none needs an
    # instance in rotation while it is put back (one batch's restarts side by side, not two).
    rc, output, took = site("-e", json.dumps({"vllm_fleet_rollout_serial": ["100%"], "vllm_fleet_min_serving": 0}))
    print("put back on the pinned revision: site.yml %.0fs, rc %d, changed %s; serving %s"
          % (took, rc, recap_changed(output), json.dumps(served(host))))
    assert rc == 0, output[-3000:]
    assert served(host) == {"node1": FIRST, "node2": FIRST}


@pytest.mark.parametrize("args, says", [
    (["-e", '{"vllm_fleet_rollout_serial": ["100%"]}'],
     "vllm_fleet_rollout_serial: batch 1 (node1, node2) takes 2 of the 2 serving instance(s) out of rotation and "
     "leaves 0; vllm_fleet_min_serving is 1"),
    (["-e", "vllm_fleet_model_revision=main"], "vllm_fleet_model_revision: 'main' is a branch, tag or short sha"),
    (["--limit", "node1,nodeX"], "--limit node1,nodeX names nodeX, which the inventory does not have"),
], ids=["batch-breaks-the-guard", "floating-revision", "unknown-host-in-limit"])
def test_a_bad_rollout_is_refused_before_any_host_changes(args, says):
    rc, output, _took = site(*args)
    refusals = " ".join(msg for _host, msg in messages(output, "fatal"))
    print("refused:", refusals[:400])
    assert rc != 0
    assert says in re.sub(r"\s+", " ", refusals), output[-3000:]
    assert set(recap_changed(output).values()) == {0}, recap_changed(output)


def roll_out(host, revision: str, *extra: str) -> tuple[int, str, float, dict]:
    """site.yml with the fleet pinned to ``revision``, under the load through the gateway
    from before it starts until it ends: 4 clients, 1 request a second together (at 2 a
    second the good change's site.yml took 640 s, a no-op run without load 125 s: the CPU
    engines and Ansible share the machine's two cores)."""
    with Load("https://%s:443" % address(host), str(CA), KEY, MODEL, rate=1.0) as load:
        time.sleep(3)
        rc, output, took = site("-e", "vllm_fleet_model_revision=%s" % revision, "-e", '{"hf_mirror_publish": []}',
                                *extra)
    return rc, output, took, load.summary()


def published(host, node) -> dict:
    """What ``node`` publishes and admits: its upstream file on the gateway, its engine
    targets on the monitoring host (both the mirror here), its live firewall table."""
    return {"upstream": host.file("/etc/nginx/vllm-fleet-upstreams/%s.conf" % node.backend.host).content_string,
            "targets": [host.file("/etc/prometheus/file_sd/%s/%s.json" % (job, node.backend.host)).content_string
                        for job in ("vllm", "vllm_health")],
            "firewall": re.sub(r"handle \d+", "", node.check_output("nft list table inet vllm_fleet"))}


def slowest_tasks(output: str, count: int = 12) -> str:
    """The head of profile_tasks' recap: where the run's time went."""
    recap = output.split("TASKS RECAP", 1)[-1].splitlines()[3:3 + count]
    return "\n".join(line for line in recap if line.strip())


def test_a_new_revision_reaches_every_host_and_no_request_fails(host, revisions):
    rc, output, took, summary = roll_out(host, revisions["good"])
    report = rollout_report(output)
    print("good change: site.yml %.0fs, rc %d; requests %d sent, %d failed (%d chat, %d streams ok, %d sent again "
          "on a new connection); %s; serving %s"
          % (took, rc, summary["sent"], summary["failed"], summary["chat_ok"], summary["stream_ok"],
             summary["reconnected"], json.dumps(report), json.dumps(served(host))))
    print("slowest tasks:\n" + slowest_tasks(output))
    assert rc == 0, output[-5000:]
    assert summary["failed"] == 0, summary["failures"]
    assert summary["chat_ok"] > 0 and summary["stream_ok"] > 0
    assert served(host) == {"node1": revisions["good"], "node2": revisions["good"]}
    assert sorted(report) == ["node1", "node2"], report
    # the canary went first, alone: node1's batch ended before node2's began
    first = output.index("PLAY [Serve the model, batch by batch]")
    second = output.index("PLAY [Serve the model, batch by batch]", first + 1)
    after = output.find("\nPLAY [", second + 1)  # the plays after serving (monitoring) run on every host
    assert "[node2]" not in output[first:second] and "[node1]" not in output[second:after]


def test_a_change_the_engine_cannot_start_is_rolled_back_on_the_canary(host, revisions):
    """The bad revision and a new port at once: during the change node1's firewall admits
    both ports; the rollback puts back the old port's firewall, upstream file and targets."""
    node1 = other(host, "node1")
    before = published(host, node1)
    assert "dport 8000" in before["firewall"] and ":8000" in before["upstream"]
    rc, output, took, summary = roll_out(host, revisions["bad"], "-e", "preflight_port=8100",
                                         "--limit", "node1,node2")
    failed = [msg for name, msg in messages(output, "fatal") if name == "node1" and "the change (" in msg]
    print("bad change: site.yml --limit node1,node2 %.0fs, rc %d; requests %d sent, %d failed, %d sent again on a "
          "new connection; serving %s" % (took, rc, summary["sent"], summary["failed"], summary["reconnected"],
                          json.dumps(served(host))))
    print("rollback message:", failed[0].split("--- journal")[0] if failed else output[-3000:])
    print("slowest tasks:\n" + slowest_tasks(output))
    assert rc != 0 and failed, output[-5000:]
    text = failed[0]
    assert revisions["bad"] in text and "Check that the restarts succeeded" in text
    assert "Rolled back: main serve what they served before" in text
    assert "back in the gateways' rotation" in text
    assert summary["failed"] == 0, summary["failures"]
    # node1 serves the good revision again; node2 was never touched
    assert served(host) == {"node1": revisions["good"], "node2": revisions["good"]}
    assert "node2" not in rollout_report(output)
    assert node1.service("vllm@main.service").is_running
    assert published(host, node1) == before
