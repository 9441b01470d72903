"""What playbooks/benchmark.yml runs and makes of the JSON files `vllm bench serve` wrote.

Two kinds of level: closed loop, a number of concurrent requests (``--max-concurrency``),
and open loop, a request rate: Poisson arrivals with lengths drawn around the workload's,
the ramp left out and the point judged against the SLO - the same flags and the same
judgement as `playbooks/tune.yml`'s search and the GPU bench (``capacity.bench_args``,
``capacity.judge``), so a rate the benchmark says holds is what the search would say.

One summary (a point per configuration, target and level), a printed table and a plot of
output throughput and p99 time to first token against the level, one line per
configuration, target and kind.  Plain Python; matplotlib only for the plot.

File names are ``<label>--<target>--c<concurrency>.json`` or ``...--r<rate>.json``
(``plan(...)`` checks the inputs that make them).
"""
from __future__ import annotations

import json
import os
import re

from ansible.module_utils import capacity
from ansible.module_utils.diagnose import instance_url

NAME = re.compile(r"^(?P<label>[a-z0-9][a-z0-9_-]*)--(?P<target>[A-Za-z0-9_.-]+)--"
                  r"(?:c(?P<concurrency>[0-9]+)|r(?P<rate>[0-9]+(?:\.[0-9]+)?))\.json$")
LABEL = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
KEYS = ("completed", "failed", "request_throughput", "output_throughput", "mean_ttft_ms", "p99_ttft_ms",
        "mean_tpot_ms", "p99_tpot_ms", "duration")


class BenchError(ValueError):
    """Each message starts with the variable it is about."""


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def plan(label: str, concurrency: list, input_len: int, output_len: int, prompts_per_level: int,
         plans: list, gateway: str, instances: list, allow_overload: bool, *, request_rate: list = (),
         seed: int = 0, ramp_s: float = capacity.RAMP_S, window_s: float = capacity.WINDOW_S,
         dataset: bool = False) -> dict:
    """The targets and the levels to run, each with its name (in the result's file name) and
    its own `vllm bench serve` flags.  ``gateway``: the gateway's URL (empty: the targets are
    ``instances``, this host's planned ones); ``plans``: every inference host's plan.  With
    ``request_rate`` the levels are open-loop rates (``ramp_s`` then ``window_s`` seconds of
    arrivals each) instead of ``concurrency``.  Refuses a concurrency above what the plan
    lets a target run at once (the ``max_num_seqs`` of the instances behind it) unless
    ``allow_overload``; a rate is the operator's own (the engine queues what it cannot
    take, and the judgement says so)."""
    problems = []
    fleet = sum(int(p.get("max_num_seqs") or 0) * len(p.get("instances") or []) for p in plans)
    if gateway:
        targets, target_capacity = [{"name": "gateway", "url": gateway}], fleet
    else:
        targets = [{"name": "%s" % inst["name"], "url": instance_url(inst["args"], int(inst["port"]))}
                   for inst in instances]
        target_capacity = min((int(p.get("max_num_seqs") or 0) for p in plans), default=0)
        if not targets:
            problems.append("benchmark_target: instances, and this host has no planned instance")
    if not isinstance(label, str) or not LABEL.match(label):
        problems.append("benchmark_label: %r must be 1-32 lowercase letters, digits, '_' or '-'" % (label,))
    rates = list(request_rate or [])
    if rates:
        if any(not _number(r) or not 0.001 <= r <= 10000 for r in rates):
            problems.append("benchmark_request_rate: %r is not a list of requests per second from 0.001 to 10000"
                            % (rates,))
        # the requests a window holds are counted only once everything before is sound
        problems += capacity.check_window([] if problems else rates, ramp_s, window_s,
                                          ("benchmark_ramp_s", "benchmark_window_s"))
        if dataset:
            problems.append("benchmark_dataset: open-loop points (benchmark_request_rate) draw their lengths around "
                            "benchmark_input_len/benchmark_output_len, as the capacity search does; a dataset is "
                            "for the concurrency levels")
    elif not concurrency or any(isinstance(c, bool) or not isinstance(c, int) or c < 1 for c in concurrency):
        problems.append("benchmark_concurrency: %r is not a list of whole numbers > 0" % (concurrency,))
    for name, value in (("benchmark_input_len", input_len), ("benchmark_output_len", output_len),
                        ("benchmark_prompts_per_level", prompts_per_level), ("benchmark_seed", seed)):
        least = 0 if name == "benchmark_seed" else 1
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            problems.append("%s: %r is not a whole number %s" % (name, value, ">= 0" if least == 0 else "> 0"))
    if not problems and not rates and not allow_overload and max(concurrency) > target_capacity:
        problems.append("benchmark_concurrency: %d concurrent requests are more than the %d the plan lets the "
                        "target run at once (max-num-seqs of its instances): the benchmark would measure a "
                        "queue and slow the fleet's clients; lower it or set benchmark_allow_overload: true"
                        % (max(concurrency), target_capacity))
    if problems:
        raise BenchError("; ".join(problems))
    workload = {"input_len": input_len, "output_len": output_len}
    if rates:
        levels = [{"name": "r%g" % r, "rate": r,
                   "args": capacity.bench_args(workload, r, capacity.seed(seed, r), ramp_s=ramp_s, window_s=window_s)}
                  for r in sorted(set(rates))]
    else:
        random = ["--dataset-name", "random", "--random-input-len", str(input_len), "--random-output-len",
                  str(output_len)]
        levels = [{"name": "c%d" % c, "concurrency": c,
                   "args": ["--max-concurrency", str(c), "--num-prompts", str(max(prompts_per_level, 2 * c)),
                            "--seed", str(seed + c), "--num-warmups", str(c), "--ignore-eos",
                            "--percentile-metrics", "ttft,tpot,itl,e2el", "--save-result"]
                           + ([] if dataset else random)}
                  for c in sorted(set(concurrency))]
    return {"levels": levels, "targets": targets, "fleet_capacity": fleet, "target_capacity": target_capacity}


def read(folder: str, slo: dict | None = None, ramp_s: float = capacity.RAMP_S) -> list:
    """Every result file under ``folder`` (one level of label folders or flat).  An open-loop
    point is judged over its window (the arrivals after its first ``ramp_s`` seconds)
    against ``slo`` (``capacity.judge``: ``meets_slo``, ``why`` and the rates sent, arrived
    and finished) when one is given."""
    points = []
    for dirpath, _dirs, files in os.walk(folder):
        for name in sorted(files):
            match = NAME.match(name)
            if not match:
                continue
            with open(os.path.join(dirpath, name), encoding="utf-8") as handle:
                result = json.load(handle)
            point = dict({"label": match["label"], "target": match["target"],
                          "level": "c" + match["concurrency"] if match["concurrency"] else "r" + match["rate"],
                          "concurrency": int(match["concurrency"]) if match["concurrency"] else None,
                          "rate": float(match["rate"]) if match["rate"] else None},
                         **{key: result.get(key) for key in KEYS})
            if point["rate"] is not None and slo:
                try:
                    judged = capacity.judge(result, point["rate"], slo, ramp_s=ramp_s)
                except capacity.CapacityError as exc:
                    judged = {"meets_slo": False, "why": str(exc)}
                point.update({key: judged.get(key) for key in ("meets_slo", "why", "sent_rate", "offered_rate",
                                                               "served_rate", "in_flight")})
            points.append(point)
    return sorted(points, key=lambda p: (p["label"], p["target"], p["rate"] is not None,
                                         p["concurrency"] or p["rate"]))


def _x(point: dict) -> float:
    return point["concurrency"] if point["rate"] is None else point["rate"]


def table(points: list) -> list:
    rows = ["%-12s %-22s %6s %6s %6s %9s %10s %11s %11s %10s  %s" % (
        "label", "target", "level", "done", "failed", "req/s", "out tok/s", "TTFT mean", "TTFT p99", "TPOT mean",
        "SLO")]
    for p in points:
        verdict = "-" if "meets_slo" not in p else ("holds" if p["meets_slo"] else "fails: " + p["why"])
        rows.append("%-12s %-22s %6s %6s %6s %9.2f %10.1f %9.0fms %9.0fms %8.1fms  %s" % (
            p["label"], p["target"], p["level"], p["completed"], p["failed"], p["request_throughput"] or 0,
            p["output_throughput"] or 0, p["mean_ttft_ms"] or 0, p["p99_ttft_ms"] or 0, p["mean_tpot_ms"] or 0,
            verdict))
    return rows


def series(points: list) -> dict:
    """(label, target[, open loop]) -> [(concurrency or rate, output tok/s, p99 TTFT ms)]."""
    lines: dict = {}
    for p in points:
        name = "%s %s%s" % (p["label"], p["target"], "" if p["rate"] is None else " open-loop")
        lines.setdefault(name, []).append((_x(p), p["output_throughput"] or 0.0, p["p99_ttft_ms"] or 0.0))
    return lines


def plot(points: list, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for name, values in sorted(series(points).items()):
        xs = [v[0] for v in values]
        left.plot(xs, [v[1] for v in values], marker="o", label=name)
        right.plot(xs, [v[2] for v in values], marker="o", label=name)
    level = "concurrent requests (open loop: requests/s)"
    left.set(xlabel=level, ylabel="output tokens/s", title="throughput")
    right.set(xlabel=level, ylabel="ms", title="p99 time to first token")
    for axis in (left, right):
        axis.set_xscale("log", base=2)
        axis.grid(True, alpha=0.3)
        axis.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def report(folder: str, summary_path: str, plot_path: str, write: bool = True, slo: dict | None = None,
           ramp_s: float = capacity.RAMP_S) -> dict:
    points = read(folder, slo, ramp_s)
    if not points:
        raise BenchError("benchmark_results_dir: no `vllm bench serve` result under %s" % folder)
    if write:
        with open(summary_path, "w", encoding="utf-8") as handle:
            json.dump({"points": points, "series": series(points)}, handle, indent=1)
        plot(points, plot_path)
    failed = ["%s %s %s: %s of %s failed" % (p["label"], p["target"], p["level"], p["failed"],
                                              (p["completed"] or 0) + (p["failed"] or 0))
              for p in points if p["failed"] or not p["completed"]]
    return {"points": points, "table": table(points), "summary": summary_path, "plot": plot_path,
            "failed": failed}
