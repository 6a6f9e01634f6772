#!/usr/bin/env python3
"""Synthetic llama2.c model files and reference logits for `relulens import-llama2c`.

Contract (the formats of karpathy/llama2.c's export.py and run.c):
  /usr/bin/python3 tests/reference/llama2c_fixtures.py --out DIR [--self-check]
writes DIR/<case>.bin for each case in CASES and DIR/reference.json:
  {"cases": [{"name", "file", "version", "tied", "dim", "hidden_dim", "n_layers", "n_heads",
              "n_kv_heads", "vocab_size", "seq_len", "ids": [L ints], "logits": [L x vocab]}]}
  v0: 7 x int32 header (vocab < 0 => untied), then fp32 tok_embeddings, rms_att, wq, wk, wv, wo,
      rms_ffn, w1, w2, w3, rms_final, freq_cis_real, freq_cis_imag [, wcls].
  v1: 256-byte header (uint32 magic 0x616b3432, int32 version 1, 7 x int32, uint8 shared flag,
      zero padding), then fp32 rms_att, rms_ffn, rms_final, tok_embeddings, wq, wk, wv, wo, w1,
      w2, w3 [, wcls if not shared].
The logits come from an independent float64 NumPy forward of karpathy/llama2.c run.c on the
ORIGINAL (Meta) weight layout with interleaved GPT-J rotary on pairs (2i, 2i+1). The C++ importer
permutes q/k rows to HF rotate-half order, so agreement with these logits proves the permutation.
--self-check re-reads every .bin with a separate reader and asserts an HF rotate-half forward on
permuted q/k weights equals the interleaved forward to 1e-9. NumPy only, fixed seed, seconds.
"""
import argparse
import json
import os
import struct

import numpy as np

VOCAB, DIM, HIDDEN, LAYERS, SEQ_LEN = 512, 48, 96, 2, 32
EPS, THETA = 1e-5, 10000.0
IDS = [1, 417, 278, 278, 269, 259, 301, 348, 482, 300, 10, 77]
CASES = [  # name, version, n_heads, n_kv_heads, tied
    ("v0_tied", 0, 4, 4, True),
    ("v0_untied_gqa", 0, 6, 2, False),
    ("v1_tied_gqa", 1, 4, 2, True),
    ("v1_untied", 1, 4, 1, False),
]
MAGIC = 0x616B3432
LAYER_MATS = ["wq", "wk", "wv", "wo", "w1", "w2", "w3"]


def shapes(nh, nkv, tied):
    kv = DIM * nkv // nh
    s = {"tok_embeddings": (VOCAB, DIM), "rms_att": (LAYERS, DIM), "rms_ffn": (LAYERS, DIM),
         "rms_final": (DIM,), "wq": (LAYERS, DIM, DIM), "wk": (LAYERS, kv, DIM),
         "wv": (LAYERS, kv, DIM), "wo": (LAYERS, DIM, DIM), "w1": (LAYERS, HIDDEN, DIM),
         "w2": (LAYERS, DIM, HIDDEN), "w3": (LAYERS, HIDDEN, DIM)}
    if not tied:
        s["wcls"] = (VOCAB, DIM)
    return s


def make_weights(seed, nh, nkv, tied):
    rng = np.random.default_rng(seed)
    w = {}
    for name, shp in shapes(nh, nkv, tied).items():
        if name.startswith("rms"):
            a = 1.0 + 0.2 * rng.standard_normal(shp)
        elif name in ("tok_embeddings", "wcls"):
            a = 0.5 * rng.standard_normal(shp)
        else:
            a = 0.2 * rng.standard_normal(shp)
        w[name] = a.astype(np.float32)
    return w


def inv_freq(hs):
    return 1.0 / THETA ** (np.arange(0, hs, 2, dtype=np.float64) / hs)  # [hs/2]


def order(version, tied):
    if version == 0:
        o = ["tok_embeddings", "rms_att", "wq", "wk", "wv", "wo", "rms_ffn", "w1", "w2", "w3",
             "rms_final", "freq_cis_real", "freq_cis_imag"]
    else:
        o = ["rms_att", "rms_ffn", "rms_final", "tok_embeddings"] + LAYER_MATS
    return o + ([] if tied else ["wcls"])


def write_bin(path, version, nh, nkv, tied, w):
    hs = DIM // nh
    ang = np.outer(np.arange(SEQ_LEN), inv_freq(hs))  # [seq_len, hs/2]
    arrays = dict(w, freq_cis_real=np.cos(ang).astype(np.float32),
                  freq_cis_imag=np.sin(ang).astype(np.float32))
    dims = [DIM, HIDDEN, LAYERS, nh, nkv, VOCAB, SEQ_LEN]
    with open(path, "wb") as f:
        if version == 0:
            dims[5] = VOCAB if tied else -VOCAB
            f.write(struct.pack("<7i", *dims))
        else:
            head = struct.pack("<Ii7iB", MAGIC, 1, *dims, 1 if tied else 0)
            f.write(head + b"\0" * (256 - len(head)))
        for name in order(version, tied):
            f.write(np.ascontiguousarray(arrays[name], dtype="<f4").tobytes())


def rmsnorm(x, g):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + EPS) * g


def rope_interleaved(x, pos, hs):
    """run.c: rotate pairs (2i, 2i+1) of each head. x: [T, H, hs]."""
    ang = pos[:, None] * inv_freq(hs)[None, :]  # [T, hs/2]
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = x0 * c - x1 * s
    out[..., 1::2] = x0 * s + x1 * c
    return out


def rope_half(x, pos, hs):
    """HF: x*cos + rotate_half(x)*sin, pairing i with i + hs/2. x: [T, H, hs]."""
    ang = pos[:, None] * inv_freq(hs)[None, :]
    c = np.concatenate([np.cos(ang)] * 2, axis=-1)[:, None, :]
    s = np.concatenate([np.sin(ang)] * 2, axis=-1)[:, None, :]
    h = hs // 2
    rot = np.concatenate([-x[..., h:], x[..., :h]], axis=-1)
    return x * c + rot * s


def forward(w, nh, nkv, tied, ids, rope=rope_interleaved):
    """Float64 forward over all positions at once (causal), equal to run.c step by step."""
    W = {k: v.astype(np.float64) for k, v in w.items()}
    hs, T = DIM // nh, len(ids)
    pos = np.arange(T, dtype=np.float64)
    mask = np.triu(np.full((T, T), -np.inf), k=1)
    kv_of = np.arange(nh) // (nh // nkv)  # query head h uses kv head h // kv_mul
    x = W["tok_embeddings"][ids]
    for l in range(LAYERS):
        xb = rmsnorm(x, W["rms_att"][l])
        q = rope((xb @ W["wq"][l].T).reshape(T, nh, hs), pos, hs)
        k = rope((xb @ W["wk"][l].T).reshape(T, nkv, hs), pos, hs)[:, kv_of]
        v = (xb @ W["wv"][l].T).reshape(T, nkv, hs)[:, kv_of]
        sc = np.einsum("thd,shd->hts", q, k) / np.sqrt(hs) + mask
        att = np.exp(sc - sc.max(axis=-1, keepdims=True))
        att /= att.sum(axis=-1, keepdims=True)
        out = np.einsum("hts,shd->thd", att, v).reshape(T, DIM)
        x = x + out @ W["wo"][l].T
        xb = rmsnorm(x, W["rms_ffn"][l])
        g = xb @ W["w1"][l].T
        x = x + ((g / (1.0 + np.exp(-g))) * (xb @ W["w3"][l].T)) @ W["w2"][l].T
    x = rmsnorm(x, W["rms_final"])
    return x @ (W["tok_embeddings"] if tied else W["wcls"]).T


# ---------------------------------------------------------------- self-check only
def read_bin(path):
    """Independent reader: header by field offsets, arrays by running byte offset."""
    blob = open(path, "rb").read()
    if struct.unpack_from("<I", blob, 0)[0] == MAGIC:
        version = struct.unpack_from("<i", blob, 4)[0]
        dims = list(struct.unpack_from("<7i", blob, 8))
        tied = blob[36] == 1
        assert blob[37:256] == b"\0" * 219, "v1 padding not zero"
        off = 256
    else:
        version, dims, off = 0, list(struct.unpack_from("<7i", blob, 0)), 28
        tied = dims[5] > 0
        dims[5] = abs(dims[5])
    dim, hid, nl, nh, nkv, vocab, seq = dims
    kv, hs = dim * nkv // nh, dim // nh
    shp = {"tok_embeddings": (vocab, dim), "wcls": (vocab, dim), "rms_att": (nl, dim),
           "rms_ffn": (nl, dim), "rms_final": (dim,), "wq": (nl, dim, dim), "wk": (nl, kv, dim),
           "wv": (nl, kv, dim), "wo": (nl, dim, dim), "w1": (nl, hid, dim),
           "w2": (nl, dim, hid), "w3": (nl, hid, dim),
           "freq_cis_real": (seq, hs // 2), "freq_cis_imag": (seq, hs // 2)}
    arrays = {}
    for name in order(version, tied):
        n = int(np.prod(shp[name]))
        arrays[name] = np.frombuffer(blob, "<f4", n, off).reshape(shp[name])
        off += 4 * n
    assert off == len(blob), f"{path}: {len(blob) - off} trailing bytes"
    return version, dims, tied, arrays


def permute(w, H):
    """Meta -> HF rows within each head: W_hf[h*d + j*d/2 + i] = W_meta[h*d + 2i + j]."""
    rows, cols = w.shape
    d = rows // H
    return w.reshape(H, d // 2, 2, cols).transpose(0, 2, 1, 3).reshape(rows, cols)


def self_check(out_dir, seeds):
    with open(os.path.join(out_dir, "reference.json")) as f:
        cases = json.load(f)["cases"]
    for c, seed in zip(cases, seeds):
        nh, nkv, tied = c["n_heads"], c["n_kv_heads"], c["tied"]
        version, dims, rtied, arr = read_bin(os.path.join(out_dir, c["file"]))
        assert version == c["version"] and rtied == tied
        assert dims == [DIM, HIDDEN, LAYERS, nh, nkv, VOCAB, SEQ_LEN], dims
        assert c["ids"] == IDS and len(c["logits"]) == len(IDS)
        w = make_weights(seed, nh, nkv, tied)
        for k in w:
            assert np.array_equal(arr[k], w[k]), f"{c['name']}: {k} differs"
        if version == 0:
            hs = DIM // nh
            ang = np.outer(np.arange(SEQ_LEN), inv_freq(hs))
            assert np.allclose(arr["freq_cis_real"], np.cos(ang), atol=1e-6)
            assert np.allclose(arr["freq_cis_imag"], np.sin(ang), atol=1e-6)
        ref = np.array(c["logits"])
        meta = forward({k: arr[k] for k in w}, nh, nkv, tied, IDS)
        assert np.array_equal(meta, ref), "forward on read-back weights differs"
        hf = dict(w)
        hf["wq"] = np.stack([permute(m, nh) for m in w["wq"]])
        hf["wk"] = np.stack([permute(m, nkv) for m in w["wk"]])
        d = DIM // nh  # spot-check the index formula against the reshape
        for H, m, p in ((nh, w["wq"][0], hf["wq"][0]), (nkv, w["wk"][1], hf["wk"][1])):
            for h in range(H):
                for j in range(2):
                    for i in range(d // 2):
                        assert np.array_equal(p[h * d + j * d // 2 + i], m[h * d + 2 * i + j])
        err = np.abs(forward(hf, nh, nkv, tied, IDS, rope=rope_half) - ref).max()
        wrong = np.abs(forward(w, nh, nkv, tied, IDS, rope=rope_half) - ref).max()
        assert err < 1e-9, f"{c['name']}: HF permuted forward differs by {err}"
        assert wrong > 1e-3, f"{c['name']}: unpermuted rotate-half should differ ({wrong})"
        print(f"self-check {c['name']}: read-back exact, |HF(permuted) - ref| = {err:.2e}, "
              f"|HF(unpermuted) - ref| = {wrong:.2e}")
    print("self-check OK")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--self-check", action="store_true")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    cases = []
    for idx, (name, version, nh, nkv, tied) in enumerate(CASES):
        seed = 20240 + idx
        w = make_weights(seed, nh, nkv, tied)
        write_bin(os.path.join(args.out, name + ".bin"), version, nh, nkv, tied, w)
        logits = forward(w, nh, nkv, tied, IDS)
        cases.append({"name": name, "file": name + ".bin", "version": version, "tied": tied,
                      "dim": DIM, "hidden_dim": HIDDEN, "n_layers": LAYERS, "n_heads": nh,
                      "n_kv_heads": nkv, "vocab_size": VOCAB, "seq_len": SEQ_LEN,
                      "ids": IDS, "logits": logits.tolist(), "seed": seed})
    with open(os.path.join(args.out, "reference.json"), "w") as f:
        json.dump({"cases": [{k: v for k, v in c.items() if k != "seed"} for c in cases]}, f)
    print(f"wrote {len(cases)} cases to {args.out}")
    if args.self_check:
        self_check(args.out, [c["seed"] for c in cases])


if __name__ == "__main__":
    main()
