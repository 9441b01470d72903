"""Capacity at SLO, measured open-loop: how many requests per second an engine holds while
p99 time to first token and mean time per output token stay within the objectives.

Why open-loop: a closed loop (``--max-concurrency c`` with every prompt sent at t = 0)
measures how long one burst of ``c`` prompts takes to prefill, not a steady state; every
configuration then ties (the project's first H200 search did).  Here each point is
``vllm bench serve --request-rate RATE --burstiness 1.0`` (Poisson arrivals), lengths
drawn around the workload (``--random-range-ratio``), a seed of its own, no warm-up
copies of one prompt, ``--save-detailed`` so that the first ``ramp_s`` seconds of
arrivals are left out of every figure.

A point passes when, over its window: no request failed, p99 TTFT and mean TPOT meet the
SLO, the client sent at the rate asked (>= ``KEPT_UP`` of it) and the engine finished
requests as fast as they came (completions per second over the window, shifted by the
median latency, >= ``KEPT_UP`` of the arrivals per second, less ``EDGE_REQUESTS``: a
request at either end of the window is counted there or not by its latency against the
median, so a window short by that many is counting, not a backlog).  Capacity is the highest
passing rate: a coarse grid upward, then bisection between the last pass and the first
failure until they are within ``resolution`` of each other.  Concurrency in flight beside
it is Little's law (rate x mean latency).

Plain Python, no Ansible imports: the tune role's runner (``tuning_host``), the GPU bench
(``bench/gpu_rehearsal.py``) and the unit tests all use it.
"""
from __future__ import annotations

import math

KEPT_UP = 0.97
RANGE_RATIO = 0.25
RAMP_S = 20.0
WINDOW_S = 90.0
RESOLUTION = 0.05
# The step above a grid that held at its top (find's ``climbs``): a quarter more each time.
CLIMB = 1.25
# Completions a window may miss at its two ends without that meaning a backlog: one each.
EDGE_REQUESTS = 2
# Completed requests a window needs before its p99 is judged.
MIN_JUDGED = 20


class CapacityError(ValueError):
    """A result that cannot be judged (too few requests in its window, no detail)."""


def check_window(rates: list, ramp_s, window_s, names: tuple = ("ramp_s", "window_s")) -> list:
    """Problems with a point's ramp and window (``names``: the variables that set them, named
    in each problem), [] when sound: the window must hold ``MIN_JUDGED`` requests at the
    lowest of ``rates`` (requests/s) for its p99 to be judged.  A caller whose rates are not
    sound passes [] and gets the ramp's and window's own checks alone."""
    problems = ["%s: %r is not a number of seconds >= %d" % (name, value, least)
                for name, value, least in ((names[0], ramp_s, 0), (names[1], window_s, 1))
                if isinstance(value, bool) or not isinstance(value, (int, float)) or value < least]
    if not problems and rates and min(rates) * window_s < MIN_JUDGED:
        problems.append("%s: %g s at %g requests/s is %d requests; a point needs at least %d in its window to "
                        "judge a p99" % (names[1], window_s, min(rates), min(rates) * window_s, MIN_JUDGED))
    return problems


def prompts(rate: float, ramp_s: float = RAMP_S, window_s: float = WINDOW_S) -> int:
    """Requests for one point: the ramp and the measured window at ``rate`` per second."""
    return max(1, math.ceil(rate * (ramp_s + window_s)))


def seed(start: int, rate: float) -> int:
    """A point's seed: fresh for every rate and every start, the same for the same start
    number and rate of two configurations (their comparison is paired)."""
    return 1_000_000 * int(start) + int(round(rate * 1000))


def bench_args(workload: dict, rate: float, point_seed: int, *, ramp_s: float = RAMP_S,
               window_s: float = WINDOW_S, range_ratio: float = RANGE_RATIO) -> list:
    """The `vllm bench serve` flags of one open-loop point (the caller adds the server's
    URL, model, tokenizer and where the result goes)."""
    return ["--dataset-name", "random", "--random-input-len", str(workload["input_len"]),
            "--random-output-len", str(workload["output_len"]), "--random-range-ratio", "%g" % range_ratio,
            "--ignore-eos", "--request-rate", "%g" % rate, "--burstiness", "1.0",
            "--num-prompts", str(prompts(rate, ramp_s, window_s)), "--seed", str(point_seed),
            "--num-warmups", "0", "--percentile-metrics", "ttft,tpot,itl,e2el", "--save-result", "--save-detailed"]


def _percentile(values: list, q: float) -> float:
    """numpy's default (linear) percentile, as `vllm bench serve` reports it."""
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def judge(result: dict, rate: float, slo: dict, *, ramp_s: float = RAMP_S, kept_up: float = KEPT_UP) -> dict:
    """One point from a ``--save-detailed`` result: the figures over its window (arrivals
    after the first ``ramp_s`` seconds) and whether it meets the SLO at ``rate``."""
    try:
        starts, ttfts, outputs, errors = (result[key] for key in ("start_times", "ttfts", "output_lens", "errors"))
        # vLLM 0.25 saves each request's inter-token latencies but not its latency.
        latencies = result.get("latencies") or [ttft + sum(itl) for ttft, itl in zip(ttfts, result["itls"])]
    except KeyError as exc:
        raise CapacityError("the result has no per-request %s: run `vllm bench serve` with --save-detailed"
                            % exc) from None
    requests = [{"start": s, "ttft": t, "latency": lat, "output": o, "ok": not e and o > 0}
                for s, t, lat, o, e in zip(starts, ttfts, latencies, outputs, errors)]
    failed = sum(1 for r in requests if not r["ok"])
    sent = [r["start"] for r in requests]
    first, last = min(sent), max(sent)
    sent_rate = (len(sent) - 1) / (last - first) if last > first else 0.0
    window = [r for r in requests if r["start"] >= first + ramp_s]
    done = [r for r in window if r["ok"]]
    if len(done) < MIN_JUDGED:
        raise CapacityError("%d completed requests after the %g s ramp: too few to judge a p99 (send more "
                            "prompts or a longer window)" % (len(done), ramp_s))
    begin, end = min(r["start"] for r in window), max(r["start"] for r in window)
    span = end - begin
    median_latency = _percentile([r["latency"] for r in done], 50)
    finished = [r["start"] + r["latency"] for r in requests if r["ok"]]
    served = sum(1 for t in finished if begin + median_latency <= t <= end + median_latency)
    offered_rate = (len(window) - 1) / span if span > 0 else 0.0
    served_rate = served / span if span > 0 else 0.0
    tpots = [(r["latency"] - r["ttft"]) / (r["output"] - 1) for r in done if r["output"] > 1]
    mean_latency = sum(r["latency"] for r in done) / len(done)
    point = {
        "rate": rate, "completed": len(done), "failed": failed, "window_s": round(span, 1),
        "sent_rate": round(sent_rate, 3), "offered_rate": round(offered_rate, 3),
        "served_rate": round(served_rate, 3),
        "p99_ttft_ms": round(_percentile([r["ttft"] for r in done], 99) * 1000, 1),
        "mean_ttft_ms": round(sum(r["ttft"] for r in done) / len(done) * 1000, 1),
        "mean_tpot_ms": round(sum(tpots) / len(tpots) * 1000, 2) if tpots else None,
        "mean_latency_s": round(mean_latency, 3),
        "in_flight": round(offered_rate * mean_latency, 1),
        "output_throughput": round(sum(r["output"] for r in done) / span, 1) if span > 0 else None,
    }
    reasons = []
    if failed:
        reasons.append("%d requests failed" % failed)
    if point["p99_ttft_ms"] > slo["ttft_p99_s"] * 1000.0:
        reasons.append("p99 TTFT %.0f ms > %.0f ms" % (point["p99_ttft_ms"], slo["ttft_p99_s"] * 1000.0))
    if point["mean_tpot_ms"] is not None and point["mean_tpot_ms"] > slo["tpot_mean_ms"]:
        reasons.append("mean TPOT %.1f ms > %g ms" % (point["mean_tpot_ms"], slo["tpot_mean_ms"]))
    if sent_rate < kept_up * rate:
        reasons.append("the client sent %.2f req/s of the %g asked" % (sent_rate, rate))
    if served + EDGE_REQUESTS < kept_up * offered_rate * span:
        reasons.append("the engine finished %.2f req/s of the %.2f that arrived" % (served_rate, offered_rate))
    point["meets_slo"] = not reasons
    point["why"] = "; ".join(reasons) or "meets the SLO"
    return point


def find(measure, grid: list, *, resolution: float = RESOLUTION, halvings: int = 3, climbs: int = 0,
         known: tuple = (None, None), recheck_first: bool = True) -> dict:
    """The highest passing rate.  ``measure(rate) -> judged point``.  Upward through
    ``grid`` until a point fails; then bisection between the last pass and the first
    failure until they are within ``resolution`` (relative).  When the grid's first rate
    fails, halve it (at most ``halvings`` times) to find a pass first.  ``known``: a
    passing and a failing rate measured before (earlier starts of the same configuration):
    the search begins from that bracket, measuring no grid rate outside it (the caller
    records which bounds were known).  ``recheck_first``: the first point measured, when it
    fails, is measured once more (``again`` in the second) and the second counts: on the
    H200 the first point after an engine's warm-up failed on stalls of the whole engine
    that no later point showed (bench/results/h200-capacity/, run 10), so a failure on an
    engine's first measured traffic is not trusted alone.  ``climbs``: when the whole grid
    passes, raise the rate by ``CLIMB`` at most that many times until a point fails (run 19
    held at the top of its grid and ended, its limit unbracketed, with device time left).
    Returns the capacity (0.0 when nothing passed), the bracket, every point in the order
    run, and ``held_at_top`` when every rate measured passed (capacity is at least that)."""
    points, grid = [], sorted(grid)
    passed, failed = known

    def run(rate):
        point = measure(rate)
        points.append(point)
        if recheck_first and len(points) == 1 and not point["meets_slo"]:
            point = dict(measure(rate), again=True)
            points.append(point)
        return point["meets_slo"]

    for rate in [r for r in grid if (passed is None or r > passed) and (failed is None or r < failed)]:
        if run(rate):
            passed = rate
        else:
            failed = rate
            break
    for _ in range(climbs if failed is None and passed is not None else 0):
        rate = round(passed * CLIMB, 3)
        if not run(rate):
            failed = rate
            break
        passed = rate
    if passed is None and failed is not None:
        rate = failed
        for _ in range(halvings):
            rate /= 2
            if run(rate):
                passed = rate
                break
            failed = rate
    while passed is not None and failed is not None and (failed - passed) / passed > resolution:
        middle = round((passed + failed) / 2, 3)
        if run(middle):
            passed = middle
        else:
            failed = middle
    return {"capacity": passed or 0.0, "first_failure": failed, "points": points,
            "held_at_top": failed is None,
            "in_flight_at_capacity": next((p["in_flight"] for p in points if p["rate"] == passed), None)}
