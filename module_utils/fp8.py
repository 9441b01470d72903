"""How vLLM runs a checkpoint's quantization on a GPU of a given compute capability.

Facts (docs/models.md, vLLM ``platforms/cuda.py``):
* native FP8 W8A8 needs compute capability >= 8.9 (``supports_fp8()``): Ada (L4, L40S,
  RTX 4090), Hopper, Blackwell.  The seed guide's "Ada cannot do FP8" is false.
* 7.5 <= cc < 8.9 (T4, A100, A10, 3090): FP8 checkpoints run weight-only (W8A16)
  through Marlin: half the weight memory of BF16, no FP8 compute.
* "FP8-block" is a weight format (128x128 block scales, compressed-tensors); it has
  nothing to do with the KV-cache block size.
* A pre-quantized checkpoint's method comes from its config.json; passing
  ``--quantization fp8`` for a compressed-tensors checkpoint makes vLLM stop.
"""
from __future__ import annotations

NATIVE_FP8 = (8, 9)
MARLIN_MIN = (7, 5)


def parse_cc(value) -> tuple[int, int]:
    major, _, minor = str(value).partition(".")
    return int(major), int(minor or 0)


def gpu_fp8_mode(compute_capability) -> str:
    cc = parse_cc(compute_capability)
    if cc >= NATIVE_FP8:
        return "native"
    if cc >= MARLIN_MIN:
        return "weight_only"
    return "unsupported"


def checkpoint_scheme(quantization_config: dict | None) -> dict:
    """Name the checkpoint's quantization: method (as vLLM reads it) and scheme."""
    if not quantization_config:
        return {"method": None, "scheme": "none"}
    method = quantization_config.get("quant_method")
    if method == "compressed-tensors":
        weights = [g.get("weights") or {} for g in
                   (quantization_config.get("config_groups") or {}).values()]
        if any(w.get("type") == "float" and w.get("num_bits") == 8 for w in weights):
            block = any(w.get("strategy") == "block" for w in weights)
            return {"method": method, "scheme": "fp8_block" if block else "fp8"}
        bits = sorted({w.get("num_bits") for w in weights if w.get("num_bits")})
        return {"method": method, "scheme": "int%s" % bits[0] if bits else "unknown"}
    if method == "fp8":
        return {"method": method, "scheme": "fp8"}
    if method in ("awq", "gptq"):
        return {"method": method, "scheme": "%s_%sbit" % (method, quantization_config.get("bits", 4))}
    return {"method": method, "scheme": "unknown"}


def how_vllm_runs(compute_capability, quantization_config: dict | None,
                  requested: str | None = None) -> dict:
    """What vLLM does with this checkpoint on this GPU.

    ``requested`` is an operator's ``--quantization`` value, if any.  Returns
    ``supported``, ``mode``, ``detail`` and ``quantization_flag`` (the value to pass,
    None to pass nothing); ``error`` when it cannot work.
    """
    cc = parse_cc(compute_capability)
    scheme = checkpoint_scheme(quantization_config)
    fp8_mode = gpu_fp8_mode(compute_capability)
    result = {"scheme": scheme["scheme"], "method": scheme["method"], "fp8": fp8_mode,
              "supported": True, "quantization_flag": None}
    if scheme["method"] and requested and requested != scheme["method"]:
        result.update(supported=False, error=(
            "--quantization %s contradicts the checkpoint's quantization_config (%s): vLLM stops "
            "with 'Quantization method specified in the model config (%s) does not match the "
            "quantization method specified in the `quantization` argument (%s)'. Pre-quantized "
            "checkpoints need no --quantization flag." % (requested, scheme["method"],
                                                          scheme["method"], requested)))
        return result
    if scheme["scheme"] in ("fp8", "fp8_block") or (not scheme["method"] and requested == "fp8"):
        online = not scheme["method"]
        if fp8_mode == "native":
            detail = "W8A8 FP8 (weights and activations in FP8)"
        elif fp8_mode == "weight_only":
            detail = "W8A16 FP8 weight-only through Marlin (FP8 weights, 16-bit compute)"
        else:
            result.update(supported=False, error="FP8 needs compute capability >= 7.5 "
                          "(weight-only) or >= 8.9 (native); this GPU has %d.%d" % cc)
            return result
        if online:
            detail += ", quantized at load time"
            result["quantization_flag"] = "fp8"
        result.update(mode="fp8_" + fp8_mode, detail=detail)
        return result
    if scheme["method"] in ("awq", "gptq"):
        if cc < MARLIN_MIN:
            result.update(supported=False, error="%s kernels need compute capability >= 7.5; "
                          "this GPU has %d.%d" % ((scheme["method"].upper(),) + cc))
            return result
        kernel = "Marlin" if cc >= (8, 0) else "the %s GEMM kernel" % scheme["method"].upper()
        result.update(mode="int4_weight_only", detail="4-bit weights through %s" % kernel)
        return result
    if scheme["method"]:
        result.update(mode="other", detail="%s as vLLM reads it from config.json" % scheme["method"])
        return result
    if requested:
        result.update(supported=False, error="--quantization %s for an unquantized checkpoint is "
                      "not a choice the project knows; use fp8 or a pre-quantized checkpoint"
                      % requested)
        return result
    dtype = "bfloat16" if cc >= (8, 0) else "float16"
    result.update(mode=dtype, detail="unquantized %s weights" % dtype)
    return result


def probe_scaled_mm(torch, device_index: int = 0) -> str:
    """Run a tiny FP8 matmul (torch._scaled_mm, float8_e4m3fn) on one GPU."""
    try:
        device = torch.device("cuda", device_index)
        a = torch.randn(32, 64, device=device).to(torch.float8_e4m3fn)
        b = torch.randn(32, 64, device=device).to(torch.float8_e4m3fn).t()
        one = torch.tensor(1.0, device=device)
        out = torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        torch.cuda.synchronize(device)
        return "ok %s %s" % (tuple(out.shape), out.dtype)
    except Exception as exc:  # any failure is the probe's answer
        return "failed: %s" % str(exc).splitlines()[0]
