"""Capacity at SLO, open-loop (module_utils/capacity.py): a point judged over its window from
the per-request fields `vllm bench serve --save-detailed` writes (vLLM 0.25's: no
``latencies``), and the grid-then-bisection search."""
from __future__ import annotations

import math

import numpy
import pytest
from ansible.module_utils import capacity

SLO = {"ttft_p99_s": 2.0, "tpot_mean_ms": 50.0}


def detailed(rate=4.0, seconds=110.0, ttft=lambda t: 0.2, tpot=0.03, output=256, fail=(), skew=1.0):
    """A --save-detailed result: requests every 1/rate s (``skew`` > 1: the client sends
    slower than asked), each with ``ttft(t)`` at its send time t and ``tpot`` a token."""
    count = int(rate * seconds)
    starts = [5000.0 + i / rate * skew for i in range(count)]
    ttfts = [ttft(s - starts[0]) for s in starts]
    return {"start_times": starts, "ttfts": ttfts, "itls": [[tpot] * (output - 1) for _ in starts],
            "output_lens": [0 if i in fail else output for i in range(count)],
            "errors": ["Server disconnected" if i in fail else "" for i in range(count)]}


def test_a_steady_point_meets_the_slo_and_reports_its_window():
    result = detailed(ttft=lambda t: 0.1 + (t % 7) / 10)
    point = capacity.judge(result, 4.0, SLO)
    assert point["meets_slo"] is True and point["why"] == "meets the SLO"
    window = [t for s, t in zip(result["start_times"], result["ttfts"]) if s >= 5000.0 + capacity.RAMP_S]
    assert point["completed"] == len(window) == 360
    assert point["p99_ttft_ms"] == pytest.approx(numpy.percentile(window, 99) * 1000, abs=0.1)
    assert point["mean_tpot_ms"] == 30.0
    # Little's law: 4 requests/s x (mean TTFT + 255 x 30 ms)
    assert point["in_flight"] == pytest.approx(4.0 * (numpy.mean(window) + 255 * 0.03), abs=0.1)
    assert point["sent_rate"] == 4.0 and point["offered_rate"] == 4.0


def test_what_the_ramp_holds_is_left_out():
    """A new engine's first seconds are slow (the H200's were): only the window counts."""
    slow_start = detailed(ttft=lambda t: 12.0 if t < capacity.RAMP_S - 1 else 0.2)
    assert capacity.judge(slow_start, 4.0, SLO)["meets_slo"] is True
    late = detailed(ttft=lambda t: 12.0 if t < capacity.RAMP_S + 5 else 0.2)
    point = capacity.judge(late, 4.0, SLO)
    assert point["meets_slo"] is False and point["why"].startswith("p99 TTFT 12000 ms > 2000 ms")


@pytest.mark.parametrize("result, why", [
    (detailed(fail={50}), "1 requests failed"),
    (detailed(fail={3}), "1 requests failed"),  # a failure in the ramp still fails the point
    (detailed(ttft=lambda t: 2.5), "p99 TTFT 2500 ms > 2000 ms"),
    (detailed(tpot=0.051), "mean TPOT 51.0 ms > 50 ms"),
    (detailed(skew=1.05), "the client sent 3.81 req/s of the 4 asked"),
    # a backlog: each request waits 0.4 s longer for every second after the first, so
    # requests finish more slowly than they arrive
    (detailed(ttft=lambda t: 0.4 * t), "the engine finished"),
])
def test_each_way_a_point_breaks_is_named(result, why):
    point = capacity.judge(result, 4.0, dict(SLO, ttft_p99_s=600.0) if "engine" in why else SLO)
    assert point["meets_slo"] is False
    assert why in point["why"]


def test_a_backlog_is_a_served_rate_below_the_arrivals():
    point = capacity.judge(detailed(ttft=lambda t: t / 2.5), 4.0, dict(SLO, ttft_p99_s=600.0))
    assert point["served_rate"] < 0.97 * point["offered_rate"]
    assert point["why"] == "the engine finished %.2f req/s of the %.2f that arrived" % (
        point["served_rate"], point["offered_rate"])


def test_the_two_ends_of_a_short_window_are_counting_not_a_backlog():
    """CI's serve run at 2 requests/s (window 15 s): the first request of the window was
    faster than the median and finished before the shifted window, the last slower and
    after it; 28 of 30 counted is no backlog.  Four short of 30 (two more that finish
    after the window) is more than counting and 3 % can explain."""
    edges = {2.0: 0.1, 16.5: 0.9}
    short = detailed(rate=2.0, seconds=17.0, output=8, ttft=lambda t: edges.get(t, 0.5))
    point = capacity.judge(short, 2.0, SLO, ramp_s=2.0)
    assert (point["offered_rate"], point["served_rate"]) == (2.0, round(28 / 14.5, 3))
    assert point["meets_slo"] is True, point["why"]
    edges.update({15.5: 3.0, 16.0: 3.0})
    point = capacity.judge(detailed(rate=2.0, seconds=17.0, output=8, ttft=lambda t: edges.get(t, 0.5)),
                           2.0, dict(SLO, ttft_p99_s=600.0), ramp_s=2.0)
    assert point["why"] == "the engine finished 1.79 req/s of the 2.00 that arrived"


def test_the_latencies_vllm_saves_are_used_when_there():
    result = dict(detailed(), latencies=[10.0] * 440)
    assert capacity.judge(result, 4.0, SLO)["mean_latency_s"] == 10.0
    assert capacity.judge(detailed(), 4.0, SLO)["mean_latency_s"] == pytest.approx(0.2 + 255 * 0.03)


def test_a_result_without_detail_or_with_too_few_requests_is_refused():
    with pytest.raises(capacity.CapacityError, match="no per-request 'start_times': run `vllm bench serve` with "
                                                     "--save-detailed"):
        capacity.judge({"completed": 10, "failed": 0}, 4.0, SLO)
    with pytest.raises(capacity.CapacityError, match="5 completed requests after the 20 s ramp"):
        capacity.judge(detailed(rate=0.2, seconds=45), 0.2, SLO)


@pytest.mark.parametrize("rates, ramp_s, window_s, problems", [
    ([0.25, 1], 20, 90, []),
    ([2], 0, 10, []),
    ([0.2, 1], 20, 90, ["w: 90 s at 0.2 requests/s is 18 requests; a point needs at least 20 in its window to "
                        "judge a p99"]),
    ([1], -1, 0, ["r: -1 is not a number of seconds >= 0", "w: 0 is not a number of seconds >= 1"]),
    ([1], True, "90", ["r: True is not a number of seconds >= 0", "w: '90' is not a number of seconds >= 1"]),
])
def test_a_window_too_short_to_judge_a_p99_is_named(rates, ramp_s, window_s, problems):
    assert capacity.check_window(rates, ramp_s, window_s, ("r", "w")) == problems


def test_a_point_sends_its_rate_for_the_ramp_and_the_window_with_its_own_seed():
    args = capacity.bench_args({"input_len": 1024, "output_len": 256}, 4.5, capacity.seed(2, 4.5))
    flags = dict(zip(args[::1], args[1:] + [None]))
    assert flags["--request-rate"] == "4.5" and flags["--burstiness"] == "1.0"
    assert flags["--num-prompts"] == str(math.ceil(4.5 * (capacity.RAMP_S + capacity.WINDOW_S)))
    assert flags["--random-range-ratio"] == "0.25" and flags["--num-warmups"] == "0"
    assert "--save-detailed" in args and "--ignore-eos" in args and "--max-concurrency" not in args
    # paired: the same start number and rate give two configurations the same prompts
    assert int(flags["--seed"]) == capacity.seed(2, 4.5)
    assert len({capacity.seed(1, 4.5), capacity.seed(2, 4.5), capacity.seed(1, 4.75)}) == 3


def threshold(limit):
    """measure() of an engine that holds exactly ``limit`` requests/s."""
    return lambda rate: {"rate": rate, "meets_slo": rate <= limit, "in_flight": rate * 2}


def test_the_search_climbs_the_grid_then_bisects_to_its_resolution():
    found = capacity.find(threshold(5.3), [1, 2, 4, 8])
    assert [p["rate"] for p in found["points"]] == [1, 2, 4, 8, 6.0, 5.0, 5.5, 5.25]
    assert found["capacity"] == 5.25 and found["first_failure"] == 5.5
    assert (found["first_failure"] - found["capacity"]) / found["capacity"] <= capacity.RESOLUTION
    assert found["in_flight_at_capacity"] == 10.5 and found["held_at_top"] is False


def test_a_first_rate_that_fails_is_halved_and_a_grid_that_holds_is_a_lower_bound():
    found = capacity.find(threshold(0.6), [2, 4])
    assert [p["rate"] for p in found["points"]][:4] == [2, 2, 1.0, 0.5]
    assert 0.5 <= found["capacity"] <= 0.6
    assert capacity.find(threshold(0.01), [2], halvings=2)["capacity"] == 0.0
    top = capacity.find(threshold(100), [1, 2])
    assert top["capacity"] == 2 and top["held_at_top"] is True and top["first_failure"] is None


def test_a_grid_that_holds_at_its_top_climbs_until_a_rate_fails_then_bisects():
    """Run 19: 0.55 and 0.65 held and the search ended with its limit unbracketed."""
    found = capacity.find(threshold(0.7), [0.55, 0.65], climbs=2)
    assert [p["rate"] for p in found["points"]] == [0.55, 0.65, 0.812, 0.731, 0.691, 0.711]
    assert found["capacity"] == 0.691 and found["first_failure"] == 0.711 and found["held_at_top"] is False
    # climbs bounded: an engine above every climb is still a lower bound
    high = capacity.find(threshold(100), [1, 2], climbs=2)
    assert [p["rate"] for p in high["points"]] == [1, 2, 2.5, 3.125] and high["held_at_top"] is True
    # a grid that failed within itself never climbs
    assert 8 not in [p["rate"] for p in capacity.find(threshold(3), [1, 2, 4], climbs=2)["points"]]


def test_a_first_point_that_fails_is_measured_again_before_it_counts():
    """Run 10: the first point after the warm-up failed on stalls of the whole engine that
    no later point showed.  An engine that stalls only on its first measured traffic gets
    its capacity; one that fails twice is bounded there, one point later."""
    calls = []

    def stalls_once(rate):
        calls.append(rate)
        return {"rate": rate, "meets_slo": len(calls) > 1 and rate <= 0.7, "in_flight": rate}
    found = capacity.find(stalls_once, [0.6, 0.75], known=(None, 0.85))
    assert [(p["rate"], p.get("again", False)) for p in found["points"]][:3] == [
        (0.6, False), (0.6, True), (0.75, False)]
    assert found["capacity"] >= 0.6 and found["first_failure"] <= 0.75
    twice = capacity.find(threshold(0.5), [0.6, 0.75])
    assert [p["rate"] for p in twice["points"]][:3] == [0.6, 0.6, 0.3]
    # a first point that holds is not measured again
    assert [p["rate"] for p in capacity.find(threshold(0.7), [0.6, 0.75])["points"]][:2] == [0.6, 0.75]


def test_a_bracket_measured_before_is_where_the_search_begins():
    """Run 5 held 5.5, run 3 failed 6.5: this start measures only inside that bracket."""
    found = capacity.find(threshold(5.8), [5.0, 6.0, 7.0], known=(5.5, 6.5), recheck_first=False)
    assert [p["rate"] for p in found["points"]] == [6.0, 5.75]
    assert found["capacity"] == 5.75 and found["first_failure"] == 6.0
    held = capacity.find(threshold(6.4), [6.0], known=(5.5, 6.5))
    assert [p["rate"] for p in held["points"]] == [6.0, 6.25] and held["capacity"] == 6.25
    assert held["first_failure"] == 6.5 and held["held_at_top"] is False
    # run 7 failed 0.85 at 8192/256 and nothing there has held yet: the grid below it, then
    # bisection up to that failure
    below = capacity.find(threshold(0.82), [0.6, 0.75], known=(None, 0.85))
    assert [p["rate"] for p in below["points"]] == [0.6, 0.75, 0.8, 0.825]
    assert below["capacity"] == 0.8 and below["first_failure"] == 0.825 and below["held_at_top"] is False
