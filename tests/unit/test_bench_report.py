"""playbooks/benchmark.yml's checks, targets and report (module_utils/bench_report.py)."""
from __future__ import annotations

import json
from pathlib import Path

import matplotlib.image
import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
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
    assert result["levels"] == [{"concurrency": 1, "prompts": 4}, {"concurrency": 4, "prompts": 8},
                                {"concurrency": 8, "prompts": 16}]


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
])
def test_bad_settings_are_refused_by_name(changes, message):
    with pytest.raises(BenchError) as refused:
        bench(**changes)
    assert str(refused.value).startswith(message)


def test_overload_only_when_asked():
    assert bench(concurrency=[64], allow_overload=True)["levels"] == [{"concurrency": 64, "prompts": 128}]


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
    assert [(p["label"], p["concurrency"]) for p in out["points"]] == [
        ("candidate", 1), ("candidate", 4), ("plan", 1), ("plan", 4)]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["series"]["candidate gateway"] == [[1, 26.0, 100.0], [4, 78.0, 300.0]]
    assert out["table"][0].split()[:3] == ["label", "target", "c"] and len(out["table"]) == 5
    assert out["failed"] == []
    image = matplotlib.image.imread(str(tmp_path / "benchmark.png"))
    assert image.shape[0] > 300 and image.shape[1] > 600
    assert image[..., :3].std() > 0.05  # not a blank canvas


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
                     item=[{"url": "https://gw", "name": "gateway"}, {"concurrency": 1, "prompts": 4}])
    templar = Templar(loader=DataLoader(), variables=variables)

    def value(name: str):
        return templar.template(trust_as_template("{{ %s }}" % name))
    assert value("_benchmark_key") == "client-key-0123456789"
    for name in ("_benchmark_env", "_benchmark_argv"):
        assert "client-key-0123456789" not in json.dumps(value(name)), name
    assert "/tmp/vllm-fleet-bench/plan/key" in " ".join(value("_benchmark_argv"))
