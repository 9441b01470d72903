"""A vLLM plugin for the GPU rehearsals: random FP8 weights with a real checkpoint's spread.

vLLM's ``--load-format dummy`` fills every parameter with uniform(-1e-3, 1e-3); an FP8
weight drawn that way is 97.7 % exact zeros (float8_e4m3fn's smallest subnormal is 2**-9),
and the H200 multiplies such weights 9-15 % faster than a real checkpoint's
(``bench/results/dummy-weights/``).  This plugin registers the load format
``dummy_realistic``: vLLM's dummy load, then every float8 parameter drawn again as an
FP8-block checkpoint holds its weights - normal values scaled per block of 128 x 128 values
so that the block's largest magnitude is FP8's largest (448) - and the weight's scales set
so that the weights it stands for have a standard deviation of 0.02, as trained linear
layers roughly do.  Everything else (norms, embeddings, BF16 layers) stays as vLLM draws it.
It logs the exact-zero fraction of the FP8 weights before and after.

The draw runs on the flattened weight in runs of 16,384 values (one 128 x 128 block's
worth), before vLLM's post-load processing: the same statistics whatever the layout.

``bench/gpu_rehearsal.py --weights realistic`` puts this file and an entry point for it
(group ``vllm.general_plugins``) on the engine's PYTHONPATH.
"""
from __future__ import annotations

import logging

import torch

BLOCK = 128 * 128
FP8_MAX = 448.0
WEIGHT_STD = 0.02
SCALE_NAMES = ("weight_scale", "weight_scale_inv")
LOG = logging.getLogger("vllm.realistic_weights")


@torch.no_grad()
def redraw_fp8(weight: torch.Tensor, seed: int) -> float:
    """Draw ``weight`` (float8) again with a block-quantised normal spread; returns the
    scale (value per FP8 unit) that makes those weights' standard deviation WEIGHT_STD."""
    generator = torch.Generator(device=weight.device)
    generator.manual_seed(seed)
    count = weight.numel()
    runs = -(-count // BLOCK)
    values = torch.randn((runs, BLOCK), generator=generator, device=weight.device, dtype=torch.float32)
    values *= FP8_MAX / values.abs().amax(dim=1, keepdim=True)
    spread = values.std().item()
    weight.copy_(values.view(-1)[:count].view(weight.shape).to(weight.dtype))
    return WEIGHT_STD / spread


def zero_fraction(tensors) -> float:
    """The fraction of float8_e4m3fn values that are +0 or -0 (their bits less the sign)."""
    total = sum(t.numel() for t in tensors)
    return sum(int(((t.view(torch.uint8) & 0x7F) == 0).sum().item()) for t in tensors) / total if total else 0.0


@torch.no_grad()
def redraw_model(model: torch.nn.Module, seed: int = 1234) -> dict:
    """Every module's float8 ``weight`` drawn again, its scale parameters filled to match."""
    modules = [m for m in model.modules()
               if isinstance(getattr(m, "weight", None), torch.Tensor) and m.weight.dtype == torch.float8_e4m3fn]
    weights = [m.weight.data for m in modules]
    before = zero_fraction(weights)
    for number, module in enumerate(modules):
        scale = redraw_fp8(module.weight.data, seed + number)
        for name in SCALE_NAMES:
            param = getattr(module, name, None)
            if isinstance(param, torch.Tensor) and param.is_floating_point():
                param.data.fill_(scale)
    after = zero_fraction(weights)
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return {"fp8_weights": len(weights), "values": sum(w.numel() for w in weights),
            "zero_fraction_dummy": before, "zero_fraction_realistic": after}


def register() -> None:
    """The plugin's entry point: registers load format ``dummy_realistic``."""
    from vllm.model_executor.model_loader import register_model_loader
    from vllm.model_executor.model_loader.dummy_loader import DummyModelLoader

    @register_model_loader("dummy_realistic")
    class RealisticDummyLoader(DummyModelLoader):
        def load_weights(self, model, model_config) -> None:
            super().load_weights(model, model_config)
            LOG.warning("realistic FP8 weights: %s", redraw_model(model))
