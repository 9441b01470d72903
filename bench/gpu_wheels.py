#!/usr/bin/env python3
"""The wheels a lent GPU host needs for vLLM, in pieces one device call can carry.

The H200 image has torch and no vLLM, and reaches no package index.  From the host's own
``pip list --format=freeze`` (bench/results/h200-capacity/host-freeze.txt was read on
2026-12-03) this resolves vLLM's dependencies for that host's Python and platform, keeps
every package the host already has (its torch, numpy, numba, setuptools), leaves out the
GPU-kernel extras vLLM imports only when asked (flashinfer, tilelang, cutlass-dsl, ...),
downloads the rest, drops two vLLM extensions whose imports are guarded and xgrammar's
static library (not loaded at run time), and splits one tar into pieces of 58 MiB:

    python3 bench/gpu_wheels.py --freeze bench/results/h200-capacity/host-freeze.txt --out .whl

On the host (one piece carried per call, ``.whl`` in .git/info/exclude):
    cat /tmp/p/piece.* | tar x -C /tmp/p && python3 -m pip install -q --no-index --no-deps \\
        --no-compile --target /tmp/site /tmp/p/whl/*.whl
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

from packaging.utils import canonicalize_name

LEFT_OUT = ("flashinfer", "tilelang", "tokenspeed", "humming-kernels", "quack-kernels", "nvidia-cutlass-dsl",
            "cuda-toolkit", "nvidia-cuda-", "nvidia-nvvm", "nvidia-cudnn-frontend", "cuda-tile", "cuda-python",
            "pynvvideocodec", "torchcodec", "z3-solver", "fastsafetensors", "numba", "numpy", "llvmlite",
            "setuptools")
DROPPED = {"vllm": ("vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so", "vllm/_moe_C_stable_libtorch.abi3.so"),
           "xgrammar": ("xgrammar/lib/libxgrammar.a",)}
PLATFORM = ["--python-version", "3.12", "--implementation", "cp", "--only-binary=:all:"] + [
    arg for n in range(17, 40) for arg in ("--platform", "manylinux_2_%d_x86_64" % n)] + [
    "--platform", "manylinux2014_x86_64", "--platform", "manylinux1_x86_64", "--platform", "any"]
PIECE = 58 << 20


def needed(report: dict, host: dict) -> list:
    """name==version of every resolved package the host lacks, less LEFT_OUT."""
    return sorted("%s==%s" % (item["metadata"]["name"], item["metadata"]["version"]) for item in report["install"]
                  if canonicalize_name(item["metadata"]["name"]) not in host
                  and not canonicalize_name(item["metadata"]["name"]).startswith(LEFT_OUT))


def strip(wheel: Path, members: tuple) -> None:
    """Rewrite ``wheel`` without ``members`` (and their RECORD lines)."""
    with zipfile.ZipFile(wheel) as source, tempfile.NamedTemporaryFile(dir=wheel.parent, delete=False) as handle:
        with zipfile.ZipFile(handle, "w", zipfile.ZIP_DEFLATED) as target:
            for info in source.infolist():
                if info.filename in members:
                    continue
                data = source.read(info)
                if info.filename.endswith(".dist-info/RECORD"):
                    data = b"\n".join(line for line in data.split(b"\n")
                                      if line.split(b",")[0].decode() not in members)
                target.writestr(info, data)
    Path(handle.name).replace(wheel)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--freeze", type=Path, required=True, help="the host's pip list --format=freeze")
    parser.add_argument("--vllm", default="0.25.1")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    host = {canonicalize_name(line.split("==")[0]) for line in args.freeze.read_text().splitlines() if "==" in line}
    work = args.out / "build"
    (work / "whl").mkdir(parents=True, exist_ok=True)
    pip = [sys.executable, "-m", "pip"]
    subprocess.run(pip + ["install", "--dry-run", "--ignore-installed", "--report", str(work / "report.json"),
                          "--target", str(work / "none")] + PLATFORM + ["vllm==%s" % args.vllm], check=True)
    specs = needed(json.loads((work / "report.json").read_text()), host)
    subprocess.run(pip + ["download", "--no-deps", "-d", str(work / "whl")] + PLATFORM + specs, check=True)
    for wheel in (work / "whl").glob("*.whl"):
        members = DROPPED.get(canonicalize_name(wheel.name.split("-")[0]))
        if members:
            strip(wheel, members)
    with tarfile.open(work / "all.tar", "w") as tar:
        tar.add(work / "whl", arcname="whl")
    with open(work / "all.tar", "rb") as whole:
        for number, chunk in enumerate(iter(lambda: whole.read(PIECE), b"")):
            (args.out / ("piece.a%s" % "abcdefghij"[number])).write_bytes(chunk)
    print("%d wheels in %s, pieces: %s" % (len(specs), work / "whl",
                                           " ".join(sorted(p.name for p in args.out.glob("piece.*")))))


if __name__ == "__main__":
    main()
