"""The operator's path, once, as the README gives it: the demo fleet that `make demo`
brings up (tools/demo.py: its hosts over SSH with the fleet's keys, the repository's
ansible.cfg and its default inventory, inventories/demo), then what an operator runs
next with that same configuration: site.yml again (changed=0), fleet_status.yml (a row
per scraped instance), diagnose.yml (every check ok), and two runs over disjoint slices
started together (each host's entries on the shared host written back, none lost).  tune.yml is not here: its
"defaults" candidate (vLLM's own settings, compiled) fails on the demo fleet: torch's
inductor cannot write /tmp/torchinductor_root/precompiled_headers (Permission denied) as
the search's engine user, so the engine core exits in its warm-up.  Open.

The molecule scenarios run their own ansible.cfg over `docker exec`; this is the one
place CI runs `gathering = smart`, the SSH connection with ControlPersist and pipelining,
and the demo itself.  tools/molecule_all.py runs it first beside molecule `serve`
(`make molecule`); it boots the fleet named demo and takes it down afterwards unless it
was up before."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
sys.path.insert(0, str(ROOT / "tools"))
import fleet  # noqa: E402
from playbook_output import printed, recap_changed  # noqa: E402

# What an operator's shell has: the repository's ansible.cfg (make exports it; so does
# tools/demo.py).  Results as JSON so that the tests can read what a task printed.
ENV = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
           ANSIBLE_STDOUT_CALLBACK="default", ANSIBLE_CALLBACK_RESULT_FORMAT="json")


def failures(output: str) -> str:
    """The lines that say why a run failed (a failed task's own), or its end."""
    lines = [line for line in output.splitlines() if line.startswith(("fatal:", "failed:", "[ERROR]"))]
    return "\n".join(lines)[-4000:] or output[-4000:]


def playbook(name: str, *args: str) -> tuple[int, str]:
    """``ansible-playbook playbooks/NAME`` from the repository, as the README has it."""
    started = time.monotonic()
    run = subprocess.run([str(BIN / "ansible-playbook"), "playbooks/" + name, *args], cwd=ROOT, env=ENV,
                         capture_output=True, text=True)
    print("ansible-playbook playbooks/%s %s: rc %d, %.0fs" % (name, " ".join(args), run.returncode,
                                                              time.monotonic() - started))
    return run.returncode, run.stdout + run.stderr


@pytest.fixture(scope="module")
def demo():
    """The demo fleet, converged by tools/demo.py (make demo without its set-up)."""
    if not fleet.docker_ok():
        pytest.fail("no Docker daemon (make test starts one)")
    was_up = bool(fleet.fleet_containers("demo"))
    started = time.monotonic()
    run = subprocess.run([sys.executable, "tools/demo.py"], cwd=ROOT, env=ENV, capture_output=True, text=True)
    print("tools/demo.py: rc %d, %.0fs\n%s" % (run.returncode, time.monotonic() - started, run.stdout[-1500:]))
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    yield run.stdout
    if not was_up:
        fleet.down("demo")


def test_the_demo_answers_through_the_gateway_once_per_inference_host(demo):
    answers = [line for line in demo.splitlines() if "(client demo): answer (" in line]
    assert len(answers) == 2 and all("finish=" in line for line in answers), demo[-3000:]


def test_a_second_site_run_over_ssh_changes_nothing(demo):
    rc, output = playbook("site.yml")
    assert rc == 0, failures(output)
    assert recap_changed(output) == {"mirror": 0, "node1": 0, "node2": 0}, output[-3000:]


def test_fleet_status_prints_a_row_per_scraped_instance(demo):
    rc, output = playbook("fleet_status.yml")
    assert rc == 0, failures(output)
    table = printed(output, "monitoring : Print the fleet's status")["mirror"]
    print("\n".join(table))
    rows = {line.split()[0]: line.split()[1] for line in table[1:]}
    assert rows == {"node1/main": "yes", "node2/main": "yes"}, table


def test_diagnose_finds_every_check_ok(demo):
    rc, output = playbook("diagnose.yml")
    tables = printed(output, "Print the verdicts")
    assert rc == 0, failures(output)
    assert sorted(tables) == ["node1", "node2"], output[-3000:]
    for host, rows in tables.items():
        assert [row for row in rows if re.split(r"\s{2,}", row)[1] != "ok"] == [], (host, rows)


# An HTTP GET from one demo host: "ok", or what stopped it.
REACH = ("import sys, urllib.request\ntry:\n    urllib.request.urlopen(sys.argv[1], timeout=5).read()\n"
         "    print('ok')\nexcept Exception as exc:\n    print(repr(getattr(exc, 'reason', exc)))")


def reach(source: str, url: str) -> str:
    return subprocess.run(["docker", "exec", "demo-" + source, "python3", "-c", REACH, url],
                          capture_output=True, text=True, timeout=60).stdout.strip()


def test_the_exporters_answer_the_monitoring_host_alone(demo):
    """Each host's node exporter (port 9100) and the gateway's nginx exporter (9113, on the
    mirror), vllm_fleet_node_exporter_port's and vllm_fleet_nginx_exporter_port's defaults,
    answer their own host and the monitoring host (the mirror) and no other: node2 reaches
    none of them (the units' own filter drops the packets)."""
    seen = {(source, target, port): reach(source, "http://demo-%s:%d/metrics" % (target, port))
            for source, target, port in [("mirror", "node1", 9100), ("node1", "node1", 9100),
                                         ("mirror", "mirror", 9113), ("node2", "node1", 9100),
                                         ("node2", "mirror", 9100), ("node2", "mirror", 9113)]}
    print(seen)
    assert [key for key, got in seen.items() if (got == "ok") != (key[0] != "node2")] == [], seen


def test_two_slices_converge_at_once_and_lose_no_hosts_entries(demo):
    """Two runs over disjoint slices of the fleet started together (AWX's job slicing, or two
    control nodes each with its own --limit): node1's and node2's entries on the shared host
    (the gateway's upstream files, Prometheus's target files) are taken away first, as if
    never published; each slice's run writes back its own host's, neither loses the other's,
    and a full run afterwards changes nothing."""
    hosts = ("node1", "node2")
    shared = {"/etc/nginx/vllm-fleet-upstreams/%s.conf": "# %s's instances",
              "/etc/prometheus/file_sd/vllm/%s.json": '"host": "%s"',
              "/etc/prometheus/file_sd/vllm_health/%s.json": '"host": "%s"',
              "/etc/prometheus/file_sd/node/%s.json": '"host": "%s"'}
    subprocess.run(["docker", "exec", "demo-mirror", "rm", "-f", *[p % h for p in shared for h in hosts]], check=True)
    started = time.monotonic()
    runs = {host: subprocess.Popen([str(BIN / "ansible-playbook"), "playbooks/site.yml", "--limit", host],
                                   cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for host in hosts}
    outputs = {host: run.communicate()[0] for host, run in runs.items()}
    print("site.yml --limit node1 and --limit node2 at once: %.0fs" % (time.monotonic() - started))
    for host, run in runs.items():
        assert run.returncode == 0, (host, failures(outputs[host]))
    written = {(path, host): subprocess.run(["docker", "exec", "demo-mirror", "cat", path % host],
                                            capture_output=True, text=True).stdout
               for path in shared for host in hosts}
    assert [key for key, text in written.items() if shared[key[0]] % key[1] not in text] == [], written
    assert subprocess.run(["docker", "exec", "demo-mirror", "nginx", "-t", "-q"]).returncode == 0
    query = ("import json, urllib.request\nurl = 'http://127.0.0.1:9090/api/v1/targets?state=active'\n"
             "targets = json.load(urllib.request.urlopen(url, timeout=5))['data']['activeTargets']\n"
             "print(json.dumps(sorted({(t['labels']['job'], t['labels'].get('host', '')) for t in targets})))")
    want = {(job, host) for job in ("vllm", "vllm_health", "node") for host in hosts}
    for _ in range(30):
        seen = {tuple(t) for t in json.loads(subprocess.run(["docker", "exec", "demo-mirror", "python3", "-c", query],
                                                            capture_output=True, text=True).stdout)}
        if want <= seen:
            break
        time.sleep(1)
    assert want <= seen, sorted(want - seen)
    rc, output = playbook("site.yml")
    assert rc == 0, failures(output)
    assert recap_changed(output) == {"mirror": 0, "node1": 0, "node2": 0}, output[-3000:]
