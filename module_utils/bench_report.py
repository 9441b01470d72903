"""What playbooks/benchmark.yml makes of the JSON files `vllm bench serve` wrote: one
summary (a point per configuration, target and concurrency), a printed table and a
plot of output throughput and p99 time to first token against concurrency, one line per
configuration and target.  Plain Python; matplotlib only for the plot.

File names are ``<label>--<target>--c<concurrency>.json`` (``plan(...)`` checks the
inputs that make them).
"""
from __future__ import annotations

import json
import os
import re

from ansible.module_utils.diagnose import instance_url

NAME = re.compile(r"^(?P<label>[a-z0-9][a-z0-9_-]*)--(?P<target>[A-Za-z0-9_.-]+)--c(?P<concurrency>[0-9]+)\.json$")
LABEL = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
KEYS = ("completed", "failed", "request_throughput", "output_throughput", "mean_ttft_ms", "p99_ttft_ms",
        "mean_tpot_ms", "p99_tpot_ms", "duration")


class BenchError(ValueError):
    """Each message starts with the variable it is about."""


def plan(label: str, concurrency: list, input_len: int, output_len: int, prompts_per_level: int,
         plans: list, gateway: str, instances: list, allow_overload: bool) -> dict:
    """The targets and the levels to run, each with its prompt count.  ``gateway``: the
    gateway's URL (empty: the targets are ``instances``, this host's planned ones);
    ``plans``: every inference host's plan.  Refuses a level above what the plan lets a
    target run at once (the ``max_num_seqs`` of the instances behind it) unless
    ``allow_overload``."""
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
    if not concurrency or any(isinstance(c, bool) or not isinstance(c, int) or c < 1 for c in concurrency):
        problems.append("benchmark_concurrency: %r is not a list of whole numbers > 0" % (concurrency,))
    for name, value in (("benchmark_input_len", input_len), ("benchmark_output_len", output_len),
                        ("benchmark_prompts_per_level", prompts_per_level)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            problems.append("%s: %r is not a whole number > 0" % (name, value))
    if not problems and not allow_overload and max(concurrency) > target_capacity:
        problems.append("benchmark_concurrency: %d concurrent requests are more than the %d the plan lets the "
                        "target run at once (max-num-seqs of its instances): the benchmark would measure a "
                        "queue and slow the fleet's clients; lower it or set benchmark_allow_overload: true"
                        % (max(concurrency), target_capacity))
    if problems:
        raise BenchError("; ".join(problems))
    return {"levels": [{"concurrency": c, "prompts": max(prompts_per_level, 2 * c)} for c in sorted(set(concurrency))],
            "targets": targets, "fleet_capacity": fleet, "target_capacity": target_capacity}


def read(folder: str) -> list:
    """Every result file under ``folder`` (one level of label folders or flat)."""
    points = []
    for dirpath, _dirs, files in os.walk(folder):
        for name in sorted(files):
            match = NAME.match(name)
            if not match:
                continue
            with open(os.path.join(dirpath, name), encoding="utf-8") as handle:
                result = json.load(handle)
            points.append(dict({"label": match["label"], "target": match["target"],
                                "concurrency": int(match["concurrency"])},
                               **{key: result.get(key) for key in KEYS}))
    return sorted(points, key=lambda p: (p["label"], p["target"], p["concurrency"]))


def table(points: list) -> list:
    rows = ["%-12s %-22s %5s %6s %6s %9s %10s %11s %11s %10s" % (
        "label", "target", "c", "done", "failed", "req/s", "out tok/s", "TTFT mean", "TTFT p99", "TPOT mean")]
    for p in points:
        rows.append("%-12s %-22s %5d %6s %6s %9.2f %10.1f %9.0fms %9.0fms %8.1fms" % (
            p["label"], p["target"], p["concurrency"], p["completed"], p["failed"], p["request_throughput"] or 0,
            p["output_throughput"] or 0, p["mean_ttft_ms"] or 0, p["p99_ttft_ms"] or 0, p["mean_tpot_ms"] or 0))
    return rows


def series(points: list) -> dict:
    """(label, target) -> [(concurrency, output tok/s, p99 TTFT ms)]."""
    lines: dict = {}
    for p in points:
        lines.setdefault("%s %s" % (p["label"], p["target"]), []).append(
            (p["concurrency"], p["output_throughput"] or 0.0, p["p99_ttft_ms"] or 0.0))
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
    left.set(xlabel="concurrent requests", ylabel="output tokens/s", title="throughput")
    right.set(xlabel="concurrent requests", ylabel="ms", title="p99 time to first token")
    for axis in (left, right):
        axis.set_xscale("log", base=2)
        axis.grid(True, alpha=0.3)
        axis.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def report(folder: str, summary_path: str, plot_path: str, write: bool = True) -> dict:
    points = read(folder)
    if not points:
        raise BenchError("benchmark_results_dir: no `vllm bench serve` result under %s" % folder)
    if write:
        with open(summary_path, "w", encoding="utf-8") as handle:
            json.dump({"points": points, "series": series(points)}, handle, indent=1)
        plot(points, plot_path)
    failed = ["%s %s c%d: %s of %s failed" % (p["label"], p["target"], p["concurrency"], p["failed"],
                                               (p["completed"] or 0) + (p["failed"] or 0))
              for p in points if p["failed"] or not p["completed"]]
    return {"points": points, "table": table(points), "summary": summary_path, "plot": plot_path,
            "failed": failed}
