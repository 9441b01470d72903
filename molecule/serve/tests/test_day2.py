"""The operator's day-2 playbooks on the converged fleet: playbooks/benchmark.yml through
the gateway and against each instance (the JSON vllm bench serve writes, the summary,
the plot, the table), and playbooks/diagnose.yml on the healthy fleet (all good), then on
a fleet broken on purpose three ways (the clients ask for a name it does not serve, a
file of a snapshot changed on disk, an engine stopped): each named.  The fleet is mended
afterwards, for the tests that follow.  Every test takes ``host`` (the mirror), so that
they run with the other host tests, on the fleet as converged."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import matplotlib.image

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


def test_benchmark_writes_the_results_a_summary_and_a_plot(host, tmp_path):
    small = ["-e", json.dumps({"benchmark_input_len": 32, "benchmark_output_len": 8, "benchmark_prompts_per_level": 4,
                               "benchmark_results_dir": str(tmp_path)})]
    rc, output, _took = playbook("benchmark.yml", *small, "-e", '{"benchmark_concurrency": [1, 2]}')
    assert rc == 0, output[-4000:]
    rc, output, _took = playbook("benchmark.yml", *small, "-e", '{"benchmark_concurrency": [1]}',
                          "-e", "benchmark_target=instances")
    assert rc == 0, output[-4000:]
    # open loop: the capacity search's point (Poisson arrivals at 2 requests/s), judged
    rates = {"benchmark_label": "rates", "benchmark_request_rate": [2], "benchmark_ramp_s": 2,
             "benchmark_window_s": 15, "benchmark_slo": {"ttft_p99_s": 10, "tpot_mean_ms": 1000}}
    rc, open_output, _took = playbook("benchmark.yml", *small, "-e", json.dumps(rates))
    assert rc == 0, open_output[-4000:]
    rate_point = json.loads((tmp_path / "rates" / "rates--gateway--r2.json").read_text())
    assert rate_point["request_rate"] == 2 and len(rate_point["start_times"]) == 34
    table = next(iter(printed(open_output, "benchmark : Print the table").values()))
    assert [row.split()[2] for row in table if row.startswith("rates ")] == ["r2"]
    assert [row for row in table if row.startswith("rates ")][0].endswith("  holds"), table
    # the key the requests carried was in a 0600 file of the run alone
    assert not other(host, "node1").file("/tmp/vllm-fleet-bench/plan/key").exists
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
