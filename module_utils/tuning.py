"""The SLO-tuned plan: the operator's latency objective and workload, the candidate engine
settings the planner proposes for them, a bounded measured search, the winner, and the
tuned-settings records preflight reads.

One code path for every runner: ``search()`` takes ``start``, ``warm_up``, ``measure`` and
``stop`` callables, so the capacity rehearsal on an operator's host (``library/vllm_tune.py``),
the GPU bench (``bench/gpu_rehearsal.py``) and the unit tests all run the same candidates,
search, budget and choice; what a point is and how capacity is found is ``capacity``.

*Capacity at SLO* of a start is the highest request rate (requests/s, Poisson arrivals)
whose window meets both objectives (p99 time to first token, mean time per output token)
with no failed request and the engine keeping up (``capacity.judge``), found by a grid
then bisection (``capacity.find``).  A configuration's capacity is the lowest over its
starts (what holds on every start).  The k-th start of every configuration uses the same
seeds (paired).  A candidate becomes the plan only when it has at least two starts and
its capacity is above every start of vLLM's defaults by more than the search's
resolution; otherwise the record says ``tie`` and the computed plan stays.
"""
from __future__ import annotations

import re
import time

from ansible.module_utils import capacity as capacity_search

# name -> (unit, lowest, highest): what the objectives mean and the values accepted.
SLO_FIELDS = {"ttft_p99_s": ("seconds", 0.01, 600.0), "tpot_mean_ms": ("milliseconds", 1.0, 10000.0)}
WORKLOAD_FIELDS = {"input_len": (1, 10_000_000), "output_len": (1, 1_000_000),
                   "target_concurrency": (1, 100_000)}
VERDICTS = ("tuned", "tie")
METHOD = "open-loop: Poisson arrivals, capacity at SLO in requests/s"
# The plan's grid of request rates: doubling from a quarter request a second, so that a
# CPU engine and an 8-GPU host both reach their first failure in a few points; the
# search stops at the first failure and bisects.  tune_rates starts it elsewhere.
RATES = [0.25 * 2 ** k for k in range(10)]


class TuneError(ValueError):
    """Each message starts with the variable it is about."""


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_slo(slo, variable: str = "vllm_fleet_slo") -> list:
    """Problems with the latency objective, each naming ``variable``; [] when it is sound."""
    if not isinstance(slo, dict) or not slo:
        return ["%s: %r must be a mapping with %s" % (variable, slo, " and ".join(SLO_FIELDS))]
    problems = ["%s.%s: not an objective this project measures (%s)" % (variable, key, ", ".join(SLO_FIELDS))
                for key in slo if key not in SLO_FIELDS]
    for key, (unit, low, high) in SLO_FIELDS.items():
        value = slo.get(key)
        if not _number(value):
            problems.append("%s.%s: %r is not a number of %s" % (variable, key, value, unit))
        elif not low <= value <= high:
            hint = ""
            if key == "tpot_mean_ms" and 0 < value < low:
                hint = " (it is in milliseconds: 0.05 s is 50)"
            elif key == "ttft_p99_s" and value > high:
                hint = " (it is in seconds: 2000 ms is 2)"
            problems.append("%s.%s: %r %s is out of range: %s <= value <= %s%s"
                            % (variable, key, value, unit, low, high, hint))
    return problems


def check_workload(workload, variable: str = "vllm_fleet_workload") -> list:
    """Problems with the workload shape (input_len, output_len, target_concurrency)."""
    if not isinstance(workload, dict) or not workload:
        return ["%s: %r must be a mapping with %s" % (variable, workload, ", ".join(WORKLOAD_FIELDS))]
    problems = ["%s.%s: not a workload field (%s)" % (variable, key, ", ".join(WORKLOAD_FIELDS))
                for key in workload if key not in WORKLOAD_FIELDS]
    for key, (low, high) in WORKLOAD_FIELDS.items():
        value = workload.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            problems.append("%s.%s: %r is not a whole number from %d to %d" % (variable, key, value, low, high))
    return problems


def profile(gpu_name: str, gpu_count: int, model: str, vllm_version: str) -> str:
    """The hardware profile a tuned record belongs to: GPU model and count, the model (its
    name without the organisation, so a catalogue entry and its repository agree), vLLM."""
    slug = re.sub(r"[^a-z0-9]+", "-", gpu_name.lower()).strip("-")
    return "%s-x%d/%s/vllm-%s" % (slug, gpu_count, model.rsplit("/", 1)[-1], vllm_version)


def record_file(profile_name: str) -> str:
    """The file name of a profile's record in roles/preflight/files/tuned/."""
    return profile_name.replace("/", "--") + ".json"


def next_power_of_two(value: int) -> int:
    return 1 << max(0, int(value) - 1).bit_length()


def candidates(computed: dict, replan, workload: dict, fp8_kv: bool) -> tuple:
    """(candidates to measure, candidates pruned with the reason), defaults and the computed
    plan first.  ``computed`` is the plan (``vllm_planner.plan``); ``replan(kv_cache_dtype,
    vllm_args, max_model_len)`` plans again with other settings (raising ValueError when
    they do not fit), so every candidate is sized by the planner's own figures.

    The dimensions: the chunked-prefill budget (``max-num-batched-tokens`` at 2x and 4x the
    release's default: fewer, larger prefill steps for a burst of long prompts), an FP8 KV
    cache (only where the GPUs have FP8 and the model-dtype cache cannot hold the target
    concurrency: it costs 5-14 % throughput where the cache is not full), and on every tuned candidate
    ``max-num-seqs`` cut to four times the target concurrency (rounded up to a power of two:
    fewer CUDA graphs to capture, a shorter start).  A
    candidate is pruned when its KV cache cannot hold the target concurrency at the
    workload's length, or when it does not fit at all."""
    length = workload["input_len"] + workload["output_len"]
    seqs = next_power_of_two(4 * workload["target_concurrency"])
    base_args = dict(computed["vllm_args"])
    default_batched = int(computed["max_num_batched_tokens"])
    proposals = [("computed", {}, "the plan as computed (context %d)" % computed["max_model_len"])]
    for factor in (2, 4):
        proposals.append(("batched-%d" % (default_batched * factor),
                          {"max-num-batched-tokens": default_batched * factor, "max-num-seqs": seqs},
                          "chunked-prefill budget %dx vLLM's %d; max-num-seqs %d" % (factor, default_batched, seqs)))
    held = {}
    for kv in ("auto", "fp8") if fp8_kv else ("auto",):
        try:
            held[kv] = replan(kv, base_args, length)["max_concurrency"]
        except ValueError:
            held[kv] = 0
    run, pruned = [{"name": "defaults", "settings": None, "why": "vLLM's own defaults (only the model and "
                    "the instance's own flags)"}], []
    if fp8_kv:
        fp8 = ("kv-fp8", {"kv-cache-dtype": "fp8", "max-num-seqs": seqs},
               "FP8 KV cache: holds %.0f requests of %d tokens against %.0f" % (held["fp8"], length, held["auto"]))
        if held["auto"] < workload["target_concurrency"]:
            proposals.append(fp8)
        else:
            pruned.append({"name": fp8[0], "settings": dict(base_args, **fp8[1]),
                           "why": "not needed: the model-dtype KV cache holds %.0f requests of %d tokens, the "
                                  "target is %d, and an FP8 cache costs 5-14 %% throughput where it is not full"
                                  % (held["auto"], length, workload["target_concurrency"])})
    for name, change, why in proposals:
        args = dict(base_args, **change)
        kv = args.get("kv-cache-dtype", "auto")
        try:
            fit = replan(kv, args, length)
        except ValueError as exc:
            pruned.append({"name": name, "settings": args, "why": "does not fit: %s" % exc})
            continue
        if fit["max_concurrency"] < workload["target_concurrency"]:
            pruned.append({"name": name, "settings": args,
                           "why": "its KV cache holds %.1f requests of %d tokens, the target is %d"
                                  % (fit["max_concurrency"], length, workload["target_concurrency"])})
            continue
        run.append({"name": name, "settings": args, "why": why,
                    "kv_held_at_workload": round(fit["max_concurrency"], 1)})
    return run, pruned


def search(cands: list, grid: list, slo: dict, start, warm_up, measure, stop, *, budget_starts: int,
           budget_seconds: float, repeats: int = 2, resolution: float = capacity_search.RESOLUTION,
           clock=time.monotonic, log=lambda line, starts: None) -> list:
    """Every start of the search, in order.  Screening: each candidate once, defaults first,
    each searched from ``grid``.  Then, while the budget lasts, the best tuned candidate and
    the defaults again, alternating, ``repeats`` starts each in all, each searched from the
    bracket its last start found.  ``start(candidate) -> (handle, seconds to healthy)``,
    ``warm_up(handle)`` (unmeasured traffic), ``measure(handle, rate, start_number) ->
    capacity.judge point``, ``stop(handle)``.  A start is skipped (recorded, not run) when
    the budget of starts or seconds would be spent: the next start is expected to cost what
    the last one cost.  ``log(line, starts)`` after each start (a runner saves what it has)."""
    began, starts, last = clock(), [], 0.0
    numbers: dict = {}

    def one(cand: dict, rates: list, phase: str) -> None:
        nonlocal last
        ran = [s for s in starts if "points" in s]
        spent = clock() - began
        if len(ran) >= budget_starts or spent + last > budget_seconds:
            starts.append({"candidate": cand["name"], "phase": phase,
                           "skipped": "budget: %d of %d starts, %.0f of %.0f s spent"
                                      % (len(ran), budget_starts, spent, budget_seconds)})
            log("skip %s (%s)" % (cand["name"], starts[-1]["skipped"]), starts)
            return
        number = numbers[cand["name"]] = numbers.get(cand["name"], 0) + 1
        t0 = clock()
        handle, ready = start(cand)
        try:
            warm_up(handle)
            found = capacity_search.find(lambda rate: measure(handle, rate, number), rates, resolution=resolution)
        finally:
            stop(handle)
        last = clock() - t0
        starts.append(dict(found, candidate=cand["name"], phase=phase, start=number, start_to_healthy_s=ready))
        log("%s: healthy in %.0f s, capacity %g requests/s" % (cand["name"], ready, found["capacity"]), starts)

    for cand in cands:
        one(cand, grid, "screen")
    screened = {s["candidate"]: s for s in starts if "points" in s}
    tuned = [c for c in cands if c["name"] != "defaults" and c["name"] in screened]
    if "defaults" not in screened or not tuned:
        return starts
    best = max(tuned, key=lambda c: (screened[c["name"]]["capacity"], -cands.index(c)))
    for _ in range(repeats - 1):
        for cand in (best, cands[0]):
            first = screened[cand["name"]]
            bracket = [rate for rate in (first["capacity"], first["first_failure"]) if rate]
            one(cand, bracket or grid, "repeat")
    return starts


def summarize(cands: list, starts: list, slo: dict, resolution: float = capacity_search.RESOLUTION) -> dict:
    """Per candidate: capacity (lowest over its starts) and each start's, the figures of
    the points at that rate, concurrency in flight there (Little's law); and the verdict."""
    rows = {}
    for cand in cands:
        ran = [s for s in starts if s["candidate"] == cand["name"] and "points" in s]
        if not ran:
            continue
        caps = [s["capacity"] for s in ran]
        at_cap = [p for s in ran for p in s["points"] if p["rate"] == min(caps)]

        def mean(key):
            values = [p[key] for p in at_cap if p.get(key) is not None]
            return round(sum(values) / len(values), 3) if values else None

        rows[cand["name"]] = {
            "settings": cand["settings"], "why": cand["why"], "starts": len(ran), "capacities": caps,
            "capacity": min(caps), "held_at_top": any(s["held_at_top"] for s in ran),
            "start_to_healthy_s": [s["start_to_healthy_s"] for s in ran],
            "at_capacity": {key: mean(key) for key in ("served_rate", "output_throughput", "p99_ttft_ms",
                                                         "mean_tpot_ms", "in_flight")},
        }
    return {"slo": slo, "method": METHOD, "resolution": resolution, "configurations": rows,
            **choose(rows, resolution)}


def choose(rows: dict, resolution: float = capacity_search.RESOLUTION) -> dict:
    """The winner: the tuned candidate with the highest capacity (then output tokens/s
    there); it becomes the plan only when it ran at least two starts and its capacity (the
    lowest of them) is above every start of the defaults' by more than ``resolution``."""
    base = rows.get("defaults")
    tuned = {name: row for name, row in rows.items() if name != "defaults"}
    if not base or not tuned:
        return {"verdict": "tie", "winner": None, "ratio": None,
                "why": "nothing to compare: defaults or every candidate were not measured"}
    name, row = max(tuned.items(), key=lambda item: (item[1]["capacity"],
                                                     item[1]["at_capacity"]["output_throughput"] or 0))
    top = max(base["capacities"])
    ratio = round(row["capacity"] / top, 3) if top else None
    if row["starts"] >= 2 and row["capacity"] > top * (1 + resolution):
        return {"verdict": "tuned", "winner": name, "ratio": ratio,
                "why": "capacity at SLO %g requests/s in each of %d starts, against the defaults' %s"
                       % (row["capacity"], row["starts"], base["capacities"])}
    if row["starts"] < 2:
        because = "it ran %d start: a candidate needs two to win" % row["starts"]
    else:
        because = "not above every start of the defaults by more than the search's %g %% resolution" % (
            resolution * 100)
    return {"verdict": "tie", "winner": name, "ratio": ratio,
            "why": "the best candidate (%s) holds %g requests/s at the SLO, vLLM's defaults %s: %s, so the "
                   "computed plan stays" % (name, row["capacity"], base["capacities"], because)}


def table(summary: dict) -> list:
    """The summary as Markdown rows, one per configuration, and the verdict."""
    rows = ["| configuration | capacity at SLO, requests/s (each start) | in flight | output tok/s | p99 TTFT ms "
            "| mean TPOT ms | start to healthy s |", "|---|---|---|---|---|---|---|"]
    for name, row in summary["configurations"].items():
        cap = row["at_capacity"]
        rows.append("| %s | %g%s (%s) | %s | %s | %s | %s | %s |" % (
            name, row["capacity"], " or more" if row["held_at_top"] else "",
            ", ".join("%g" % c for c in row["capacities"]), cap["in_flight"], cap["output_throughput"],
            cap["p99_ttft_ms"], cap["mean_tpot_ms"], ", ".join("%.0f" % s for s in row["start_to_healthy_s"])))
    rows.append("verdict: %s (%s); ratio to the defaults' capacity: %s" % (summary["verdict"], summary["why"],
                                                                          summary["ratio"]))
    held = [name for name, row in summary["configurations"].items() if row["held_at_top"]]
    if held:
        rows.append("the SLO held at the grid's top rate for %s: their capacity is at least that; give higher "
                    "rates (tune_rates) to tell them apart" % ", ".join(held))
    return rows


def record(profile_name: str, slo: dict, workload: dict, summary: dict, measured_on: dict) -> dict:
    """The tuned-settings record for ``profile_name`` (roles/preflight/files/tuned/)."""
    winner = summary["winner"]
    settings = {}
    if summary["verdict"] == "tuned":
        settings = {key: value for key, value in summary["configurations"][winner]["settings"].items()
                    if key in ("max-num-batched-tokens", "max-num-seqs", "kv-cache-dtype")}
    return {profile_name: {"slo": slo, "workload": workload, "method": summary["method"],
                           "verdict": summary["verdict"], "settings": settings, "why": summary["why"],
                           "measured_on": measured_on,
                           "capacity_requests_per_s": {name: row["capacity"]
                                                       for name, row in summary["configurations"].items()}}}


def pick(records: dict, profile_name: str, slo: dict | None, workload: dict | None) -> dict:
    """What the plan says about tuning: ``state`` tuned (with the settings to apply) or
    computed (with why: no SLO, no record for the profile, another SLO or workload, a tie)."""
    if not slo:
        return {"state": "computed", "settings": {}, "why": "no vllm_fleet_slo: nothing to tune for"}
    found = (records or {}).get(profile_name)
    if not found:
        return {"state": "computed", "settings": {},
                "why": "no tuned settings for %s (playbooks/tune.yml measures them)" % profile_name}
    if found["slo"] != slo or found["workload"] != workload:
        return {"state": "computed", "settings": {},
                "why": "the tuned settings for %s were measured for SLO %s and workload %s, not %s and %s"
                       % (profile_name, found["slo"], found["workload"], slo, workload)}
    if found.get("method") != METHOD:
        return {"state": "computed", "settings": {}, "profile": profile_name,
                "why": "the record for %s was measured by another method (%s), not by capacity at SLO "
                       "(%s): measure again with playbooks/tune.yml" % (profile_name, found.get("method"), METHOD)}
    if found["verdict"] != "tuned":
        return {"state": "computed", "settings": {}, "profile": profile_name,
                "why": "measured for this SLO, and no candidate beat vLLM's defaults: %s" % found["why"]}
    return {"state": "tuned", "settings": dict(found["settings"]), "profile": profile_name,
            "why": found["why"], "measured_on": found["measured_on"]}
