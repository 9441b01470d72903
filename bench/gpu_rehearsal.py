#!/usr/bin/env python3
"""Capacity rehearsal on a real GPU: the project's plan, rendered into the same vLLM
--config file production uses, started with random weights (--load-format dummy),
vLLM's own start-up figures beside the planner's, and `vllm bench serve` against it.

  gpu_rehearsal.py calibrate --out DIR [--eager] [--case MODEL:KV:LEN]  # calibration cases
  gpu_rehearsal.py bench --out DIR --config planned|defaults|seed [--restart]
  gpu_rehearsal.py roofline --out DIR              # concurrency-1 decode vs HBM bound
  gpu_rehearsal.py plot --out DIR                  # serving.json + serving.png (matplotlib)
  gpu_rehearsal.py table --out DIR                 # calibration.md: the planner vs every fixture
  gpu_rehearsal.py repeats --out DIR               # repeats.md: DIR/rep*/ bench runs, start-to-start spread
  gpu_rehearsal.py tune --out DIR [--budget-seconds S]  # the SLO search (module_utils/tuning.py): tune.json
  gpu_rehearsal.py tune-plot --out DIR             # DIR/tune-run*.json: every start's points, tune.png + table
  gpu_rehearsal.py capacity --out DIR [--set K=V] --workload 1024/256 8192/256  # capacity at SLO, open-loop
  gpu_rehearsal.py capacity-plot --out DIR         # DIR's runs against the plan's model: table + capacity.png
  gpu_rehearsal.py capacity-fit --out DIR          # the model's prefill/read_kv grid against DIR's runs

Each bench start gets a fresh cache folder laid out as vllm@.service lays it out (HOME,
XDG_CACHE_HOME, VLLM_CACHE_ROOT, TRITON_CACHE_DIR), so its start-up is a cold one;
--restart then stops the server and starts it again on the same folder (a warm start);
--cache DIR keeps one folder across runs instead (shorter starts, reported as such).

Needs vLLM, torch and nvidia-ml-py on the host (python -m vllm ...), and this
repository (for module_utils and the shipped model configs).  The model folder holds
the shipped Gemma-4-31B config.json and a generated tokenizer with the real
262,144-token vocabulary; no weights are read.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import ansible.module_utils

ROOT = Path(__file__).resolve().parent.parent
# `ansible.module_utils.<name>` finds the project's module_utils/<name>.py, as in Ansible.
ansible.module_utils.__path__.append(str(ROOT / "module_utils"))
from ansible.module_utils import capacity, capacity_model, gpu_facts, tuning, tuning_host  # noqa: E402
from ansible.module_utils.vllm_config import check_with_vllm, render  # noqa: E402
from ansible.module_utils.vllm_log import parse_startup_log, replay  # noqa: E402
from ansible.module_utils.vllm_planner import plan  # noqa: E402
from ansible.module_utils.vllm_probe import ProbeError, wait_healthy  # noqa: E402

GiB = 1 << 30
MODELS = ROOT / "roles" / "preflight" / "files" / "models"
PORT = 8011
CASES = [(model, kv, length)
         for model in ("gemma-4-31B-it", "gemma-4-31B-it-FP8-block")
         for kv in ("auto", "fp8")
         for length in (8192, 32768)]
# The single-GPU command line of the seed guide the project started from (docs/vllm.md
# says why its flags are refused): its TP 2 cannot run on one GPU and --quantization fp8
# makes vLLM refuse a compressed-tensors checkpoint, so both are dropped; everything else
# is kept as written.
SEED_ARGS = {"tensor-parallel-size": 1, "dtype": "half", "block-size": 2048, "max-num-seqs": 256,
             "max-model-len": 4096, "gpu-memory-utilization": 0.9, "enforce-eager": True,
             "disable-custom-all-reduce": True, "enable-prefix-caching": True, "seed": 42,
             "trust-remote-code": True}
SEED_DROPPED = {"tensor-parallel-size 2": "one GPU on this host",
                "quantization fp8": "refused on a compressed-tensors checkpoint"}
# Dropped one by one, and only when the server does not start with them.
SEED_SUSPECTS = ("dtype", "block-size")
POINT_KEYS = ("output_throughput", "request_throughput", "mean_ttft_ms", "p99_ttft_ms",
              "mean_tpot_ms", "p99_tpot_ms", "completed", "failed")


def gpus() -> list:
    import pynvml
    return gpu_facts.build_facts(gpu_facts.read_nvml(pynvml))["gpus"]


def model_dir(name: str, dest: Path) -> Path:
    """config.json of the shipped model + a tokenizer with Gemma-4's vocabulary size."""
    folder = dest / name
    if (folder / "tokenizer.json").exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    config = json.loads((MODELS / f"{name}.json").read_text())
    config.pop("_comment", None)
    # transformers 5.17 (the H200 image) stops on per-layer head_dim without it.
    config["allow_global_per_layer_attribute_access"] = True
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    from tokenizers import Tokenizer, models, pre_tokenizers
    vocab = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3}
    vocab.update({f"t{i}": i for i in range(4, config["vocab_size"])})
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<bos>", "eos_token": "<eos>",
        "pad_token": "<pad>", "unk_token": "<unk>", "model_max_length": 262144,
        "chat_template": "{% for m in messages %}{{ m['content'] }} {% endfor %}"}))
    return folder


def settings_for(kind: str, model: Path, model_name: str, kv: str = "auto", length: int = 32768,
                 eager: bool = False) -> tuple[dict, dict | None]:
    """The --config settings of one configuration, and the plan behind it."""
    base = {"model": str(model), "served-model-name": "gemma", "port": PORT, "host": "127.0.0.1",
            "load-format": "dummy"}
    if kind == "defaults":
        return base, None
    if kind == "seed":
        return dict(base, **SEED_ARGS), None
    config = json.loads((MODELS / f"{model_name}.json").read_text())
    planned = plan(config, gpus(), max_model_len=length, kv_cache_dtype=kv,
                   vllm_args={"enforce-eager": True} if eager else None)
    return dict(base, **planned["vllm_args"]), planned


class Server:
    """python -m vllm.entrypoints.openai.api_server --config FILE, logged to a file."""

    def __init__(self, settings: dict, out: Path, tag: str, env: dict | None = None):
        self.config = out / f"{tag}.yaml"
        self.config.write_text(render(settings))
        verdict = check_with_vllm(sys.executable, self.config.read_text())
        if not verdict["ok"]:
            raise SystemExit(f"{tag}: vLLM refuses the config: {verdict['error']}")
        self.log = out / f"{tag}.log"
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--config", str(self.config)],
            stdout=self.log.open("w"), stderr=subprocess.STDOUT, start_new_session=True,
            env=dict(os.environ, **(env or {})))

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait(self, until_log: str | None = None, timeout: float = 900) -> float:
        """Seconds from the start until /health answers 200 (or the log shows ``until_log``)."""
        try:
            if not until_log:
                wait_healthy(f"http://127.0.0.1:{PORT}", timeout, interval=1, alive=self.alive)
                return time.monotonic() - self.started
            while self.alive() and time.monotonic() - self.started < timeout:
                if until_log in self.log.read_text(errors="replace"):
                    return time.monotonic() - self.started
                time.sleep(1)
        except ProbeError as exc:
            raise RuntimeError(f"{exc}: see {self.log}\n" + self.log.read_text()[-3000:]) from None
        why = f"not within {timeout}s" if self.alive() else "the server exited first"
        raise RuntimeError(f"no '{until_log}' in the log ({why}): see {self.log}\n"
                           + self.log.read_text(errors="replace")[-3000:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def calibrate(args) -> None:
    rows = []
    chosen = [case for case in CASES if not args.case or ":".join(map(str, case)) in args.case]
    for model_name, kv, length in chosen:
        tag = f"calib-{model_name}-kv{kv}-{length}"
        settings, planned = settings_for("planned", model_dir(model_name, args.models), model_name,
                                         kv, length, args.eager)
        server = Server(settings, args.out, tag)
        try:
            server.wait(until_log="Maximum concurrency for")
            time.sleep(1)
        finally:
            server.stop()
        log = server.log.read_text(errors="replace")
        measured = parse_startup_log(log)
        row = {"model": model_name, "kv_cache_dtype": kv, "max_model_len": length,
               "eager": args.eager, "measured": measured,
               "predicted": {k: planned[k] for k in ("kv_cache_tokens", "max_concurrency",
                                                     "weight_bytes_per_gpu", "kv_cache_bytes_per_gpu",
                                                     "non_kv_bytes_per_gpu")},
               "log": [line for line in log.splitlines()
                       if any(k in line for k in ("Model loading took", "Available KV cache memory",
                                                  "KV cache size", "Maximum concurrency",
                                                  "CUDA graph", "torch.compile takes"))]}
        rows.append(row)
        (args.out / "calibration.json").write_text(json.dumps(rows, indent=1))
        if len(rows) == 1:
            print(CALIBRATION_HEADER)
        print(calibration_row(f"{model_name} kv={kv} len={length}", planned, measured), flush=True)


CALIBRATION_HEADER = ("| case | weights GiB plan / vLLM | KV memory GiB plan / vLLM | KV tokens plan / vLLM "
                      "| concurrency plan / vLLM |\n|---|---|---|---|---|")


def calibration_row(name: str, predicted: dict, measured: dict) -> str:
    """One Markdown row: the planner's figure / vLLM's and the difference."""
    def pair(a, b, digits=2):
        return f"{a:,.{digits}f} / {b:,.{digits}f} ({(a / b - 1) * 100:+.1f} %)" if b else "-"
    return (f"| {name} | {pair(predicted['weight_bytes_per_gpu'] / GiB, measured.get('model_loading_gib'))} "
            f"| {pair(predicted['kv_cache_bytes_per_gpu'] / GiB, measured.get('available_kv_cache_gib'))} "
            f"| {pair(predicted['kv_cache_tokens'], measured.get('kv_cache_tokens'), 0)} "
            f"| {pair(predicted['max_concurrency'], measured.get('max_concurrency'))} |")


def table(args) -> None:
    """calibration.md: the planner beside every start-up log in tests/fixtures/calibration
    (replayed as tests/unit/test_calibration.py replays them), as a Markdown table.  No GPU needed."""
    rows = [CALIBRATION_HEADER]
    for path in sorted((ROOT / "tests" / "fixtures" / "calibration").glob("*.json")):
        case = json.loads(path.read_text())
        predicted, measured = replay(case, json.loads((MODELS / f"{case['model']}.json").read_text()))
        rows.append(calibration_row(path.stem, predicted, measured))
    (args.out / "calibration.md").write_text("\n".join(rows) + "\n")
    print("\n".join(rows))


def copy_bandwidth(gib: int = 8) -> float:
    """Device-to-device copy bandwidth in bytes/s (each byte is read once and written once)."""
    import torch
    src = torch.empty(gib * GiB, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    dst.copy_(src)
    torch.cuda.synchronize()
    started, rounds = time.perf_counter(), 10
    for _ in range(rounds):
        dst.copy_(src)
    torch.cuda.synchronize()
    return 2 * src.numel() * rounds / (time.perf_counter() - started)


def start(settings: dict, out: Path, tag: str, cache: Path, dropped: dict | None = None):
    """A healthy server and its seconds to healthy.  With ``dropped`` (the seed's command
    line), a server that dies on start-up is started again without the next of
    SEED_SUSPECTS, and the error that stopped it is recorded."""
    while True:
        server = Server(settings, out, tag, env=tuning_host.cache_env(str(cache)))
        try:
            return server, round(server.wait(), 1)
        except RuntimeError:
            died = not server.alive()
            server.stop()
            suspects = [key for key in SEED_SUSPECTS if key in settings]
            if dropped is None or not died or not suspects:
                raise
            errors = [line for line in server.log.read_text(errors="replace").splitlines()
                      if "Error" in line or "error:" in line]
            dropped[f"{suspects[0]} {settings.pop(suspects[0])}"] = (errors or ["exited"])[-1].strip()


def label(args) -> str:
    """planned, planned-kvfp8, defaults, seed."""
    return args.config + (f"-kv{args.kv_cache_dtype}" if args.kv_cache_dtype != "auto" else "")


def serve_bench(args, settings: dict, concurrency: int) -> dict:
    """One `vllm bench serve` run: random 1024 in / 256 out, --ignore-eos.  Each level
    has its own prompts (--seed), so the prefix cache carries nothing from the level
    before, and first runs one batch of warm-up requests, so kernels compiled on the
    first batch of a new size are not timed (the first H200 sweep had neither)."""
    name = f"bench-{label(args)}-c{concurrency}.json"
    prompts = max(2 * concurrency, args.min_prompts)
    vllm = shutil.which("vllm") or str(Path(sys.executable).parent / "vllm")
    with (args.out / f"{name}.txt").open("w") as log:
        subprocess.run([vllm, "bench", "serve", "--base-url", f"http://127.0.0.1:{PORT}",
                        "--model", "gemma", "--tokenizer", settings["model"],
                        "--dataset-name", "random", "--random-input-len", "1024",
                        "--random-output-len", "256", "--ignore-eos",
                        "--max-concurrency", str(concurrency), "--num-prompts", str(prompts),
                        "--seed", str(concurrency), "--num-warmups", str(concurrency),
                        "--percentile-metrics", "ttft,tpot,itl,e2el",
                        "--save-result", "--result-dir", str(args.out), "--result-filename", name],
                       check=True, stdout=log, stderr=subprocess.STDOUT)
    result = json.loads((args.out / name).read_text())
    return {"concurrency": concurrency, "num_prompts": prompts,
            **{key: result.get(key) for key in POINT_KEYS}}


def folder_mib(cache: Path) -> dict:
    return {sub.name: round(sum(f.stat().st_size for f in sub.rglob("*") if f.is_file()) / (1 << 20), 1)
            for sub in sorted(cache.iterdir()) if sub.is_dir()}


def bench(args) -> None:
    """Cold start on a fresh cache folder, the concurrency sweep, then (--restart) a warm start."""
    model_name = "gemma-4-31B-it-FP8-block"
    settings, planned = settings_for(args.config, model_dir(model_name, args.models), model_name,
                                     kv=args.kv_cache_dtype, length=args.max_model_len)
    summary = {"config": label(args), "settings": settings, "points": [],
               "weight_bytes": planned["weight_bytes_per_gpu"] if planned else None}
    dropped = dict(SEED_DROPPED) if args.config == "seed" else None
    if dropped is not None:
        summary["dropped"] = dropped
    cache = args.cache or args.out / f"cache-{label(args)}"
    if not args.cache:
        shutil.rmtree(cache, ignore_errors=True)
    start_key = "shared_cache_start_to_healthy_s" if args.cache else "cold_start_to_healthy_s"
    tag = f"bench-{label(args)}"
    try:
        server, summary[start_key] = start(settings, args.out, tag, cache, dropped)
        try:
            for concurrency in args.concurrency:
                summary["points"].append(serve_bench(args, settings, concurrency))
                print(json.dumps(summary["points"][-1]), flush=True)
        finally:
            server.stop()
        summary["cache_mib"] = folder_mib(cache)
        if args.restart:
            server, summary["warm_start_to_healthy_s"] = start(settings, args.out, f"{tag}-warm", cache)
            server.stop()
    finally:
        (args.out / f"{tag}.summary.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps({k: v for k, v in summary.items() if k != "points"}), flush=True)


def tune(args) -> None:
    """The SLO search of playbooks/tune.yml on this GPU, through the same runner
    (module_utils/tuning_host.py) and search (module_utils/tuning.py): the planner's
    candidates and vLLM's defaults, each one's capacity at SLO in requests/s, within a
    budget, on one cache folder (--cache, default DIR/cache: only the first start is cold);
    tune.json after every start."""
    model_name = "gemma-4-31B-it-FP8-block"
    model = model_dir(model_name, args.models)
    config = json.loads((MODELS / f"{model_name}.json").read_text())
    config.pop("_comment", None)
    slo = {"ttft_p99_s": args.ttft_p99_s, "tpot_mean_ms": args.tpot_mean_ms}
    workload = {"input_len": 1024, "output_len": 256, "target_concurrency": args.target}
    hardware = gpus()
    computed = plan(config, hardware, max_model_len=args.max_model_len, slo=slo, workload=workload,
                    model_name=model_name)
    cands, pruned = computed["tuning"]["candidates"], computed["tuning"]["pruned"]
    pruned += [dict(c, why="left out of this run (--skip): " + c["why"]) for c in cands if c["name"] in args.skip]
    cands = [c for c in cands if c["name"] not in args.skip]
    rates = args.rates or computed["tuning"]["rates"]
    runner = tuning_host.Runner(sys.executable, {"model": str(model), "served-model-name": "gemma",
                                                 "load-format": "dummy"}, {}, str(args.out), port=PORT,
                                user=None, api_key="", workload=workload, slo=slo, start_timeout=900,
                                cache=str(args.cache or args.out / "cache"))
    result = {"slo": slo, "workload": workload, "gpus": hardware, "candidates": cands, "pruned": pruned,
              "rates": rates, "starts": []}

    def log(line, starts):
        result["starts"] = starts
        (args.out / "tune.json").write_text(json.dumps(result, indent=1))
        print(line, flush=True)

    result["starts"] = tuning.search(cands, rates, slo, runner.start,
                                     lambda proc: runner.warm_up(proc, min(rates), args.warmup_s), runner.measure,
                                     runner.stop, budget_starts=args.budget_starts,
                                     budget_seconds=args.budget_seconds, log=log)
    result["summary"] = tuning.summarize(cands, result["starts"], slo)
    (args.out / "tune.json").write_text(json.dumps(result, indent=1))
    print("\n".join(tuning.table(result["summary"])), flush=True)


class OutOfTime(Exception):
    """The next point would end after --deadline-s."""


def weights_plugin(weights: str, out: Path) -> tuple:
    """The load format and engine environment for --weights: vLLM's own dummy draw, or
    bench/realistic_weights.py's ``dummy_realistic`` through an entry point written here."""
    if weights == "dummy":
        return "dummy", {}
    info = out / "plugin" / "vllm_fleet_realistic_weights-0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm-fleet-realistic-weights\nVersion: 0\n")
    (info / "entry_points.txt").write_text("[vllm.general_plugins]\nrealistic_weights = realistic_weights:register\n")
    path = [str(out / "plugin"), str(ROOT / "bench")] + [p for p in [os.environ.get("PYTHONPATH")] if p]
    return "dummy_realistic", {"PYTHONPATH": os.pathsep.join(path)}


def capacity_run(args) -> None:
    """Capacity at SLO of one configuration (vLLM's defaults, plus --set flags), open-loop,
    through the tune role's runner (``tuning_host.Runner``: start, ``measure`` at a request
    rate) and search (``capacity.find``): one start, then each --workload searched from its
    --grid.  A point that would end after --deadline-s (from this command's start) is not
    begun.  capacity.json after every point; the engine's log (its 10-second statistics,
    the attention backend it chose) beside it."""
    began = time.monotonic()
    model_name = "gemma-4-31B-it-FP8-block"
    model = model_dir(model_name, args.models)
    slo = {"ttft_p99_s": args.ttft_p99_s, "tpot_mean_ms": args.tpot_mean_ms}
    settings = {key: yaml_value(value) for key, value in (item.split("=", 1) for item in args.set)}
    known = {shape: tuple(float(x) if x else None for x in rates.split(",")) for shape, rates in
             (item.split("=", 1) for item in args.known)}
    load_format, env = weights_plugin(args.weights, args.out)
    runner = tuning_host.Runner(sys.executable, {"model": str(model), "served-model-name": "gemma",
                                                 "load-format": load_format}, env, str(args.out), port=PORT,
                                user=None, api_key="", workload={}, slo=slo, start_timeout=900,
                                cache=str(args.cache or args.out / "cache"))
    name = args.label or "defaults"
    result = {"configuration": name, "settings": settings, "weights": args.weights, "slo": slo, "gpus": gpus(),
              "searches": []}
    path = args.out / "capacity.json"
    point_s = capacity.RAMP_S + capacity.WINDOW_S + args.drain_s
    proc, result["start_to_healthy_s"] = runner.start({"name": name, "settings": settings})
    try:
        lines = [line.strip() for line in (args.out / f"{proc.tag}.log").read_text(errors="replace").splitlines()]
        result["backend_lines"] = [line for line in lines if "backend" in line.lower()][:8]
        result["weights_lines"] = [line for line in lines if "realistic FP8 weights" in line]
        for shape, grid in zip(args.workload, args.grid):
            inp, outp = (int(x) for x in shape.split("/"))
            runner.workload = {"input_len": inp, "output_len": outp}
            search = {"workload": runner.workload, "grid": grid, "known": known.get(shape), "points": []}
            result["searches"].append(search)
            if args.warmup_s:
                runner.warm_up(proc, grid[0], args.warmup_s)
                search["warm_up"] = {"rate": grid[0], "seconds": args.warmup_s}

            def measure(rate, search=search):
                if time.monotonic() - began + point_s > args.deadline_s:
                    raise OutOfTime()
                point = runner.measure(proc, rate, args.start)
                point["ended_s"] = round(time.monotonic() - began)
                search["points"].append(point)
                path.write_text(json.dumps(result, indent=1))
                print(json.dumps(point), flush=True)
                return point

            try:
                found = capacity.find(measure, grid, climbs=args.climbs, known=known.get(shape, (None, None)))
                search.update({k: v for k, v in found.items() if k != "points"})
            except OutOfTime:
                search["stopped"] = "deadline: %.0f s" % args.deadline_s
            path.write_text(json.dumps(result, indent=1))
    finally:
        runner.stop(proc)
        path.write_text(json.dumps(result, indent=1))
    for search in result["searches"]:
        print(json.dumps({k: v for k, v in search.items() if k != "points"}), flush=True)


def yaml_value(text: str):
    """A --set value as the --config file would read it (numbers as numbers)."""
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def tune_plot(args) -> None:
    """tune.png: p99 TTFT and mean TPOT of every start's points (DIR/tune-run*.json) against
    the request rate and the SLO, and the summary table over all runs (no GPU needed)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    runs = [json.loads(path.read_text()) for path in sorted(args.out.glob("tune-run*.json"))]
    slo = runs[0]["slo"]
    cands = {c["name"]: c for run in runs for c in run["candidates"]}
    starts = [s for run in runs for s in run["starts"]]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for number, start in enumerate((s for s in starts if "points" in s), 1):
        points = sorted(start["points"], key=lambda p: p["rate"])
        xs = [p["rate"] for p in points]
        name = "%s (start %d)" % (start["candidate"], number)
        left.plot(xs, [p["p99_ttft_ms"] / 1000 for p in points], marker="o", label=name)
        right.plot(xs, [p["mean_tpot_ms"] for p in points], marker="o", label=name)
    left.axhline(slo["ttft_p99_s"], color="red", linestyle="--", label="SLO")
    right.axhline(slo["tpot_mean_ms"], color="red", linestyle="--", label="SLO")
    for axis, ylabel in ((left, "p99 time to first token (s)"), (right, "mean time per output token (ms)")):
        axis.set_xlabel("requests/s (Poisson arrivals)")
        axis.set_ylabel(ylabel)
        axis.grid(True, alpha=0.3)
        axis.legend(fontsize=8)
    fig.suptitle("SLO search, Gemma-4-31B FP8-block (random weights), vLLM 0.25.1, one H200: 1024 in / 256 out")
    fig.tight_layout()
    fig.savefig(args.out / "tune.png", dpi=110)
    summary = tuning.summarize(list(cands.values()), starts, slo)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
    print("\n".join(tuning.table(summary)))


def measured_points(folder: Path, gpu: str = "") -> dict:
    """"IN/OUT" -> every open-loop point of the runs in ``folder``, each with its run: from
    run<N>-capacity.json, or, where a run's file did not come back, from the points its
    driver printed (run<N>-driver.txt: a workload's points come before its summary line).
    ``gpu`` "h100": the H100 runs' run<N>-h100.capacity.json instead (no driver lines read:
    every H100 run's file came back)."""
    found: dict = {}

    def add(run: str, workload: dict, point: dict) -> None:
        found.setdefault("%d/%d" % (workload["input_len"], workload["output_len"]), []).append(dict(point, run=run))
    for path in sorted(folder.glob("run*-%s.capacity.json" % gpu if gpu else "run*-capacity.json")):
        run = path.name.split("-")[0]
        for search in json.loads(path.read_text())["searches"]:
            for point in search["points"]:
                add(run, search["workload"], point)
    for path in [] if gpu else sorted(folder.glob("run*-driver.txt")):
        run = path.name.split("-")[0]
        if (folder / ("%s-capacity.json" % run)).exists():
            continue
        waiting = []
        for line in path.read_text().splitlines():
            if not line.startswith("{"):
                continue
            item = json.loads(line)
            if "rate" in item:
                waiting.append(item)
            elif "workload" in item:
                for point in waiting:
                    add(run, item["workload"], point)
                waiting = []
    return found


def recorded_plan(args, shape: str, fixture: str = "h200-1gpu-recorded.json") -> tuple:
    """The workload of ``shape`` ("IN/OUT") and the plan the runs are compared with: the
    FP8-block checkpoint on the recorded H200 (or the first GPU of another NVML
    ``fixture``), vLLM 0.25.1, a 32,768-token context, vLLM's default memory share (0.9,
    what the runs used), the SLO of args."""
    slo = {"ttft_p99_s": args.ttft_p99_s, "tpot_mean_ms": args.tpot_mean_ms}
    model = json.loads((MODELS / "gemma-4-31B-it-FP8-block.json").read_text())
    model.pop("_comment", None)
    recorded = json.loads((ROOT / "tests" / "fixtures" / "nvml" / fixture).read_text())
    inp, out = (int(x) for x in shape.split("/"))
    workload = {"input_len": inp, "output_len": out, "target_concurrency": args.target}
    return workload, plan(model, gpu_facts.build_facts(recorded)["gpus"][:1], max_model_len=32768,
                          engine_version="0.25.1", slo=slo, workload=workload, gpu_memory_utilization=0.9)


def capacity_plot(args) -> None:
    """What the plan's capacity model (module_utils/capacity_model.py, through the planner)
    predicts at every measured open-loop point of DIR's runs, beside what was measured: a
    table (capacity-table.md) and capacity.png (p99 TTFT and mean TPOT against the rate,
    one column per workload, the SLO and the plan's capacity marked).  No GPU needed."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    found = measured_points(args.out)
    rows = ["| in / out | run | requests/s | mean TPOT ms | p99 TTFT ms | in flight | verdict |",
            "|---|---|---|---|---|---|---|"]
    fig, axes = plt.subplots(2, len(found), figsize=(5.5 * len(found), 7.5), squeeze=False)
    for column, (shape, points) in enumerate(sorted(found.items(), key=lambda item: int(item[0].split("/")[0]))):
        workload, planned = recorded_plan(args, shape)
        costs, limit = planned["capacity"]["step_costs"], planned["capacity"]["per_instance"]
        for point in sorted(points, key=lambda p: p["rate"]):
            predicted = capacity_model.at_rate(costs, workload, point["rate"])
            figures = [("%.1f" % point["mean_tpot_ms"], predicted["tpot"] and "%.1f" % (predicted["tpot"] * 1000)),
                       ("%.0f" % point["p99_ttft_ms"], predicted["ttft_p99"] and "%.0f" % (predicted["ttft_p99"] * 1000)),
                       ("%.1f" % point["in_flight"], predicted["in_flight"] and "%.1f" % predicted["in_flight"])]
            rows.append("| %s | %s | %g | %s | %s |" % (
                shape.replace("/", " / "), point["run"], point["rate"],
                " | ".join("%s / %s" % (m, p or "-") for m, p in figures),
                "holds" if point["meets_slo"] else "fails"))
        top = max(p["rate"] for p in points) * 1.1
        rates = [top * i / 200 for i in range(1, 201)]
        model_at = [capacity_model.at_rate(costs, workload, r) for r in rates]
        for row, key, scale, objective, label in ((0, "p99_ttft_ms", 1000, args.ttft_p99_s * 1000, "p99 TTFT (ms)"),
                                                  (1, "mean_tpot_ms", 1000, args.tpot_mean_ms, "mean TPOT (ms)")):
            axis = axes[row][column]
            model_key = "ttft_p99" if row == 0 else "tpot"
            axis.plot([r for r, f in zip(rates, model_at) if f[model_key]],
                      [f[model_key] * scale for f in model_at if f[model_key]], color="gray", label="the plan's model")
            for held, marker, name in ((True, "o", "measured, holds"), (False, "x", "measured, fails")):
                chosen = [p for p in points if p["meets_slo"] is held]
                axis.scatter([p["rate"] for p in chosen], [p[key] for p in chosen], marker=marker, s=40, label=name)
            axis.axhline(objective, color="red", linestyle="--", label="SLO")
            axis.axvline(limit["requests_per_s"], color="gray", linestyle=":",
                         label="plan: %.2f req/s" % limit["requests_per_s"])
            axis.set_yscale("log")
            axis.set(xlabel="requests/s (Poisson arrivals)", ylabel=label, title="%s in / out" % shape)
            axis.grid(True, alpha=0.3)
            axis.legend(fontsize=7)
    fig.suptitle("Capacity at SLO, Gemma-4-31B FP8-block (realistic weights), vLLM 0.25.1 defaults, one H200")
    fig.tight_layout()
    fig.savefig(args.out / "capacity.png", dpi=100)
    (args.out / "capacity-table.md").write_text("\n".join(rows) + "\n")
    print("\n".join(rows))


def capacity_fit(args) -> None:
    """How capacity_model.CALIBRATION's prefill and read_kv were chosen: for each pair of a
    grid, the largest error of the mean TPOT and of the requests in flight over every passing
    point of DIR's runs, and the capacity the plan then states per workload; then, for each
    ttft_tail of a grid, the p99 TTFT's errors and the capacities on the H200 and the H100
    runs (capacity-fit.md)."""
    found = measured_points(args.out)
    shapes = sorted(found, key=lambda shape: int(shape.split("/")[0]))
    # the p99 TTFT's tail against the passing points of the H200 runs and of the H100 runs
    gpu_runs = (("H200", "h200-1gpu-recorded.json", found),
                ("H100", "hgx-8xh100-nvswitch.json", measured_points(args.out, "h100")))
    rows = ["| prefill | read_kv | largest TPOT error | largest in-flight error | %s |"
            % " | ".join("capacity %s (highest pass / first failure)" % shape for shape in shapes),
            "|---|---|---|---|" + "---|" * len(shapes)]
    saved = dict(capacity_model.CALIBRATION)
    try:
        for prefill in (0.577, 0.55, 0.5, 0.45, 0.4):
            for read_kv in (0.75, 0.8, 0.9, 1.0):
                capacity_model.CALIBRATION.update(prefill=prefill, read_kv=read_kv)
                tpot, flight, caps = 0.0, 0.0, []
                for shape in shapes:
                    workload, planned = recorded_plan(args, shape)
                    for point in (p for p in found[shape] if p["meets_slo"]):
                        predicted = capacity_model.at_rate(planned["capacity"]["step_costs"], workload, point["rate"])
                        tpot = max(tpot, abs(predicted["tpot"] * 1000 / point["mean_tpot_ms"] - 1))
                        flight = max(flight, abs(predicted["in_flight"] / point["in_flight"] - 1))
                    held = max(p["rate"] for p in found[shape] if p["meets_slo"])
                    failed = min((p["rate"] for p in found[shape] if not p["meets_slo"]), default=None)
                    caps.append("%.2f (%g / %s)" % (planned["capacity"]["per_instance"]["requests_per_s"], held,
                                                    "-" if failed is None else "%g" % failed))
                rows.append("| %g | %g | %.0f %% | %.0f %% | %s |" % (prefill, read_kv, tpot * 100, flight * 100,
                                                                     " | ".join(caps)))
        rows += ["", "| ttft_tail | %s |" % " | ".join(
            "%s %s: p99 TTFT error, capacity (highest pass / first failure)" % (gpu, shape)
            for gpu, _, points_on in gpu_runs for shape in sorted(points_on)), "|---|" + "---|" * 4]
        capacity_model.CALIBRATION.update(saved)
        for tail in (1.0, 0.7, 0.5, 0.4):
            capacity_model.CALIBRATION.update(ttft_tail=tail)
            cells = []
            for gpu, fixture, points_on in gpu_runs:
                for shape, points in sorted(points_on.items()):
                    workload, planned = recorded_plan(args, shape, fixture)
                    errors = [capacity_model.at_rate(planned["capacity"]["step_costs"], workload, point["rate"])
                              ["ttft_p99"] * 1000 / point["p99_ttft_ms"] - 1 for point in points if point["meets_slo"]]
                    held = max(p["rate"] for p in points if p["meets_slo"])
                    failed = min((p["rate"] for p in points if not p["meets_slo"]), default=None)
                    cells.append("%+.0f to %+.0f %%, %.2f (%g / %s)" % (
                        min(errors) * 100, max(errors) * 100, planned["capacity"]["per_instance"]["requests_per_s"],
                        held, "-" if failed is None else "%g" % failed))
            rows.append("| %g | %s |" % (tail, " | ".join(cells)))
    finally:
        capacity_model.CALIBRATION.clear()
        capacity_model.CALIBRATION.update(saved)
    (args.out / "capacity-fit.md").write_text("\n".join(rows) + "\n")
    print("\n".join(rows))


def roofline(args) -> None:
    """Concurrency-1 decode against the HBM bound: weights read once per generated token."""
    bandwidth = copy_bandwidth()
    summary = json.loads((args.out / "bench-planned.summary.json").read_text())
    point = next(p for p in summary["points"] if p["concurrency"] == 1)
    bound = bandwidth / summary["weight_bytes"]
    measured = 1000.0 / point["mean_tpot_ms"]
    result = {"copy_bandwidth_gb_s": round(bandwidth / 1e9, 1), "weight_bytes": summary["weight_bytes"],
              "bound_tokens_s": round(bound, 1), "decode_tokens_s": round(measured, 1),
              "ratio": round(measured / bound, 3)}
    (args.out / "roofline.json").write_text(json.dumps(result))
    print(json.dumps(result), flush=True)


def plot(args) -> None:
    """serving.json (every summary + the roofline) and serving.png from a bench folder."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    summaries = [json.loads(path.read_text()) for path in sorted(args.out.glob("bench-*.summary.json"))]
    roof = args.out / "roofline.json"
    (args.out / "serving.json").write_text(json.dumps(
        {"configs": summaries, "roofline": json.loads(roof.read_text()) if roof.exists() else None},
        indent=1))
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for summary in summaries:
        points = sorted(summary["points"], key=lambda p: p["concurrency"])
        xs = [p["concurrency"] for p in points]
        left.plot(xs, [p["output_throughput"] for p in points], marker="o", label=summary["config"])
        right.plot(xs, [p["p99_ttft_ms"] for p in points], marker="o", label=summary["config"])
        for p in points:
            print(f"{summary['config']:<9} c={p['concurrency']:<4} out {p['output_throughput']:8.1f} tok/s  "
                  f"{p['request_throughput']:6.2f} req/s  TTFT mean {p['mean_ttft_ms']:8.1f} "
                  f"p99 {p['p99_ttft_ms']:8.1f} ms  TPOT {p['mean_tpot_ms']:6.2f} ms")
    for axis, ylabel in ((left, "output tokens/s"), (right, "p99 TTFT (ms)")):
        axis.set_xscale("log", base=2)
        axis.set_xlabel("concurrency")
        axis.set_ylabel(ylabel)
        axis.grid(True, alpha=0.3)
        axis.legend()
    right.set_yscale("log")
    fig.suptitle("Gemma-4-31B FP8-block (random weights), vLLM 0.25.1, one H200: "
                 "random 1024 in / 256 out")
    fig.tight_layout()
    fig.savefig(args.out / "serving.png", dpi=110)


def repeats(args) -> None:
    """repeats.md: the same configurations started several times (DIR/rep*/, one bench run
    each), every start's figures per level, their mean and spread, and each configuration's
    mean against vLLM's defaults'.  Tells start-to-start spread from a real difference."""
    runs = {}
    for path in sorted(args.out.glob("rep*/bench-*.summary.json")):
        summary = json.loads(path.read_text())
        for point in summary["points"]:
            runs.setdefault((summary["config"], point["concurrency"]), []).append(point)
    means = {key: sum(p["output_throughput"] for p in points) / len(points) for key, points in runs.items()}
    configs = sorted({config for config, _ in runs}, key=lambda config: config != "defaults")
    rows = ["| config | c | output tok/s, each start | mean | spread | TPOT ms, each start "
            f"| mean tok/s against {configs[0]} |", "|---|---|---|---|---|---|---|"]
    for concurrency in sorted({concurrency for _, concurrency in runs}):
        for config in configs:
            points = runs[(config, concurrency)]
            speeds = [p["output_throughput"] for p in points]
            mean = means[(config, concurrency)]
            rows.append(f"| {config} | {concurrency} | {' / '.join(f'{v:.1f}' for v in speeds)} | {mean:.2f} "
                        f"| {(max(speeds) - min(speeds)) / mean * 100:.2f} % "
                        f"| {' / '.join(format(p['mean_tpot_ms'], '.2f') for p in points)} "
                        f"| {(mean / means[(configs[0], concurrency)] - 1) * 100:+.2f} % |")
    (args.out / "repeats.md").write_text("\n".join(rows) + "\n")
    print("\n".join(rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["calibrate", "bench", "roofline", "plot", "table", "repeats", "tune",
                                         "tune-plot", "capacity", "capacity-plot", "capacity-fit"])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--models", type=Path, default=Path("/tmp/gpu-rehearsal-models"))
    parser.add_argument("--eager", action="store_true", help="calibrate with --enforce-eager")
    parser.add_argument("--case", action="append", metavar="MODEL:KV:LEN",
                        help="calibrate only these cases, e.g. gemma-4-31B-it:fp8:8192 (repeatable)")
    parser.add_argument("--config", choices=["planned", "defaults", "seed"], default="planned")
    parser.add_argument("--max-model-len", type=int, default=32768,
                        help="planned configuration (preflight_max_model_len's default)")
    parser.add_argument("--restart", action="store_true", help="then a warm start on the same cache")
    parser.add_argument("--cache", type=Path, help="a cache folder kept and shared across runs (the "
                        "kernels other configurations built are reused: not a cold start)")
    parser.add_argument("--kv-cache-dtype", default="auto", choices=["auto", "fp8"],
                        help="the planned configuration's KV cache (preflight_kv_cache_dtype)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64, 128])
    parser.add_argument("--min-prompts", type=int, default=8)
    parser.add_argument("--rates", type=float, nargs="+",
                        help="tune: the request rates the search goes up through (default: the plan's)")
    parser.add_argument("--ttft-p99-s", type=float, default=2.0)
    parser.add_argument("--tpot-mean-ms", type=float, default=50.0)
    parser.add_argument("--target", type=int, default=32, help="tune: the operator's target concurrency (it "
                        "prunes candidates whose KV cache cannot hold it)")
    parser.add_argument("--budget-starts", type=int, default=6)
    parser.add_argument("--skip", nargs="*", default=[], help="tune: candidates left out of this run")
    parser.add_argument("--budget-seconds", type=float, default=1200)
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="capacity: engine flags on top of vLLM's defaults")
    parser.add_argument("--label", help="capacity: the configuration's name (default: defaults)")
    parser.add_argument("--weights", choices=["dummy", "realistic"], default="dummy",
                        help="capacity: vLLM's dummy weights, or FP8 weights with a real spread "
                             "(bench/realistic_weights.py)")
    parser.add_argument("--workload", nargs="+", default=["1024/256"], metavar="IN/OUT")
    parser.add_argument("--grid", type=lambda text: [float(x) for x in text.split(",")], nargs="+",
                        default=[[4.5, 5.5, 6.5]], metavar="R1,R2,...",
                        help="capacity: the coarse grid of request rates, one per --workload")
    parser.add_argument("--known", nargs="*", default=[], metavar="IN/OUT=PASS,FAIL",
                        help="capacity: a rate that held and one that failed in earlier starts (either "
                             "may be empty: IN/OUT=,FAIL); that workload's search measures only between them")
    parser.add_argument("--start", type=int, default=1, help="capacity: the start number (seeds are paired by it)")
    parser.add_argument("--climbs", type=int, default=2, help="capacity: when a whole grid holds, rates a quarter "
                        "higher each, at most this many, until one fails (then bisection)")
    parser.add_argument("--deadline-s", type=float, default=1e9, help="capacity: begin no point that would end later")
    parser.add_argument("--warmup-s", type=float, default=45.0,
                        help="capacity: seconds of unmeasured traffic at the grid's first rate before each search")
    parser.add_argument("--drain-s", type=float, default=20.0, help="capacity: a point's time after its last arrival")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    {"calibrate": calibrate, "bench": bench, "roofline": roofline, "plot": plot,
     "table": table, "repeats": repeats, "tune": tune,
     "tune-plot": tune_plot, "capacity": capacity_run, "capacity-plot": capacity_plot,
     "capacity-fit": capacity_fit}[args.mode](args)


if __name__ == "__main__":
    main()
