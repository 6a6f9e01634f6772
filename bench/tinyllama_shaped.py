#!/usr/bin/env python3
"""Writes a Hugging Face llama folder with TinyLlama-1.1B's shapes and random weights, for
`relulens bench --model DIR` (never committed; about 2.2 GB of bf16 on disk).

Shapes: 22 layers, hidden 2048, 32 heads, 4 kv heads, intermediate 5632, vocabulary 32,000,
untied lm_head, bf16. The tokenizer is ReluLens's bundled SentencePiece model (its 4,096 pieces
fit in the 32,000-row embedding: the rows past them are padding, as in checkpoints that round
their vocabulary up), so the forward pass costs exactly what TinyLlama's does.

  /usr/bin/python3 bench/tinyllama_shaped.py --out build/bench/tinyllama-shaped \
      --tokenizer resources/models/tokenizer.model
"""
import argparse
import json
import os
import shutil
import struct

import numpy as np

HIDDEN, INTERMEDIATE, LAYERS, HEADS, KV_HEADS, VOCAB = 2048, 5632, 22, 32, 4, 32000


def shapes():
    head_dim = HIDDEN // HEADS
    out = [("model.embed_tokens.weight", (VOCAB, HIDDEN))]
    for l in range(LAYERS):
        p = f"model.layers.{l}."
        out += [(p + "input_layernorm.weight", (HIDDEN,)),
                (p + "self_attn.q_proj.weight", (HEADS * head_dim, HIDDEN)),
                (p + "self_attn.k_proj.weight", (KV_HEADS * head_dim, HIDDEN)),
                (p + "self_attn.v_proj.weight", (KV_HEADS * head_dim, HIDDEN)),
                (p + "self_attn.o_proj.weight", (HIDDEN, HEADS * head_dim)),
                (p + "post_attention_layernorm.weight", (HIDDEN,)),
                (p + "mlp.gate_proj.weight", (INTERMEDIATE, HIDDEN)),
                (p + "mlp.up_proj.weight", (INTERMEDIATE, HIDDEN)),
                (p + "mlp.down_proj.weight", (HIDDEN, INTERMEDIATE))]
    out += [("model.norm.weight", (HIDDEN,)), ("lm_head.weight", (VOCAB, HIDDEN))]
    return out


def bf16_bytes(values):
    """float32 -> bf16 by truncation (enough for a benchmark's random weights)."""
    return (values.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16).tobytes()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--tokenizer", required=True)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    header, offset = {}, 0
    for name, shape in shapes():
        n = int(np.prod(shape))
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + 2 * n]}
        offset += 2 * n
    text = json.dumps(header, separators=(",", ":"))
    text += " " * ((8 - (8 + len(text)) % 8) % 8)
    rng = np.random.default_rng(1)
    path = os.path.join(args.out, "model.safetensors")
    with open(path + ".partial", "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text.encode())
        for name, shape in shapes():
            if name.endswith("norm.weight"):
                values = np.ones(shape, np.float32)
            else:
                values = rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)
            f.write(bf16_bytes(values))
    os.replace(path + ".partial", path)
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": HIDDEN,
              "intermediate_size": INTERMEDIATE, "num_hidden_layers": LAYERS,
              "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "vocab_size": VOCAB,
              "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
              "hidden_act": "silu", "tie_word_embeddings": False, "bos_token_id": 1,
              "eos_token_id": 2, "torch_dtype": "bfloat16"}
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(args.out, "tokenizer_config.json"), "w") as f:
        json.dump({"add_bos_token": True, "add_eos_token": False}, f)
    shutil.copyfile(args.tokenizer, os.path.join(args.out, "tokenizer.model"))
    print(f"{args.out}: {offset / 1e9:.2f} GB of bf16 weights, {offset // 2 / 1e9:.3f} billion parameters")


if __name__ == "__main__":
    main()
