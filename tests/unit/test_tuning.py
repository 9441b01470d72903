"""The SLO search (module_utils/tuning.py): the checks, the planner's candidates, the search
for capacity at SLO over starts, the budget, the verdict, the records preflight reads, on
made-up engines that each hold a known request rate."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from ansible.module_utils import gpu_facts, tuning
from ansible.module_utils.vllm_planner import PlanError, plan

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results" / "h200-tune"
TUNED = ROOT / "roles" / "preflight" / "files" / "tuned"
SLO = {"ttft_p99_s": 2.0, "tpot_mean_ms": 50.0}
WORKLOAD = {"input_len": 1024, "output_len": 256, "target_concurrency": 32}
H200_PROFILE = "nvidia-h200-x1/gemma-4-31B-it-FP8-block/vllm-0.25.1"


@pytest.fixture(scope="module")
def h200():
    gpus = gpu_facts.build_facts(json.loads((ROOT / "tests/fixtures/nvml/h200-1gpu-recorded.json").read_text()))
    config = json.loads((ROOT / "roles/preflight/files/models/gemma-4-31B-it-FP8-block.json").read_text())
    config.pop("_comment", None)
    return config, gpus["gpus"]


def h200_plan(h200, **kwargs):
    config, gpus = h200
    kwargs.setdefault("slo", SLO)
    kwargs.setdefault("workload", WORKLOAD)
    return plan(config, gpus, max_model_len=32768, engine_version="0.25.1", model_name="gemma-4-31B-it-FP8-block",
                **kwargs)


@pytest.mark.parametrize("slo, message", [
    ({"ttft_p99_s": 2, "tpot_mean_ms": 0.05}, "vllm_fleet_slo.tpot_mean_ms: 0.05 milliseconds is out of range: "
                                              "1.0 <= value <= 10000.0 (it is in milliseconds: 0.05 s is 50)"),
    ({"ttft_p99_s": 2000, "tpot_mean_ms": 50}, "(it is in seconds: 2000 ms is 2)"),
    ({"ttft_p99_s": -1, "tpot_mean_ms": 50}, "vllm_fleet_slo.ttft_p99_s: -1 seconds is out of range"),
    ({"ttft_p99_s": "2s", "tpot_mean_ms": 50}, "vllm_fleet_slo.ttft_p99_s: '2s' is not a number of seconds"),
    ({"ttft_p99_ms": 2000, "tpot_mean_ms": 50}, "vllm_fleet_slo.ttft_p99_ms: not an objective this project measures"),
    ("2s", "vllm_fleet_slo: '2s' must be a mapping with ttft_p99_s and tpot_mean_ms"),
])
def test_a_bad_objective_is_refused_by_name(slo, message):
    problems = tuning.check_slo(slo)
    assert any(message in problem for problem in problems), problems


def test_a_sound_objective_and_workload_pass():
    assert tuning.check_slo(SLO) == [] and tuning.check_slo({"ttft_p99_s": 2, "tpot_mean_ms": 50}) == []
    assert tuning.check_workload(WORKLOAD) == []


@pytest.mark.parametrize("workload, message", [
    (dict(WORKLOAD, input_len=0), "vllm_fleet_workload.input_len: 0 is not a whole number from 1"),
    (dict(WORKLOAD, target_concurrency=2.5), "vllm_fleet_workload.target_concurrency: 2.5 is not a whole number"),
    ({"input_len": 1024, "output_len": 256}, "vllm_fleet_workload.target_concurrency: None"),
    (dict(WORKLOAD, dataset="x.json"), "vllm_fleet_workload.dataset: not a workload field"),
])
def test_a_bad_workload_is_refused_by_name(workload, message):
    assert any(message in problem for problem in tuning.check_workload(workload)), tuning.check_workload(workload)


def test_the_planner_proposes_and_prunes_by_its_own_figures(h200):
    tuned = h200_plan(h200)["tuning"]
    assert tuned["state"] == "computed" and tuned["rates"] == [0.25, 0.5, 1, 2, 4, 8, 16, 32, 64, 128]
    names = [c["name"] for c in tuned["candidates"]]
    assert names == ["defaults", "computed", "batched-16384", "batched-32768"]
    assert tuned["candidates"][2]["settings"]["max-num-batched-tokens"] == 16384
    assert tuned["candidates"][2]["settings"]["max-num-seqs"] == 128
    # The BF16 cache holds 81 requests of 1,280 tokens (vLLM logged 260,363 tokens at 32k for this
    # plan): an FP8 cache is not needed for 32 and would cost throughput.
    (fp8,) = tuned["pruned"]
    assert fp8["name"] == "kv-fp8" and "holds 81 requests of 1280 tokens, the target is 32" in fp8["why"]


def test_a_target_the_cache_cannot_hold_prunes_those_candidates_and_proposes_fp8(h200):
    tuned = h200_plan(h200, workload=dict(WORKLOAD, target_concurrency=100))["tuning"]
    assert [c["name"] for c in tuned["candidates"]] == ["defaults", "kv-fp8"]
    pruned = {c["name"]: c["why"] for c in tuned["pruned"]}
    assert pruned["computed"] == "its KV cache holds 81.5 requests of 1280 tokens, the target is 100"
    assert set(pruned) == {"computed", "batched-16384", "batched-32768"}


def test_the_batch_flags_size_the_plan(h200):
    """vLLM logged 171,090 KV tokens with max-num-batched-tokens 16384 (bench/results/h200-tune)."""
    config, gpus = h200
    wide = plan(config, gpus, max_model_len=32768, vllm_args={"max-num-batched-tokens": 16384})
    assert wide["max_num_batched_tokens"] == 16384
    assert abs(wide["kv_cache_tokens"] / 171090 - 1) < 0.02
    with pytest.raises(PlanError, match="max-num-batched-tokens 'lots'"):
        plan(config, gpus, vllm_args={"max-num-batched-tokens": "lots"})


def test_a_bad_slo_stops_the_plan_naming_it(h200):
    with pytest.raises(PlanError, match=r"vllm_fleet_slo.tpot_mean_ms: 0.05 milliseconds"):
        h200_plan(h200, slo={"ttft_p99_s": 2, "tpot_mean_ms": 0.05})


def made_up(capacities: dict) -> dict:
    """measure() for engines that each hold exactly their capacity (requests/s)."""
    def measure(name, rate, start):
        return {"rate": rate, "meets_slo": rate <= capacities[name], "start": start, "in_flight": rate * 2,
                "served_rate": rate, "output_throughput": 256.0 * rate, "p99_ttft_ms": 900.0, "mean_tpot_ms": 30.0}
    return measure


def replay(capacities: dict, calls: list | None = None):
    """(start, warm_up, measure, stop) of made-up engines; ``calls`` records their order."""
    calls = [] if calls is None else calls
    measure = made_up(capacities)

    def start(candidate):
        calls.append(("start", candidate["name"]))
        return candidate["name"], 1.0

    def point(name, rate, number):
        calls.append(("measure", name, rate, number))
        return measure(name, rate, number)
    return start, lambda name: calls.append(("warm up", name)), point, lambda name: calls.append(("stop", name))


CANDS = [{"name": "defaults", "settings": None, "why": "vLLM's"},
         {"name": "computed", "settings": {"max-model-len": 4096}, "why": "plan"},
         {"name": "batched-16384", "settings": {"max-model-len": 4096, "max-num-batched-tokens": 16384,
                                                "max-num-seqs": 64, "tensor-parallel-size": 1}, "why": "budget"}]
GRID = [1, 2, 4, 8]


def test_a_candidate_above_every_start_of_the_defaults_becomes_the_plan():
    calls = []
    starts = tuning.search(CANDS, GRID, SLO, *replay({"defaults": 4.0, "computed": 4.0, "batched-16384": 6.0},
                                                     calls), budget_starts=6, budget_seconds=1e9)
    # Screening, then the best and the defaults again, each searched from the bracket it found.
    assert [(s["candidate"], s["phase"], s["start"], s["capacity"]) for s in starts] == [
        ("defaults", "screen", 1, 4), ("computed", "screen", 1, 4), ("batched-16384", "screen", 1, 6.0),
        ("batched-16384", "repeat", 2, 6.0), ("defaults", "repeat", 2, 4)]
    assert [p["rate"] for p in starts[3]["points"]] == [6.0, 6.25]
    # Each start warms up before its first point and stops after its last; the k-th start of
    # every configuration measures with start number k (paired seeds).
    assert calls[:3] == [("start", "defaults"), ("warm up", "defaults"), ("measure", "defaults", 1, 1)]
    assert {c[3] for c in calls if c[0] == "measure" and c[1] == "defaults"} == {1, 2}
    assert [c[0] for c in calls].count("stop") == 5
    summary = tuning.summarize(CANDS, starts, SLO)
    assert (summary["verdict"], summary["winner"], summary["ratio"]) == ("tuned", "batched-16384", 1.5)
    assert summary["configurations"]["batched-16384"]["at_capacity"]["in_flight"] == 12.0
    rec = tuning.record(H200_PROFILE, SLO, WORKLOAD, summary, {"host": "gpu1"})
    # Only the settings the search varies: context and TP stay the plan's own.
    assert rec[H200_PROFILE]["settings"] == {"max-num-batched-tokens": 16384, "max-num-seqs": 64}
    assert rec[H200_PROFILE]["capacity_requests_per_s"] == {"defaults": 4, "computed": 4, "batched-16384": 6.0}
    picked = tuning.pick(rec, H200_PROFILE, SLO, WORKLOAD)
    assert picked["state"] == "tuned" and picked["settings"]["max-num-batched-tokens"] == 16384
    other = tuning.pick(rec, H200_PROFILE, dict(SLO, ttft_p99_s=1.0), WORKLOAD)
    assert other["state"] == "computed" and "were measured for SLO" in other["why"]
    assert "no tuned settings for nvidia-a100" in tuning.pick(rec, "nvidia-a100-x1/m/vllm-0.25.1", SLO,
                                                              WORKLOAD)["why"]


def test_one_start_of_a_candidate_or_a_gain_within_the_resolution_keeps_the_plan():
    once = tuning.search(CANDS, GRID, SLO, *replay({"defaults": 4.0, "computed": 4.0, "batched-16384": 6.0}),
                         budget_starts=3, budget_seconds=1e9)
    summary = tuning.summarize(CANDS, once, SLO)
    assert summary["verdict"] == "tie" and "it ran 1 start: a candidate needs two to win" in summary["why"]
    rows = {"defaults": {"capacity": 4.0, "capacities": [4.0, 4.1], "starts": 2, "at_capacity": {}},
            "batched-16384": {"capacity": 4.25, "capacities": [4.25, 4.3], "starts": 2,
                              "at_capacity": {"output_throughput": 1.0}}}
    assert tuning.choose(rows)["verdict"] == "tie"  # 4.25 is within 5 % of the defaults' best start (4.1)
    rows["batched-16384"]["capacity"] = 4.4
    assert tuning.choose(rows)["verdict"] == "tuned"


def test_the_budget_skips_a_start_that_would_overrun_it():
    now = [0.0]
    start, warm_up, measure, stop = replay({"defaults": 4.0, "computed": 4.0, "batched-16384": 4.0})

    def slow_start(candidate):
        now[0] += 100
        return start(candidate)

    starts = tuning.search(CANDS, GRID, SLO, slow_start, warm_up, measure, stop, budget_starts=6,
                           budget_seconds=250, clock=lambda: now[0])
    assert [s["candidate"] for s in starts if "points" in s] == ["defaults", "computed"]
    assert starts[2]["skipped"] == "budget: 2 of 6 starts, 200 of 250 s spent"
    limited = tuning.search(CANDS, GRID, SLO, start, warm_up, measure, stop, budget_starts=2, budget_seconds=1e9)
    assert [s.get("skipped", "")[:6] for s in limited] == ["", "", "budget", "budget", "budget"]


def test_a_capacity_at_the_top_of_the_grid_is_called_a_lower_bound():
    starts = tuning.search(CANDS, GRID, SLO, *replay({"defaults": 9.0, "computed": 2.0, "batched-16384": 9.0}),
                           budget_starts=3, budget_seconds=1e9, repeats=1)
    summary = tuning.summarize(CANDS, starts, SLO)
    rows = summary["configurations"]
    assert rows["defaults"]["held_at_top"] and not rows["computed"]["held_at_top"] and summary["verdict"] == "tie"
    assert tuning.table(summary)[2].startswith("| defaults | 8 or more (8) |")
    assert tuning.table(summary)[-1] == ("the SLO held at the grid's top rate for defaults, batched-16384: their "
                                         "capacity is at least that; give higher rates (tune_rates) to tell them "
                                         "apart")


def test_a_tuned_record_joins_the_plan_under_the_operators_flags(h200):
    config, gpus = h200
    records = {H200_PROFILE: {"slo": SLO, "workload": WORKLOAD, "verdict": "tuned", "why": "measured",
                              "method": tuning.METHOD,
                              "settings": {"max-num-batched-tokens": 16384, "max-num-seqs": 128},
                              "measured_on": {"host": "gpu1"}}}
    tuned = h200_plan(h200, tuned=records)
    assert tuned["tuning"]["state"] == "tuned"
    assert tuned["vllm_args"]["max-num-batched-tokens"] == 16384 and tuned["max_num_batched_tokens"] == 16384
    assert tuned["instances"][0]["args"]["max-num-seqs"] == 128
    mine = h200_plan(h200, tuned=records, vllm_args={"max-num-seqs": 64})
    assert mine["vllm_args"]["max-num-seqs"] == 64 and mine["vllm_args"]["max-num-batched-tokens"] == 16384
    assert "max-num-batched-tokens" not in h200_plan(h200)["vllm_args"]
    assert plan(config, gpus)["tuning"] == {"state": "computed", "settings": {},
                                            "why": "no vllm_fleet_slo: nothing to tune for"}


def test_the_shipped_records_are_sound_and_a_closed_loop_one_is_not_applied(h200):
    files = sorted(TUNED.glob("*.json"))
    assert files
    for path in files:
        (name, rec), = json.loads(path.read_text()).items()
        assert tuning.record_file(name) == path.name
        assert tuning.check_slo(rec["slo"]) == [] and tuning.check_workload(rec["workload"]) == []
        assert rec["verdict"] in tuning.VERDICTS and (rec["verdict"] == "tuned") == bool(rec["settings"])
    records = {k: v for path in files for k, v in json.loads(path.read_text()).items()}
    # The H200 record is the closed-loop climb's (bench/results/h200-tune): a tie, and of a
    # method whose figures are not capacity at SLO, so the plan stays computed and says why.
    state = h200_plan(h200, tuned=records)["tuning"]
    assert state["state"] == "computed" and state["profile"] == H200_PROFILE
    assert state["why"].startswith("the record for %s was measured by another method (closed-loop" % H200_PROFILE)
    assert json.loads((RESULTS / "summary.json").read_text())["verdict"] == records[H200_PROFILE]["verdict"]
