"""playbooks/benchmark.yml's checks, targets and report (module_utils/bench_report.py)."""
from __future__ import annotations

import json
from pathlib import Path

import matplotlib.image
import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from ansible.module_utils import capacity
from ansible.module_utils.bench_report import BenchError, plan, read, report

PLAN = {"max_num_seqs": 4, "instances": [{"name": "main", "port": 8000, "args": {"host": "10.0.0.2"}}]}
PLANS = [PLAN, dict(PLAN, instances=[{"name": "main", "port": 8000, "args": {"host": "0.0.0.0"}}])]


def bench(**changes) -> dict:
    args = dict(label="plan", concurrency=[1, 4], input_len=32, output_len=8, prompts_per_level=4, plans=PLANS,
                gateway="https://gw:443", instances=[], allow_overload=False)
    args.update(changes)
    return plan(**args)


def test_the_gateway_is_one_target_with_the_whole_fleets_concurrency():
    result = bench(concurrency=[8, 1, 4])
    assert result["targets"] == [{"name": "gateway", "url": "https://gw:443"}]
    assert result["fleet_capacity"] == result["target_capacity"] == 8
    assert [(level["name"], level["concurrency"]) for level in result["levels"]] == [("c1", 1), ("c4", 4), ("c8", 8)]
    four = result["levels"][1]["args"]
    assert four[:8] == ["--max-concurrency", "4", "--num-prompts", "8", "--seed", "4", "--num-warmups", "4"]
    assert four[-6:] == ["--dataset-name", "random", "--random-input-len", "32", "--random-output-len", "8"]
    assert "--dataset-name" not in bench(dataset=True)["levels"][0]["args"]


def test_a_request_rate_is_the_capacity_searchs_open_loop_point():
    """The same flags as playbooks/tune.yml's search (capacity.bench_args), no concurrency
    cap and no warm-up copies; the overload check is the judgement's, afterwards."""
    result = bench(request_rate=[0.5, 2], concurrency=[64], seed=3, ramp_s=5, window_s=60)
    assert [(level["name"], level["rate"]) for level in result["levels"]] == [("r0.5", 0.5), ("r2", 2)]
    assert result["levels"][1]["args"] == capacity.bench_args({"input_len": 32, "output_len": 8}, 2,
                                                              capacity.seed(3, 2), ramp_s=5, window_s=60)
    assert "--request-rate" in result["levels"][1]["args"] and "--max-concurrency" not in result["levels"][1]["args"]


def test_each_instance_is_reached_where_its_host_reaches_it():
    result = bench(gateway="", instances=PLANS[1]["instances"] + PLAN["instances"])
    assert result["targets"] == [{"name": "main", "url": "http://127.0.0.1:8000"},
                                 {"name": "main", "url": "http://10.0.0.2:8000"}]
    assert result["target_capacity"] == 4


@pytest.mark.parametrize("changes, message", [
    ({"concurrency": [1, 16]}, "benchmark_concurrency: 16 concurrent requests are more than the 8 the plan lets"),
    ({"gateway": "", "instances": PLAN["instances"], "concurrency": [8]},
     "benchmark_concurrency: 8 concurrent requests are more than the 4"),
    ({"label": "Plan B"}, "benchmark_label: 'Plan B' must be"),
    ({"concurrency": [0]}, "benchmark_concurrency: [0] is not a list of whole numbers > 0"),
    ({"output_len": "256"}, "benchmark_output_len: '256' is not a whole number > 0"),
    ({"gateway": "", "instances": []}, "benchmark_target: instances, and this host has no planned instance"),
    ({"request_rate": [1, "2/s"]}, "benchmark_request_rate: [1, '2/s'] is not a list of requests per second from"),
    ({"request_rate": [1e-05]}, "benchmark_request_rate: [1e-05] is not a list of requests per second from 0.001"),
    ({"request_rate": [0.2, 1], "window_s": 90}, "benchmark_window_s: 90 s at 0.2 requests/s is 18 requests; a "
                                                "point needs at least 20"),
    ({"request_rate": [1], "window_s": 0}, "benchmark_window_s: 0 is not a number of seconds >= 1"),
    ({"request_rate": [1], "dataset": True}, "benchmark_dataset: open-loop points (benchmark_request_rate) draw"),
    ({"seed": -1}, "benchmark_seed: -1 is not a whole number >= 0"),
])
def test_bad_settings_are_refused_by_name(changes, message):
    with pytest.raises(BenchError) as refused:
        bench(**changes)
    assert str(refused.value).startswith(message)


def test_overload_only_when_asked():
    assert bench(concurrency=[64], allow_overload=True)["levels"][0]["args"][:4] == [
        "--max-concurrency", "64", "--num-prompts", "128"]


def result(throughput: float, ttft: float) -> dict:
    return {"completed": 8, "failed": 0, "request_throughput": throughput / 8, "output_throughput": throughput,
            "mean_ttft_ms": ttft / 2, "p99_ttft_ms": ttft, "mean_tpot_ms": 30.0, "p99_tpot_ms": 40.0,
            "duration": 10.0, "input_lens": [32] * 8}


def test_the_report_has_every_label_and_target_as_a_series(tmp_path):
    for label, scale in (("plan", 1.0), ("candidate", 1.3)):
        (tmp_path / label).mkdir()
        for c, tput, ttft in ((1, 20.0, 100.0), (4, 60.0, 300.0)):
            (tmp_path / label / ("%s--gateway--c%d.json" % (label, c))).write_text(
                json.dumps(result(tput * scale, ttft)))
    (tmp_path / "plan" / "notes.json").write_text("{}")  # not a result: left out
    out = report(str(tmp_path), str(tmp_path / "summary.json"), str(tmp_path / "benchmark.png"))
    assert [(p["label"], p["level"]) for p in out["points"]] == [
        ("candidate", "c1"), ("candidate", "c4"), ("plan", "c1"), ("plan", "c4")]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["series"]["candidate gateway"] == [[1, 26.0, 100.0], [4, 78.0, 300.0]]
    assert out["table"][0].split()[:3] == ["label", "target", "level"] and len(out["table"]) == 5
    assert out["failed"] == []
    image = matplotlib.image.imread(str(tmp_path / "benchmark.png"))
    assert image.shape[0] > 300 and image.shape[1] > 600
    assert image[..., :3].std() > 0.05  # not a blank canvas


def open_loop(rate: float, ttft_s: float, requests: int = 40) -> dict:
    """A --save-detailed result: ``requests`` arrivals 1/rate apart, each with 8 tokens
    generated 20 ms apart after a first token at ``ttft_s``."""
    return dict(result(10.0, ttft_s * 1000), start_times=[i / rate for i in range(requests)],
                ttfts=[ttft_s] * requests, itls=[[0.02] * 7] * requests, output_lens=[8] * requests,
                errors=[""] * requests)


def test_an_open_loop_point_is_judged_against_the_slo(tmp_path):
    """The capacity search's judgement (module_utils/capacity.judge) over the window: the
    same result holds a loose objective and fails a tight one, naming why."""
    (tmp_path / "plan--gateway--r2.json").write_text(json.dumps(open_loop(2.0, 0.5)))
    (tmp_path / "plan--gateway--c1.json").write_text(json.dumps(result(20.0, 100.0)))
    loose = report(str(tmp_path), str(tmp_path / "s.json"), str(tmp_path / "p.png"),
                   slo={"ttft_p99_s": 1.0, "tpot_mean_ms": 50}, ramp_s=5)
    rate = [p for p in loose["points"] if p["level"] == "r2"][0]
    assert (rate["rate"], rate["meets_slo"], rate["sent_rate"]) == (2.0, True, 2.0)
    assert loose["table"][2].endswith("  holds") and loose["table"][1].endswith("  -")
    assert json.loads((tmp_path / "s.json").read_text())["series"]["plan gateway open-loop"] == [[2.0, 10.0, 500.0]]
    tight = report(str(tmp_path), str(tmp_path / "s.json"), str(tmp_path / "p.png"), write=False,
                   slo={"ttft_p99_s": 0.25, "tpot_mean_ms": 50}, ramp_s=5)
    assert tight["table"][2].endswith("  fails: p99 TTFT 500 ms > 250 ms")
    # with no objective the figures alone
    assert "meets_slo" not in read(str(tmp_path))[1]


def test_failed_requests_are_named(tmp_path):
    (tmp_path / "plan--node1.main--c1.json").write_text(json.dumps(dict(result(0.0, 0.0), completed=0, failed=4)))
    out = report(str(tmp_path), str(tmp_path / "s.json"), str(tmp_path / "p.png"))
    assert out["failed"] == ["plan node1.main c1: 4 of 4 failed"]


def test_an_empty_results_folder_is_an_error(tmp_path):
    with pytest.raises(BenchError, match="benchmark_results_dir: no `vllm bench serve` result"):
        report(str(tmp_path), str(tmp_path / "s.json"), str(tmp_path / "p.png"))
    assert read(str(tmp_path)) == []


def test_the_key_is_in_neither_the_command_line_nor_the_environment():
    """Under become, Ansible puts a task's `environment:` on sudo's command line (ps shows
    it); the benchmark's command reads the key from its 0600 file instead."""
    role = Path(__file__).resolve().parents[2] / "roles" / "benchmark"
    def trusted(value):
        if isinstance(value, dict):
            return {k: trusted(v) for k, v in value.items()}
        return trust_as_template(value) if isinstance(value, str) else value
    variables = dict(trusted(yaml.safe_load((role / "vars" / "main.yml").read_text())),
                     benchmark_label="plan", benchmark_target="gateway", benchmark_client="tester",
                     gateway_clients=[{"name": "tester", "key": "client-key-0123456789"}],
                     vllm_fleet_api_key="engine-key-0123456789", gateway_tls_certificate="",
                     vllm_service_running={"python": "/opt/vllm/bin/python", "settings": {"model": "/m"}},
                     preflight_plan={"served_model_name": "tiny"}, benchmark_seed=0, benchmark_input_len=8,
                     benchmark_output_len=8, benchmark_dataset="", inventory_hostname="node1",
                     item=[{"url": "https://gw", "name": "gateway"}, {"name": "c1", "args": ["--max-concurrency", "1"]}])
    templar = Templar(loader=DataLoader(), variables=variables)

    def value(name: str):
        return templar.template(trust_as_template("{{ %s }}" % name))
    assert value("_benchmark_key") == "client-key-0123456789"
    for name in ("_benchmark_env", "_benchmark_argv"):
        assert "client-key-0123456789" not in json.dumps(value(name)), name
    assert "/tmp/vllm-fleet-bench/plan/key" in " ".join(value("_benchmark_argv"))
