"""The SLO search (module_utils/tuning.py): the checks, the planner's candidates, the climb,
the budget, the verdict, the records preflight reads, replayed on the H200 search's own
`vllm bench serve` results (bench/results/h200-tune) and on made-up ones."""
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
    assert tuned["state"] == "computed" and tuned["levels"] == [16, 24, 32, 40, 48, 64, 96, 128]
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


def recorded_starts() -> list:
    """Every start of the H200 search, in the order of its runs (tune-run1.json ...)."""
    return [start for path in sorted(RESULTS.glob("tune-run*.json"))
            for start in json.loads(path.read_text())["starts"] if "points" in start]


def recorded():
    """(candidate -> level -> point, candidate -> seconds to healthy) of each candidate's
    first start on the H200 (the search's screening)."""
    points, ready = {}, {}
    for start in recorded_starts():
        if start["candidate"] not in points:
            points[start["candidate"]] = {p["concurrency"]: p for p in start["points"]}
            ready[start["candidate"]] = start["start_to_healthy_s"]
    return points, ready


def replay(points: dict, ready: dict | None = None):
    def start(candidate):
        return candidate["name"], (ready or {}).get(candidate["name"], 1.0)

    def measure(name, concurrency):
        return points[name][concurrency]
    return start, measure, lambda name: None


def test_the_h200_search_replayed_is_a_tie_at_32(h200):
    points, ready = recorded()
    cands = [c for c in h200_plan(h200)["tuning"]["candidates"] if c["name"] in points]
    levels = [32, 40, 48, 56, 64, 96, 128]  # the computed plan's run began at 32
    starts = tuning.search(cands, levels, SLO, *replay(points, ready), budget_starts=3, budget_seconds=1e9,
                           repeats=1)
    assert [(s["candidate"], s["capacity"]) for s in starts] == [("defaults", 32), ("computed", 32),
                                                                  ("batched-16384", 32)]
    # Each climb stopped at 40, the first level over the 2 s p99 TTFT (2,199-2,209 ms).
    assert all([p["concurrency"] for p in s["points"]] == [32, 40] for s in starts)
    summary = tuning.summarize(cands, starts, SLO, 32)
    assert summary["verdict"] == "tie" and summary["ratio"] == 1.0
    assert summary["configurations"]["defaults"]["goodput_at_target"] == pytest.approx(4.617, abs=1e-3)
    assert tuning.record(H200_PROFILE, SLO, WORKLOAD, summary, {})[H200_PROFILE]["settings"] == {}


def test_every_recorded_h200_start_holds_32_and_the_verdict_stays_a_tie(h200):
    """The repeats (runs 3 and 4): two starts each of the defaults and batched-16384."""
    starts = recorded_starts()
    cands = [c for c in h200_plan(h200)["tuning"]["candidates"] if c["name"] in {s["candidate"] for s in starts}]
    summary = tuning.summarize(cands, starts, SLO, 32)
    rows = summary["configurations"]
    assert {name: row["capacities"] for name, row in rows.items()} == {
        "defaults": [32, 32], "batched-16384": [32, 32], "computed": [32]}
    assert summary["verdict"] == "tie" and summary["ratio"] == 1.0
    assert rows["defaults"]["output_spread"] < 0.01 and rows["batched-16384"]["output_spread"] < 0.01
    # the shipped record says what these starts say
    shipped = json.loads((ROOT / "roles" / "preflight" / "files" / "tuned" / tuning.record_file(H200_PROFILE))
                         .read_text())[H200_PROFILE]
    assert shipped == dict(tuning.record(H200_PROFILE, SLO, WORKLOAD, summary, shipped["measured_on"])[H200_PROFILE])


def made_up(capacities: dict) -> dict:
    """Points where each candidate meets the SLO up to its capacity and breaks above it."""
    return {name: {c: {"concurrency": c, "completed": 2 * c, "failed": 0, "p99_ttft_ms": 1900 if c <= cap else 2100,
                       "mean_tpot_ms": 30.0, "output_throughput": 40.0 * c, "request_throughput": c / 7,
                       "request_goodput": c / 8}
                   for c in (8, 16, 24, 32, 40, 48)} for name, cap in capacities.items()}


CANDS = [{"name": "defaults", "settings": None, "why": "vLLM's"},
         {"name": "computed", "settings": {"max-model-len": 4096}, "why": "plan"},
         {"name": "batched-16384", "settings": {"max-model-len": 4096, "max-num-batched-tokens": 16384,
                                                "max-num-seqs": 64, "tensor-parallel-size": 1}, "why": "budget"}]


def test_a_candidate_above_every_start_of_the_defaults_becomes_the_plan():
    levels = [8, 16, 24, 32, 40, 48]
    starts = tuning.search(CANDS, levels, SLO, *replay(made_up({"defaults": 24, "computed": 24,
                                                                  "batched-16384": 40})),
                           budget_starts=6, budget_seconds=1e9)
    # Screening, then the best and the defaults again, each climbing from a step below its capacity.
    assert [(s["candidate"], s["phase"]) for s in starts] == [
        ("defaults", "screen"), ("computed", "screen"), ("batched-16384", "screen"),
        ("batched-16384", "repeat"), ("defaults", "repeat")]
    assert [p["concurrency"] for p in starts[3]["points"]] == [32, 40, 48]
    assert [p["concurrency"] for p in starts[4]["points"]] == [16, 24, 32]
    summary = tuning.summarize(CANDS, starts, SLO, 24)
    assert (summary["verdict"], summary["winner"], summary["ratio"]) == ("tuned", "batched-16384", 1.667)
    rec = tuning.record(H200_PROFILE, SLO, WORKLOAD, summary, {"host": "gpu1"})
    # Only the settings the search varies: context and TP stay the plan's own.
    assert rec[H200_PROFILE]["settings"] == {"max-num-batched-tokens": 16384, "max-num-seqs": 64}
    picked = tuning.pick(rec, H200_PROFILE, SLO, WORKLOAD)
    assert picked["state"] == "tuned" and picked["settings"]["max-num-batched-tokens"] == 16384
    other = tuning.pick(rec, H200_PROFILE, dict(SLO, ttft_p99_s=1.0), WORKLOAD)
    assert other["state"] == "computed" and "were measured for SLO" in other["why"]
    assert "no tuned settings for nvidia-a100" in tuning.pick(rec, "nvidia-a100-x1/m/vllm-0.25.1", SLO,
                                                              WORKLOAD)["why"]


def test_one_start_of_the_defaults_as_good_as_the_candidate_keeps_the_plan():
    """The defaults' capacity spread over starts: the candidate must beat the best of them."""
    points = made_up({"defaults": 24, "computed": 24, "batched-16384": 32})
    rows = {"defaults": {"capacity": 24, "capacities": [24, 32], "goodput_at_target": 3.0,
                         "at_capacity": {"output_throughput": 960.0}},
            "batched-16384": {"capacity": 32, "capacities": [32, 32], "goodput_at_target": 3.0,
                              "at_capacity": {"output_throughput": 1280.0}}}
    assert tuning.choose(rows)["verdict"] == "tie"
    assert points["defaults"][24]["p99_ttft_ms"] < 2000 < points["defaults"][32]["p99_ttft_ms"]


def test_the_budget_skips_a_start_that_would_overrun_it():
    now = [0.0]

    def start(candidate):
        now[0] += 100
        return candidate["name"], 100.0

    points = made_up({"defaults": 24, "computed": 24, "batched-16384": 24})
    starts = tuning.search(CANDS, [8, 16, 24, 32], SLO, start, lambda n, c: points[n][c], lambda n: None,
                           budget_starts=6, budget_seconds=250, clock=lambda: now[0])
    assert [s["candidate"] for s in starts if "points" in s] == ["defaults", "computed"]
    assert starts[2]["skipped"] == "budget: 2 of 6 starts, 200 of 250 s spent"
    limited = tuning.search(CANDS, [8, 16, 24, 32], SLO, *replay(points), budget_starts=2, budget_seconds=1e9)
    assert [s.get("skipped", "")[:6] for s in limited] == ["", "", "budget", "budget", "budget"]


def test_a_failed_request_breaks_the_level():
    point = {"completed": 10, "failed": 1, "p99_ttft_ms": 10.0, "mean_tpot_ms": 1.0}
    assert not tuning.meets(point, SLO)
    assert tuning.meets(dict(point, failed=0), SLO)


def test_a_tuned_record_joins_the_plan_under_the_operators_flags(h200):
    config, gpus = h200
    records = {H200_PROFILE: {"slo": SLO, "workload": WORKLOAD, "verdict": "tuned", "why": "measured",
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


def test_the_shipped_records_are_sound_and_the_h200_one_says_tie(h200):
    files = sorted(TUNED.glob("*.json"))
    assert files
    for path in files:
        (name, rec), = json.loads(path.read_text()).items()
        assert tuning.record_file(name) == path.name
        assert tuning.check_slo(rec["slo"]) == [] and tuning.check_workload(rec["workload"]) == []
        assert rec["verdict"] in tuning.VERDICTS and (rec["verdict"] == "tuned") == bool(rec["settings"])
    records = {k: v for path in files for k, v in json.loads(path.read_text()).items()}
    state = h200_plan(h200, tuned=records)["tuning"]
    assert state["state"] == "computed" and state["profile"] == H200_PROFILE
    assert state["why"].startswith("measured for this SLO, and no candidate beat vLLM's defaults")
    assert json.loads((RESULTS / "summary.json").read_text())["verdict"] == records[H200_PROFILE]["verdict"]


def test_a_capacity_at_the_top_level_is_called_a_lower_bound():
    points = made_up({"defaults": 48, "computed": 24, "batched-16384": 48})
    starts = tuning.search(CANDS, [8, 16, 24, 32, 40, 48], SLO, *replay(points), budget_starts=3,
                           budget_seconds=1e9, repeats=1)
    summary = tuning.summarize(CANDS, starts, SLO, 16)
    assert summary["held_at_top"] == ["defaults", "batched-16384"] and summary["verdict"] == "tie"
    assert tuning.table(summary)[-1] == ("the SLO held at the top level (48) for defaults, batched-16384: their "
                                         "capacity is at least that; climb higher (tune_levels) to tell them apart")
