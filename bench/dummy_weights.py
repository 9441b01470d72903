#!/usr/bin/env python3
"""How much of an FP8 weight vLLM's dummy loader leaves at exactly zero, and whether the
GPU multiplies such weights faster than weights with a real spread.

vLLM's ``--load-format dummy`` (``initialize_dummy_weights`` in
``vllm/model_executor/model_loader/weight_utils.py``, 0.25 to 0.33) fills every floating
parameter with uniform(-1e-3, 1e-3); an FP8 parameter is drawn in float16 and cast to its
dtype.  float8_e4m3fn's smallest subnormal is 2**-9 (0.00195), so every draw below half of
it (2**-10, 0.000977) rounds to zero.  The rehearsal benchmarks (bench/gpu_rehearsal.py)
serve such weights.

This bench draws the weights of the Gemma-4-31B MLP's up projection (hidden 5376,
intermediate 21504) exactly that way, counts the zeros, and times an FP8 GEMM
(``torch._scaled_mm``, what block-FP8 linear layers end in on Hopper) against weights
with a real checkpoint's spread: normal values whose blocks of 128 x 128 values are scaled so that
the block's largest magnitude is FP8's largest (448), as FP8-block quantisation does.
The same for the BF16 GEMM, for comparison.  Prints a JSON line per measurement.

    python3 bench/dummy_weights.py [--out DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import time

import torch
from realistic_weights import redraw_fp8

HIDDEN, INTERMEDIATE = 5376, 21504
LOW, HIGH, SEED = -1e-3, 1e-3, 1234  # vLLM's initialize_dummy_weights defaults


def dummy(shape, dtype, device):
    """vLLM's dummy initialisation of one parameter, line for line."""
    param = torch.empty(shape, dtype=dtype, device=device)
    generator = torch.Generator(device=device)
    generator.manual_seed(SEED)
    if torch.finfo(dtype).bits < 16:
        tmp = param.to(torch.float16).uniform_(LOW, HIGH, generator=generator).to(dtype)
        param.copy_(tmp)
    else:
        param.uniform_(LOW, HIGH, generator=generator)
    return param


def realistic_fp8(shape, device):
    """The draw the rehearsals serve (realistic_weights.redraw_fp8): normal values scaled per
    128 x 128 values so that the block's largest magnitude is FP8's 448."""
    weight = torch.empty(shape, dtype=torch.float8_e4m3fn, device=device)
    redraw_fp8(weight, SEED)
    return weight


def timed(fn, repeat=200):
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    best = []
    for _ in range(5):
        start.record()
        for _ in range(repeat):
            fn()
        end.record()
        torch.cuda.synchronize()
        best.append(start.elapsed_time(end) / repeat)
    return min(best), sorted(best)[len(best) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    parser.add_argument("--tokens", default="256,2048,8192", help="rows of the activation (a batch's tokens)")
    args = parser.parse_args()
    device = "cuda"
    results = []

    def emit(record):
        results.append(record)
        print(json.dumps(record), flush=True)

    fp8_dummy = dummy((INTERMEDIATE, HIDDEN), torch.float8_e4m3fn, device)
    fp8_real = realistic_fp8((INTERMEDIATE, HIDDEN), device)
    bf16_dummy = dummy((INTERMEDIATE, HIDDEN), torch.bfloat16, device)
    bf16_real = (torch.randn((INTERMEDIATE, HIDDEN), device=device) * 0.02).to(torch.bfloat16)
    for name, weight in (("fp8 dummy", fp8_dummy), ("fp8 realistic", fp8_real),
                         ("bf16 dummy", bf16_dummy), ("bf16 realistic", bf16_real)):
        values = weight.float()
        emit({"weights": name, "zero_fraction": round((values == 0).float().mean().item(), 5),
              "distinct_values": int(torch.unique(weight.view(torch.uint8) if weight.dtype == torch.float8_e4m3fn
                                                  else values).numel()),
              "device": torch.cuda.get_device_name()})
    one = torch.ones((), device=device)
    for tokens in map(int, args.tokens.split(",")):
        act_fp8 = (torch.randn((tokens, HIDDEN), device=device) * 100).clamp(-448, 448).to(torch.float8_e4m3fn)
        act_bf16 = torch.randn((tokens, HIDDEN), device=device, dtype=torch.bfloat16)
        flops = 2 * tokens * HIDDEN * INTERMEDIATE
        for name, weight in (("fp8 dummy", fp8_dummy), ("fp8 realistic", fp8_real)):
            best, median = timed(lambda w=weight: torch._scaled_mm(act_fp8, w.t(), scale_a=one, scale_b=one,
                                                                   out_dtype=torch.bfloat16))
            emit({"gemm": name, "tokens": tokens, "best_ms": round(best, 4), "median_ms": round(median, 4),
                  "tflops": round(flops / best / 1e9, 1)})
        for name, weight in (("bf16 dummy", bf16_dummy), ("bf16 realistic", bf16_real)):
            best, median = timed(lambda w=weight: act_bf16 @ w.t())
            emit({"gemm": name, "tokens": tokens, "best_ms": round(best, 4), "median_ms": round(median, 4),
                  "tflops": round(flops / best / 1e9, 1)})
    with open(os.path.join(args.out, "dummy_weights.json"), "w") as handle:
        json.dump({"measured": time.strftime("%Y-%m-%d"), "torch": torch.__version__, "results": results},
                  handle, indent=1)


if __name__ == "__main__":
    main()
