"""The engines stay closed, and serving, under what admins do to a host by hand: a flush
of the ruleset, a restart of the distribution's nftables.service, a raw restart of an
engine under streams on it and a load through the gateway.  Each test leaves the fleet as
converged."""
from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from fleet_load import Load  # noqa: E402
from serve_hosts import CA, address, other, site  # noqa: E402

testinfra_hosts = ["ansible://mirror"]
KEY, ENGINE_KEY, MODEL = "molecule-tester-key-0123", "molecule-serve-key", "tiny-gemma4"
VENV = "/opt/vllm/cpu-0.32.0/bin/python"
# Runs on node1 in the engine's venv (vLLM brings the openai client): n streams against the
# engine itself (no gateway in the way), then `systemctl restart` once every stream has its
# first chunk.
RESTART_UNDER_STREAMS = r"""
import concurrent.futures, json, subprocess, sys, threading, time
import openai
url, key, model, n, tokens = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
api = openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0, timeout=600)
flowing = [threading.Event() for _ in range(n)]
def stream(i):
    chunks, finish = 0, None
    try:
        for chunk in api.chat.completions.create(model=model, stream=True, max_tokens=tokens,
                messages=[{"role": "user", "content": "Hello"}], extra_body={"ignore_eos": True}):
            chunks += 1
            finish = chunk.choices[0].finish_reason if chunk.choices else finish
            flowing[i].set()
    except Exception as exc:
        return {"finished": False, "chunks": chunks, "error": type(exc).__name__}
    return {"finished": finish == "length", "chunks": chunks, "finish_reason": finish}
with concurrent.futures.ThreadPoolExecutor(n) as pool:
    jobs = [pool.submit(stream, i) for i in range(n)]
    started = all(e.wait(300) for e in flowing)
    t0 = time.monotonic()
    restart = subprocess.Popen(["systemctl", "restart", "vllm@main.service"])
    results = [j.result() for j in jobs]
    streams_done = time.monotonic() - t0
restart.wait()
print(json.dumps({"started": started, "results": results, "streams_done_s": round(streams_done, 1),
                  "restart_s": round(time.monotonic() - t0, 1), "restart_rc": restart.returncode}))
"""
# How a connection to an engine port ends: "open", or the exception's name.
PROBE = ("import socket, sys\ntry:\n    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5).close()"
         "\n    print('open')\nexcept OSError as e:\n    print(type(e).__name__)")


def connect(source, target: str, port: int = 8000) -> str:
    return source.check_output("python3 -c %s %s %d" % (shlex.quote(PROBE), target, port))


def table_loaded(node) -> bool:
    return node.run("nft list table inet vllm_fleet").rc == 0


class DockerDns:
    """Docker's embedded DNS (the other containers' names, the mirror's among them) is a
    nat table in the container's own ruleset, which a flush takes too (no real host has
    it).  It is kept aside as iptables-nft wrote it (nft cannot print its DNAT targets) and
    put back, from the control node, before anything needs a name again."""

    def __init__(self, node, mirror: str):
        self.node, self.mirror = node, mirror
        pid = subprocess.check_output(["docker", "inspect", "-f", "{{.State.Pid}}",
                                       node.ansible.get_variables()["ansible_host"]], text=True).strip()
        self.netns = ["nsenter", "--target", pid, "--net"]
        self.saved = subprocess.check_output(self.netns + ["iptables-save", "-t", "nat"])
        assert b"DOCKER_OUTPUT" in self.saved, self.saved

    def restore(self) -> None:
        subprocess.run(self.netns + ["iptables-restore", "-T", "nat"], input=self.saved, check=True)
        assert self.node.run("getent hosts %s" % self.mirror).rc == 0


def test_a_flushed_ruleset_leaves_the_engine_closed_and_the_next_run_restores_it(host):
    """`nft flush ruleset` on node1 takes its table away: the unit's own address filter
    (IPAddressDeny=any, IPAddressAllow= the gateways, monitoring, the host) still drops
    node2's connection, while the gateway is served.  The next site.yml run finds the live
    table missing, says so and reloads it (changed).  Nothing restarts, so the serve play
    takes node1 and node2 in one batch, not the rollout's canary and then the rest."""
    node1, node2 = other(host, "node1"), other(host, "node2")
    target = address(node1)
    assert connect(node2, target) == "ConnectionRefusedError"  # the table's reset
    dns = DockerDns(node1, host.ansible.get_variables()["ansible_host"])
    node1.check_output("nft flush ruleset")
    try:
        assert not table_loaded(node1)
        assert node1.service("vllm-fleet-firewall").is_running  # the loader's state says nothing
        # no reset any more: the unit's filter drops the packets, so the connection times out
        assert connect(node2, target) == "TimeoutError"
        assert connect(host, target) == "open"
    finally:
        dns.restore()
    assert not table_loaded(node1)
    rc, output, took = site("--limit", "node1,node2")
    print("site.yml --limit node1,node2 after the flush: %.0fs" % took)
    assert rc == 0, output[-3000:]
    serve = [play.split("\nPLAY [")[0] for play in output.split("PLAY [Serve the model, batch by batch]")[1:]]
    assert len(serve) == 1 and "[node1]" in serve[0] and "[node2]" in serve[0], output[-3000:]
    assert re.search(r"node1: the engines' firewall was not as written \(table inet vllm_fleet is not loaded",
                     output), output[-3000:]
    recap = re.search(r"^node1\s+: ok=\d+\s+changed=(\d+)", output, re.M)
    assert recap and int(recap.group(1)) >= 1, output[-2000:]
    assert table_loaded(node1)
    assert connect(node2, target) == "ConnectionRefusedError"


def test_restarting_or_stopping_nftables_keeps_the_engines_table(host):
    """Debian's nftables.service loads /etc/nftables.conf (`flush ruleset` first) and
    flushes the ruleset when it stops; the role's drop-in loads the table after both."""
    node1, node2 = other(host, "node1"), other(host, "node2")
    target = address(node1)
    dns = DockerDns(node1, host.ansible.get_variables()["ansible_host"])
    try:
        for action in ("restart", "stop"):
            node1.check_output("systemctl %s nftables.service" % action)
            assert table_loaded(node1), action
            assert connect(node2, target) == "ConnectionRefusedError", action
    finally:
        node1.run("systemctl stop nftables.service")
        # the stop flushed Docker's table too (the drop-in loaded the engines' again)
        dns.restore()
    assert table_loaded(node1)


def test_a_raw_restart_of_an_engine_loses_no_request(host):
    """`systemctl restart vllm@main` on node1 (what an admin, a reboot or a unit edit does),
    not the rollout's drain, with 24 streams of 300 tokens running on node1's engine itself
    and a load through the gateway: while it drains, vLLM answers new requests 500 ("cannot
    schedule new futures after shutdown"), and a request that reaches its engine after the
    stop began is answered as aborted (HTTP 200, no tokens), which no gateway can retry; so
    the unit first makes the port refuse new connections for vllm_service_stop_grace
    seconds, and the gateway opens one per request.  It retries the refused connections and
    the 500s on node2 (nothing had reached the client), and the graceful
    stop (--shutdown-timeout, the plan's; KillMode=mixed) lets the running streams finish:
    nothing fails."""
    node1 = other(host, "node1")
    streams = ["docker", "exec", node1.ansible.get_variables()["ansible_host"], VENV, "-c", RESTART_UNDER_STREAMS,
               "http://%s:8000" % address(node1), ENGINE_KEY, MODEL, "24", "300"]
    gateway = "https://%s:443" % address(host)
    with Load(gateway, str(CA), KEY, MODEL, clients=6, rate=3.0) as load:
        time.sleep(5)
        run = subprocess.run(streams, capture_output=True, text=True, timeout=900)
        time.sleep(5)
    summary = load.summary()
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    finished = sum(r["finished"] for r in result["results"])
    print("raw restart of node1's engine under 24 streams (%d finished, done %.1fs after the restart began; healthy "
          "again after %.1fs, systemctl rc %d) and a load through the gateway: %s"
          % (finished, result["streams_done_s"], result["restart_s"], result["restart_rc"], summary))
    assert result["started"] and result["restart_rc"] == 0
    assert finished == 24, result["results"]
    assert node1.service("vllm@main").is_running
    # the port refused new connections while it stopped (ExecStop=), and no longer does
    assert "elements" not in node1.check_output("nft list set inet vllm_fleet draining")
    assert summary["sent"] >= 20, summary
    assert summary["failed"] == 0, summary["failures"]
    assert summary["stream_ok"] > 0 and summary["chat_ok"] > 0, summary
