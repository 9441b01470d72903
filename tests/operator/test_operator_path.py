"""The operator's path, once, as the README gives it: the demo fleet that `make demo`
brings up (tools/demo.py: its hosts over SSH with the fleet's keys, the repository's
ansible.cfg and its default inventory, inventories/demo), then what an operator runs
next with that same configuration: fleet_status.yml (a row per scraped instance),
diagnose.yml (every check ok), benchmark.yml (its results, summary, plot and table),
tune.yml (two candidates against the CPU engine, on short points), and two runs over
disjoint slices started together (each host's entries on the shared host written back,
none lost), then site.yml again over the whole fleet (changed=0).

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

import matplotlib.image
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


def test_benchmark_writes_the_results_a_summary_and_a_plot(demo, tmp_path):
    """benchmark.yml through the gateway and against each instance (the JSON vllm bench
    serve writes, the summary, the plot, the table), then an open-loop point judged
    against an SLO."""
    small = ["-e", json.dumps({"benchmark_input_len": 32, "benchmark_output_len": 8, "benchmark_prompts_per_level": 4,
                               "benchmark_results_dir": str(tmp_path)})]
    rc, output = playbook("benchmark.yml", *small, "-e", '{"benchmark_concurrency": [1, 2]}')
    assert rc == 0, failures(output)
    rc, output = playbook("benchmark.yml", *small, "-e", '{"benchmark_concurrency": [1]}',
                          "-e", "benchmark_target=instances")
    assert rc == 0, failures(output)
    # open loop: the capacity search's point (Poisson arrivals at 2 requests/s), judged
    rates = {"benchmark_label": "rates", "benchmark_request_rate": [2], "benchmark_ramp_s": 2,
             "benchmark_window_s": 15, "benchmark_slo": {"ttft_p99_s": 10, "tpot_mean_ms": 1000}}
    rc, open_output = playbook("benchmark.yml", *small, "-e", json.dumps(rates))
    assert rc == 0, failures(open_output)
    rate_point = json.loads((tmp_path / "rates" / "rates--gateway--r2.json").read_text())
    assert rate_point["request_rate"] == 2 and len(rate_point["start_times"]) == 34
    table = next(iter(printed(open_output, "benchmark : Print the table").values()))
    assert [row.split()[2] for row in table if row.startswith("rates ")] == ["r2"]
    assert [row for row in table if row.startswith("rates ")][0].endswith("  holds"), table
    # the key the requests carried was in a 0600 file of the run alone
    assert in_container("node1", "sh", "-c", "test -e /tmp/vllm-fleet-bench/plan/key && echo present || echo absent"
                        ).strip() == "absent"
    results = sorted(p.name for p in (tmp_path / "plan").iterdir())
    assert results == ["plan--gateway--c1.json", "plan--gateway--c2.json",
                       "plan--node1.main--c1.json", "plan--node2.main--c1.json"]
    for name in results:
        result = json.loads((tmp_path / "plan" / name).read_text())
        assert result["completed"] >= 4 and result["failed"] == 0, (name, result.get("errors"))
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert sorted(summary["series"]) == ["plan gateway", "plan node1.main", "plan node2.main",
                                         "rates gateway open-loop"]
    assert [point[0] for point in summary["series"]["plan gateway"]] == [1, 2]
    image = matplotlib.image.imread(str(tmp_path / "benchmark.png"))
    assert image.shape[0] > 300 and image[..., :3].std() > 0.05
    print("benchmark table:\n" + "\n".join(table))


# The search on node1 in as little time as shows it whole: the plan's two candidates (vLLM's
# defaults, then the computed plan), one rate each, a 20 s window after a 5 s ramp (40
# requests judged); the demo's workload, an SLO the CPU engine meets.  A short window checks
# the path, not a capacity (docs/tuning.md).
TUNE = {"vllm_fleet_slo": {"ttft_p99_s": 2.0, "tpot_mean_ms": 250}, "tune_rates": [2],
        "vllm_fleet_workload": {"input_len": 64, "output_len": 16, "target_concurrency": 4},
        "tune_budget_starts": 2, "tune_warmup_s": 5, "tune_ramp_s": 5, "tune_window_s": 20}


def test_tune_measures_two_candidates_and_puts_the_host_back(demo, tmp_path):
    """tune.yml with node1 taken out: both candidates start from node1's venv and are measured
    at 2 requests/s; one start each cannot make a winner, so the record says tie and the
    computed plan stays; node1 serves again with what it served, back in the gateway's
    rotation (its upstream file as before the search)."""
    upstream = "/etc/nginx/vllm-fleet-upstreams/node1.conf"
    before = in_container("mirror", "cat", upstream)
    settings = dict(TUNE, tune_record_dir=str(tmp_path / "record"), tune_results_dir=str(tmp_path / "results"))
    (tmp_path / "record").mkdir()
    (tmp_path / "tune.json").write_text(json.dumps(settings))
    rc, output = playbook("tune.yml", "-e", "tune_host=node1", "-e", "tune_take_host_out=true",
                          "-e", "@%s" % (tmp_path / "tune.json"))
    print("\n".join(printed(output, "tune : Print the search's table").get("node1", [])))
    assert rc == 0, failures(output)
    [record] = [json.loads(path.read_text()) for path in (tmp_path / "record").iterdir()]
    [(profile, entry)] = record.items()
    [results] = [json.loads(path.read_text()) for path in (tmp_path / "results").iterdir()]
    measured = [(start["candidate"], [(p["rate"], p["completed"] >= 20, p["failed"]) for p in start["points"]])
                for start in results["starts"] if start.get("points")]
    assert profile.startswith("cpu-x1/") and entry["verdict"] == "tie" and entry["settings"] == {}, entry
    assert "a candidate needs two to win" in entry["why"], entry
    assert measured == [("defaults", [(2.0, True, 0)]), ("computed", [(2.0, True, 0)])], results["starts"]
    assert in_container("node1", "systemctl", "is-active", "vllm@main").strip() == "active"
    assert in_container("mirror", "cat", upstream) == before, before


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
    # Prometheus applies a file on its disk watch's event, and re-reads every file each
    # refresh_interval (30 s here) in case an event was missed: 90 s covers both, loaded
    written_at = time.monotonic()
    while True:
        seen = {tuple(t) for t in json.loads(subprocess.run(["docker", "exec", "demo-mirror", "python3", "-c", query],
                                                            capture_output=True, text=True).stdout)}
        if want <= seen or time.monotonic() - written_at > 90:
            break
        time.sleep(1)
    print("Prometheus listed every host's targets %.0fs after the runs" % (time.monotonic() - written_at))
    assert want <= seen, sorted(want - seen)
    rc, output = playbook("site.yml")
    assert rc == 0, failures(output)
    assert recap_changed(output) == {"mirror": 0, "node1": 0, "node2": 0}, output[-3000:]


# Rotating the engines' key on the demo fleet (docs/day2.md): about 10 minutes of rolling
# restarts on 2 cores, more than CI's budget leaves, so it runs on request alone
# (VLLM_FLEET_ROTATION=1 make test-rotation) and last: it leaves the fleet on the new key.
OLD, NEW = "demo-fleet-key-not-secret", "demo-fleet-key-rotated-0123"
ENGINE_STATUS = ("import sys, urllib.error, urllib.request\nrequest = urllib.request.Request(sys.argv[1], "
                 "headers={'Authorization': 'Bearer ' + sys.argv[2]})\ntry:\n"
                 "    print(urllib.request.urlopen(request, timeout=10).status)\nexcept urllib.error.HTTPError as exc:\n"
                 "    print(exc.code)")


def engine_status(host: str, key: str) -> int:
    """What node's engine answers the gateway host for GET /v1/models with ``key``."""
    url = "http://%s:8000/v1/models" % fleet.address("demo", host)
    return int(subprocess.run(["docker", "exec", "demo-mirror", "python3", "-c", ENGINE_STATUS, url, key],
                              capture_output=True, text=True, check=True).stdout)


def in_container(host: str, *argv: str) -> str:
    return subprocess.run(["docker", "exec", "demo-" + host, *argv], capture_output=True, text=True).stdout


class GatewayLoad:
    """Short chat completions through the gateway, two a second at most (under the demo
    client's rate limit: an unpaced loop measured the gateway's 429s, 19,960 of them),
    each on a new connection (a reload's closed keep-alive connection is the client's to
    retry: docs/gateway.md), until stopped; what each got."""

    def __init__(self):
        import httpx
        import openai
        import threading
        self.url = "https://%s:443/v1" % fleet.address("demo", "mirror")
        ca = Path.home() / ".local" / "share" / "vllm-fleet" / "gateway-ca" / "mirror-ca.crt"
        self.client = openai.OpenAI(base_url=self.url, api_key="demo-client-key-not-secret", max_retries=0,
                                    timeout=60, http_client=httpx.Client(
                                        verify=str(ca), limits=httpx.Limits(max_keepalive_connections=0)))
        self.results, self.stop = [], threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop.wait(0.5):
            try:
                self.client.chat.completions.create(model="tiny-gemma4", max_tokens=4,
                                                    messages=[{"role": "user", "content": "Hi"}])
                self.results.append("ok")
            except Exception as exc:  # noqa: BLE001 - every failure is counted by its kind
                self.results.append("%s %s" % (type(exc).__name__, getattr(exc, "status_code", "")))

    def finish(self) -> dict:
        self.stop.set()
        self.thread.join(120)
        return {kind: self.results.count(kind) for kind in sorted(set(self.results))}


@pytest.mark.skipif(os.environ.get("VLLM_FLEET_ROTATION") != "1",
                    reason="on request (VLLM_FLEET_ROTATION=1): ten minutes of rolling restarts")
def test_the_engines_key_rotates_in_three_runs_without_a_failed_request(demo, tmp_path):
    """docs/day2.md, "Rotating the engines' key", under a load through the gateway: the
    engines accept both keys, then the gateway switches with no engine restarted, then the
    old key is refused; no request through the gateway fails; no key reaches the journal."""
    def phase(name: str, settings: dict) -> str:
        path = tmp_path / (name + ".json")
        path.write_text(json.dumps(settings))
        rc, output = playbook("site.yml", "-e", "@%s" % path)
        assert rc == 0, (name, failures(output))
        return output

    load = GatewayLoad()
    try:
        started = time.monotonic()
        phase("accept-both", {"vllm_fleet_api_key_also_accepted": [NEW]})
        both = {h: (engine_status(h, OLD), engine_status(h, NEW), engine_status(h, "x" * 20)) for h in ("node1", "node2")}
        env, config = in_container("node1", "cat", "/etc/vllm/main.env"), in_container("node1", "cat", "/etc/vllm/main.yaml")
        mode = in_container("node1", "stat", "-c", "%a %U:%G", "/etc/vllm/main.yaml").strip()
        pids = {h: in_container(h, "systemctl", "show", "-p", "MainPID", "--value", "vllm@main").strip()
                for h in ("node1", "node2")}
        phase("switch", {"vllm_fleet_api_key": NEW, "vllm_fleet_api_key_also_accepted": [OLD]})
        pids_after = {h: in_container(h, "systemctl", "show", "-p", "MainPID", "--value", "vllm@main").strip()
                      for h in ("node1", "node2")}
        phase("drop-the-old", {"vllm_fleet_api_key": NEW})
        dropped = {h: (engine_status(h, OLD), engine_status(h, NEW)) for h in ("node1", "node2")}
        took = time.monotonic() - started
    finally:
        counts = load.finish()
    journal = in_container("node1", "journalctl", "-u", "vllm@main", "--no-pager", "-o", "cat")
    print("engine key rotated in %.0fs; through the gateway meanwhile: %s; accept-both %s; dropped %s; "
          "engines' PIDs across the switch %s -> %s" % (took, counts, both, dropped, pids, pids_after))
    assert both == {"node1": (200, 200, 401), "node2": (200, 200, 401)}
    assert "VLLM_API_KEY" not in env and "api-key:" in config and mode == "640 root:vllm"
    assert pids == pids_after and "0" not in pids.values()
    assert dropped == {"node1": (401, 200), "node2": (401, 200)}
    assert set(counts) == {"ok"} and counts["ok"] > 0, counts
    assert OLD not in journal and NEW not in journal and "'api_key': '***'" in journal
