"""The requests per second one engine instance is expected to hold at the SLO: a model of
vLLM's engine step, calibrated on the H200 measurements (docs/capacity.md).

One engine step decodes one token of each of the B running requests and prefills up to
the chunk budget.  Its time is

    t = a + B * r(ctx) + p * c

- ``a``: reading the weights once (bytes per GPU / the GPU's memory bandwidth x
  ``read_weights``) - the decode step of one request;
- ``r(ctx)``: reading one request's KV cache of ``ctx`` tokens (sliding-window layers at
  most their window) at ``read_kv`` of the bandwidth, its entries counted at 16 bits; an
  FP8 cache takes ``fp8_kv_read`` of that time, not the half its bytes would say;
- ``c``: one prompt token's prefill, 2 x parameters / TP floating-point operations at
  ``prefill`` of the GPU's dense tensor throughput (FP8 where the weights and the GPU are).

At a steady request rate L, Little's law gives B = L x out x t and a prefill of
p = L x in x t tokens a step, so  t = a / (1 - L (out r + in c)):  the mean time per output
token.  TTFT's p99 is that of one queue whose work per request is its prefill and one step,
S = in c + t, at the step's load u = L (out r + in c): S plus the p99 of the wait, taken as
exponential with Kingman's mean for Poisson arrivals and a deterministic service,
u S / (2 (1 - u)):  S / (2 (1 - u)) x ln(100 u).  KV: the requests in
flight, L x (mean TTFT + out x t), must fit the requests the KV cache holds at their mean
footprint, the prompt and half the output (the planner's figure, every KV group counted).

Capacity is the highest L that meets all three, found by bisection.  Plain Python; the
planner gives it the plan's figures (weights, KV, parameters, TP) and the GPU's name.
"""
from __future__ import annotations

import math

# Datasheet figures, dense (no sparsity): memory bandwidth bytes/s and tensor FLOP/s by
# operand (docs/capacity.md names each datasheet).  NVML's name is the key.
GPUS = {
    "NVIDIA H200": {"bandwidth": 4.8e12, "fp8": 1979e12, "bf16": 989e12},
    "NVIDIA H100 80GB HBM3": {"bandwidth": 3.35e12, "fp8": 1979e12, "bf16": 989e12},
    "NVIDIA A100-SXM4-80GB": {"bandwidth": 2.039e12, "fp8": None, "bf16": 312e12},
    "NVIDIA A100-SXM4-40GB": {"bandwidth": 1.555e12, "fp8": None, "bf16": 312e12},
    "NVIDIA A100 80GB PCIe": {"bandwidth": 1.935e12, "fp8": None, "bf16": 312e12},
    "NVIDIA L40S": {"bandwidth": 0.864e12, "fp8": 733e12, "bf16": 362e12},
}
# Shares of the datasheet figures vLLM 0.25.1 reached on one H200 with Gemma-4-31B FP8-block
# (bench/results/h200/, h200-tune/, h200-capacity/; docs/capacity.md shows the arithmetic).
CALIBRATION = {
    "measured_on": "NVIDIA H200, vLLM 0.25.1, Gemma-4-31B FP8-block: closed-loop runs of 2026-11-29/12-01, "
                   "open-loop with realistic FP8 weights of 2026-12-04/06; an FP8 KV cache on an H100 (2026-12-07)",
    # one request's decode step 13.04 ms (76.7 tokens/s) for 32.2 GB of weights at 4.8 TB/s
    "read_weights": 0.515,
    # read_kv and prefill fitted together to the open-loop passing points of 1024/256 and
    # 8192/256 (realistic weights, runs 3, 5, 10 and 16): both capacities within 10 % of the
    # measured ones, every mean TPOT and in-flight figure within 20 %.  The KV bytes the
    # model counts (every layer, sliding ones up to their window) read at 0.80 of the
    # datasheet bandwidth ...
    "read_kv": 0.80,
    # ... and 17.7k prompt tokens/s: 61.4 GFLOP a token at 0.55 of 1,979 TFLOP/s
    "prefill": 0.55,
    # the p99 wait's share of its exponential tail: 1 - no smaller share fits both GPUs, and
    # one that fits the H200's 8192/256 tails puts its capacity above the measured failure
    "ttft_tail": 1.0,
    # An FP8 KV cache's read time against the same cache in 16 bits.  Half the bytes would
    # say 0.5; vLLM 0.25.1 serves it with FLASH_ATTN (FlashAttention 3 on the FP8 entries,
    # the backend it chose for both caches) and an H100 held 4.5 requests/s at 1024/256 with
    # it and failed at 5.0 on TPOT (run 23): 0.8 puts the capacity inside that bracket, 0.5
    # at 5.86, above the failure.
    "fp8_kv_read": 0.80,
}


class NoModel(ValueError):
    """The GPU or the plan has no figures the model can use; says which."""


def step_costs(plan: dict, gpu: str, kv_read_bytes, workload: dict, fp8_kv: bool = False) -> dict:
    """``a``, ``r(ctx)`` and ``c`` in seconds for one instance of ``plan`` on ``gpu``.
    ``kv_read_bytes(ctx)``: bytes of KV one request of ``ctx`` tokens has per GPU, its
    entries counted at 16 bits; ``fp8_kv``: the cache holds them in FP8."""
    spec = GPUS.get(gpu)
    if spec is None:
        raise NoModel("no capacity model for %s: its memory bandwidth and tensor throughput are not in "
                      "module_utils/capacity_model.GPUS" % gpu)
    fp8 = spec["fp8"] and "fp8" in str((plan.get("quantization") or {}).get("scheme", "")).lower()
    flops = spec["fp8"] if fp8 else spec["bf16"]
    tp = plan["tensor_parallel_size"]
    ctx = workload["input_len"] + workload["output_len"] / 2
    return {"a": plan["weight_bytes_per_gpu"] / (spec["bandwidth"] * CALIBRATION["read_weights"]),
            "r": kv_read_bytes(ctx) * (CALIBRATION["fp8_kv_read"] if fp8_kv else 1)
            / (spec["bandwidth"] * CALIBRATION["read_kv"]),
            "c": 2 * plan["parameters"] / tp / (flops * CALIBRATION["prefill"]),
            "operands": "fp8" if fp8 else "bf16"}


def at_rate(costs: dict, workload: dict, rate: float) -> dict:
    """Mean TPOT, p99 TTFT (seconds) and requests in flight at ``rate`` requests/s;
    None figures past saturation."""
    inp, out = workload["input_len"], workload["output_len"]
    load = rate * (out * costs["r"] + inp * costs["c"])
    if load >= 1:
        return {"tpot": None, "ttft_p99": None, "in_flight": None, "load": load}
    step = costs["a"] / (1 - load)
    service = inp * costs["c"] + step
    wait_mean = service * load / (2 * (1 - load))
    wait_p99 = (CALIBRATION["ttft_tail"] * service / (2 * (1 - load)) * math.log(100 * load)
                if load > 0.01 else 0.0)
    return {"tpot": step, "ttft_p99": service + wait_p99, "in_flight": rate * (service + wait_mean + out * step),
            "load": load}


def capacity(costs: dict, workload: dict, slo: dict, kv_requests: float) -> dict:
    """The highest request rate meeting the SLO and the KV cache (``kv_requests``: requests
    of the workload's length the cache holds), and the figure that bounds it."""
    def limit(rate):
        figures = at_rate(costs, workload, rate)
        if figures["tpot"] is None:
            return "saturation"
        if figures["tpot"] > slo["tpot_mean_ms"] / 1000.0:
            return "tpot"
        if figures["ttft_p99"] > slo["ttft_p99_s"]:
            return "ttft"
        if figures["in_flight"] > kv_requests:
            return "kv"
        return None

    low, high = 0.0, 1.0
    while limit(high) is None:
        low, high = high, high * 2
    while high - low > 1e-3 * high:
        middle = (low + high) / 2
        low, high = (middle, high) if limit(middle) is None else (low, middle)
    figures = at_rate(costs, workload, low)
    return {"requests_per_s": round(low, 2), "bound_by": limit(high), "in_flight": round(figures["in_flight"] or 0, 1),
            "tpot_ms": round((figures["tpot"] or 0) * 1000, 1), "ttft_p99_s": round(figures["ttft_p99"] or 0, 2)}
