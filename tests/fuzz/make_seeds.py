#!/usr/bin/env python3
"""Writes the seed inputs of the fuzz targets into tests/fuzz/corpus/<target>/seed-*.

Model-file inputs are config.json, a NUL byte and model.safetensors (see fuzz_model_files.cpp);
the models are small random ones in every storage type and variant. Capture inputs are a
selector byte and a text (see fuzz_capture.cpp). Standard library only.
"""
import json
import pathlib
import random
import struct

HERE = pathlib.Path(__file__).resolve().parent
DATA = HERE.parent / "data"


def tensor_shapes(c):
    d, f, h = c["d_model"], c["d_ff"], c["n_heads"]
    shapes = [("tok_emb.weight", [c["vocab_size"], d])]
    for l in range(c["n_layers"]):
        p = f"layers.{l}."
        shapes += [(p + "ln1.weight", [d]), (p + "ln1.bias", [d]), (p + "attn.wq", [d, d]),
                   (p + "attn.wk", [d, d]), (p + "attn.wv", [d, d]), (p + "attn.wo", [d, d]),
                   (p + "attn.gamma", [h]), (p + "ln2.weight", [d]), (p + "ln2.bias", [d]),
                   (p + "ffn.w1", [f, d]), (p + "ffn.b1", [f]), (p + "ffn.w2", [d, f]),
                   (p + "ffn.b2", [d]), (p + "ffn.ln.weight", [d]), (p + "ffn.ln.bias", [d])]
    return shapes + [("ln_f.weight", [d]), ("ln_f.bias", [d])]


def encode(values, dtype):
    if dtype == "F32":
        return b"".join(struct.pack("<f", v) for v in values)
    if dtype == "F16":
        return b"".join(struct.pack("<e", v) for v in values)
    # BF16: the upper half of the float32 bits
    return b"".join(struct.pack("<f", v)[2:] for v in values)


def safetensors(tensors, dtype, metadata=None):
    header, data = {}, b""
    if metadata:
        header["__metadata__"] = metadata
    for name, shape, values in tensors:
        raw = encode(values, dtype)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-(8 + len(text)) % 8)
    return struct.pack("<Q", len(text)) + text + data


def model_seed(config, dtype, seed, metadata=None):
    rng = random.Random(seed)
    tensors = []
    for name, shape in tensor_shapes(config):
        n = 1
        for s in shape:
            n *= s
        tensors.append((name, shape, [round(rng.gauss(0, 0.5), 3) for _ in range(n)]))
    return json.dumps(config).encode() + b"\0" + safetensors(tensors, dtype, metadata)


def small_config(**changes):
    c = {"vocab_size": 8, "d_model": 4, "n_layers": 1, "n_heads": 2, "d_ff": 4,
         "context_length": 8, "attention": "softmax", "ffn": "relu"}
    c.update(changes)
    return c


def model_file_seeds():
    return {
        "f32-softmax": model_seed(small_config(), "F32", 1, {"format": "relulens"}),
        "f16-relu-len": model_seed(small_config(attention={"variant": "relu_len", "a": 0.5}, ffn="gelu"), "F16", 2),
        "bf16-family": model_seed(small_config(n_layers=2, attention={"variant": "family", "h": "relu2", "a": 1.5},
                                               ffn="softmax_ln", name="two", description="two layers"), "BF16", 3),
        "f32-reluformer": model_seed(small_config(d_model=8, n_heads=2, d_ff=6, attention="reluformer", ffn="softmax",
                                                  rope_base=500.0, norm_eps=1e-6), "F32", 4),
        "config-tiny": (DATA / "tiny" / "config.json").read_bytes(),
        "safetensors-f16": b"{}\0" + safetensors([("a", [2, 2], [1, 2, 3, 4])], "F16"),
        "safetensors-empty": b"{}\0" + safetensors([], "F32", {"k": "v"}),
        "safetensors-scalar": b"{}\0" + safetensors([("s", [], [3.5]), ("z", [0, 3], [])], "BF16"),
    }


def capture_seeds():
    excerpt = (DATA / "excerpt.txt").read_text(encoding="utf-8")
    texts = [
        "It is a truth universally acknowledged, that a single man",
        "Emma Woodhouse, handsome, clever, and rich",
        "café naïve résumé — «quotes»",
        "日本語のテキストと中文",
        "emoji 🙂👍🏽 and ZWJ 👩‍👩‍👧",
        "  two  spaces\ttab\nnewline\r\n",
        excerpt[:600],
    ]
    seeds = {}
    for i, text in enumerate(texts):
        for selector in (0, 2 + 5 * i, 120 + i, 240 + i % 16):
            seeds[f"text{i}-sel{selector}"] = bytes([selector % 256]) + text.encode("utf-8")
    seeds["invalid-utf8"] = bytes([7]) + b"ok \xff\xfe \xc3 \xe2\x82 end"
    seeds["one-byte"] = bytes([3]) + b"a"
    return seeds


def main():
    for target, seeds in (("fuzz_model_files", model_file_seeds()), ("fuzz_capture", capture_seeds())):
        folder = HERE / "corpus" / target
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in seeds.items():
            (folder / f"seed-{name}").write_bytes(data)
        print(f"{folder}: {len(seeds)} seeds")


if __name__ == "__main__":
    main()
