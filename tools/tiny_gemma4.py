#!/usr/bin/env python3
"""Generate the project's tiny random-weight Gemma-4 model (seeded, reproducible).

The real Gemma-4 architecture (Gemma4ForCausalLM: 5 sliding-window layers and one
full-attention layer with its own head size, per-layer inputs), 336k parameters,
a 512-token byte-level BPE tokenizer with byte fallback and a Gemma-style chat
template.  vLLM's CPU build serves it (docs/test-hosts.md).
It is the model of the demo and of every test that serves.

    python tools/tiny_gemma4.py tests/fixtures/models/tiny-gemma4

Needs transformers 5.19+, tokenizers, safetensors and torch (CPU) -- not part of the
control node's toolchain; run it in a throwaway venv when the model must change.
"""
from __future__ import annotations

import sys
from pathlib import Path

SEED = 20261129
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{% set role = 'model' if message['role'] == 'assistant' else message['role'] %}"
    "<start_of_turn>{{ role }}\n{{ message['content'] | trim }}<end_of_turn>\n"
    "{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}")
SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"]
CORPUS = """
vLLM serves large language models with paged attention and continuous batching.
A fleet of inference hosts runs the same pinned model revision behind a gateway.
Gemma 4 mixes sliding window attention layers with full attention layers.
The quick brown fox jumps over the lazy dog. 0123456789 + - * / = ( ) [ ] { } < > .
Operators re-run the playbooks on new servers; every run must be idempotent.
Bonjour, hola, hallo, ciao, привет, 你好, こんにちは, 안녕하세요, مرحبا.
"""


def build_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(byte_fallback=True))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=512, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([CORPUS] * 8, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<bos>", eos_token="<eos>",
                                   pad_token="<pad>", unk_token="<unk>",
                                   chat_template=CHAT_TEMPLATE)


def build_model(tokenizer):
    import torch
    from transformers import Gemma4ForCausalLM, Gemma4TextConfig

    torch.manual_seed(SEED)
    config = Gemma4TextConfig(
        vocab_size=512, vocab_size_per_layer_input=512, hidden_size=64, intermediate_size=128,
        num_hidden_layers=6, num_attention_heads=2, num_key_value_heads=1, head_dim=32,
        hidden_size_per_layer_input=16, max_position_embeddings=2048, sliding_window=128,
        layer_types=["sliding_attention"] * 5 + ["full_attention"],
        per_layer_config={"05": {"head_dim": 64}},
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, dtype="bfloat16")
    model = Gemma4ForCausalLM(config).to(torch.bfloat16)
    model.generation_config.max_length = 2048
    return model


def main(out: str) -> None:
    target = Path(out)
    target.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer()
    model = build_model(tokenizer)
    model.save_pretrained(target, safe_serialization=True)
    tokenizer.save_pretrained(target)
    params = sum(p.numel() for p in model.parameters())
    print(f"wrote {target}: {params:,} parameters, vocabulary {len(tokenizer)}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/models/tiny-gemma4")
