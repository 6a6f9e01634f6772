#!/usr/bin/env python3
"""Synthetic Hugging Face checkpoint folders and reference outputs for the ReluLens HF loader.

An INDEPENDENT reference: NumPy only, written from the Hugging Face semantics
(transformers' modeling_llama / mistral / qwen2 / qwen3 / gemma; attention variants as in
ReluLens's PAPERS formulas); it shares no code with the
C++ engine. Usage:
  /usr/bin/python3 tests/reference/hf_fixtures.py --out DIR --tokenizer PATH/tokenizer.model [--self-check]
Creates DIR/<case>/ for each case in CASES, holding config.json, model.safetensors (or
model-0000k-of-0000n.safetensors shards + model.safetensors.index.json), a byte copy of the
tokenizer and tokenizer_config.json; then writes DIR/reference.json:
  {"cases": [{"name", "folder", "ids": [L ints],
              "runs": [{"attention": "softmax"|"relu"|"relu_len"|a later variant, "ffn": "silu"|"gelu_tanh"|"relu",
                        "logits": [L x vocab],
                        "maps": [{"layer": 0, "head": 0, "weights": [L x L]},
                                 {"layer": 1, "head": heads-1, "weights": [L x L]}],
                        "slots": {"layer": 1, "values": [L x intermediate]}}]}]}
Maps are full L x L, masked (future / out-of-window) entries exactly 0. Slots are
m = act(gate_proj h2) * up_proj h2. The forward pass reads each folder back from disk (config.json
and the stored F32/F16/BF16 tensors) and computes in float64. Fixed seed; runs in about a second.
--self-check re-reads every file with a second, separate parser and checks invariants.
"""
import argparse
import json
import math
import os
import shutil
import struct

import numpy as np

VOCAB, LAYERS = 512, 2
IDS_BOS = [1, 417, 278, 278, 269, 259, 301, 348, 482, 300, 10]
IDS_NO_BOS = [417, 278, 278, 269, 259, 301, 348, 482, 300, 10, 77]
LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          # 64 (not 16): with theta 5e5 and head_dim 16 the wavelengths are 2pi * 5.16^i, so
          # Lo = 64 puts i=0 below Lo/4 (unchanged), i=1 inside [16, 64] (blended), i>=2 above (/8).
          "original_max_position_embeddings": 64}
# name: family, hidden, intermediate, heads, kv heads, head_dim in config (None: omitted), dtype,
# tied, shards, extra config keys.
CASES = [
    ("llama_f32", "llama", 32, 64, 4, 4, None, "F32", False, 1, {}),
    ("llama_gqa_bf16", "llama", 64, 96, 8, 2, None, "BF16", True, 1, {}),
    ("llama_mqa_f16", "llama", 32, 48, 4, 1, None, "F16", False, 1, {}),
    ("llama_sharded", "llama", 32, 64, 4, 2, None, "F32", False, 3, {}),
    ("llama_bias", "llama", 32, 64, 4, 4, None, "F32", False, 1,
     {"attention_bias": True, "mlp_bias": False}),
    ("llama3_rope", "llama", 64, 96, 4, 2, 16, "F32", False, 1,
     {"rope_theta": 500000.0, "rope_scaling": LLAMA3}),
    ("llama_linear_rope_legacy", "llama", 32, 64, 4, 2, None, "F32", False, 1,
     {"rope_scaling": {"type": "linear", "factor": 4.0}}),
    ("llama_rope_parameters", "llama", 32, 64, 4, 2, None, "F32", False, 1,
     {"rope_theta": None, "rope_parameters": {"rope_theta": 20000.0, "rope_type": "default"}}),
    ("mistral_window", "mistral", 32, 64, 4, 2, None, "F32", False, 1, {"sliding_window": 5}),
    # sliding_window 4 is present but must be ignored because use_sliding_window is false.
    ("qwen2_bias", "qwen2", 32, 64, 4, 2, None, "F32", True, 1,
     {"rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "use_sliding_window": False,
      "sliding_window": 4, "max_window_layers": 2}),
    ("qwen3_qknorm", "qwen3", 32, 64, 4, 2, 16, "F32", False, 1,
     {"rms_norm_eps": 1e-6, "attention_bias": False, "use_sliding_window": False,
      "sliding_window": None}),
    ("gemma", "gemma", 32, 64, 2, 1, 24, "BF16", True, 1, {"rms_norm_eps": 1e-6}),
]
ARCH = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "qwen2": "Qwen2ForCausalLM",
        "qwen3": "Qwen3ForCausalLM", "gemma": "GemmaForCausalLM"}
TORCH_DTYPE = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}
INV_FREQ_CASE = "llama_f32"  # also gets the stale model.layers.0.self_attn.rotary_emb.inv_freq


# ---------------------------------------------------------------- safetensors (hand-written)
def to_bf16_bits(a):
    """float32 -> bf16 bit patterns, round to nearest even on the upper 16 bits (no NaNs here)."""
    bits = np.asarray(a, dtype="<f4").view("<u4").astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2")


def encode(a, dtype):
    return (to_bf16_bits(a) if dtype == "BF16" else np.asarray(a, {"F32": "<f4", "F16": "<f2"}[dtype])).tobytes()


def write_safetensors(path, tensors):
    """tensors: list of (name, float64 array, dtype). Returns the data-buffer size in bytes."""
    header, blobs, pos = {"__metadata__": {"format": "pt"}}, [], 0
    for name, a, dtype in tensors:
        b = encode(a, dtype)
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [pos, pos + len(b)]}
        blobs.append(b)
        pos += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-(8 + len(h)) % 8)  # 8 + N is a multiple of 8
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    return pos


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack_from("<Q", blob, 0)
    out = {}
    for name, e in ((k, e) for k, e in json.loads(blob[8:8 + n]).items() if k != "__metadata__"):
        raw = blob[8 + n + e["data_offsets"][0]:8 + n + e["data_offsets"][1]]
        if e["dtype"] == "BF16":
            a = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            a = np.frombuffer(raw, {"F32": "<f4", "F16": "<f2"}[e["dtype"]])
        out[name] = a.astype(np.float64).reshape(e["shape"])
    return out


def read_folder(folder):
    index = os.path.join(folder, "model.safetensors.index.json")
    if not os.path.exists(index):
        return read_safetensors(os.path.join(folder, "model.safetensors"))
    files = sorted(set(json.load(open(index))["weight_map"].values()))
    return {k: v for f in files for k, v in read_safetensors(os.path.join(folder, f)).items()}


# ---------------------------------------------------------------- writing one case folder
def make_case(out, case, seed, tokenizer):
    name, fam, H, I, nh, nkv, hd_cfg, dtype, tied, shards, extra = case
    hd = hd_cfg or H // nh
    rng = np.random.default_rng(seed)
    mat = lambda *s: rng.normal(0.0, 0.2, s)
    norm = (lambda n: 0.2 * rng.normal(size=n)) if fam == "gemma" else (lambda n: 1 + 0.2 * rng.normal(size=n))
    bias = lambda n: 0.2 * rng.normal(size=n)
    qkv_bias = fam == "qwen2" or extra.get("attention_bias", False)
    t = [("model.embed_tokens.weight", rng.normal(0.0, 0.3, (VOCAB, H)))]
    for l in range(LAYERS):
        p = f"model.layers.{l}."
        t.append((p + "input_layernorm.weight", norm(H)))
        for proj, rows in (("q", nh * hd), ("k", nkv * hd), ("v", nkv * hd)):
            t.append((p + f"self_attn.{proj}_proj.weight", mat(rows, H)))
            if qkv_bias:
                t.append((p + f"self_attn.{proj}_proj.bias", bias(rows)))
        t.append((p + "self_attn.o_proj.weight", mat(H, nh * hd)))
        if fam == "llama" and extra.get("attention_bias", False):
            t.append((p + "self_attn.o_proj.bias", bias(H)))
        if fam == "qwen3":
            t += [(p + "self_attn.q_norm.weight", norm(hd)), (p + "self_attn.k_norm.weight", norm(hd))]
        t.append((p + "post_attention_layernorm.weight", norm(H)))
        t += [(p + "mlp.gate_proj.weight", mat(I, H)), (p + "mlp.up_proj.weight", mat(I, H)),
              (p + "mlp.down_proj.weight", mat(H, I))]
    t.append(("model.norm.weight", norm(H)))
    if not tied:
        t.append(("lm_head.weight", rng.normal(0.0, 0.3, (VOCAB, H))))
    t = [(n, a, dtype) for n, a in t]
    if name == INV_FREQ_CASE:  # stale buffer from old conversions; loaders must ignore it
        t.insert(2, ("model.layers.0.self_attn.rotary_emb.inv_freq",
                     1.0 / 10000.0 ** (np.arange(0, hd, 2) / hd), "F32"))

    folder = os.path.join(out, name)
    os.makedirs(folder, exist_ok=True)
    if shards == 1:
        write_safetensors(os.path.join(folder, "model.safetensors"), t)
    else:
        weight_map, total = {}, 0
        for k, chunk in enumerate(np.array_split(np.arange(len(t)), shards)):
            fname = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
            total += write_safetensors(os.path.join(folder, fname), [t[i] for i in chunk])
            weight_map.update({t[i][0]: fname for i in chunk})
        with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)

    cfg = {"model_type": fam, "architectures": [ARCH[fam]], "hidden_size": H,
           "intermediate_size": I, "num_hidden_layers": LAYERS, "num_attention_heads": nh,
           "num_key_value_heads": nkv, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
           "max_position_embeddings": 512, "tie_word_embeddings": tied, "vocab_size": VOCAB,
           "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "gelu" if fam == "gemma" else "silu",
           "torch_dtype": TORCH_DTYPE[dtype]}
    if hd_cfg:
        cfg["head_dim"] = hd_cfg
    cfg.update(extra)
    cfg = {k: v for k, v in cfg.items() if not (k == "rope_theta" and v is None)}
    json.dump(cfg, open(os.path.join(folder, "config.json"), "w"), indent=2)
    if tokenizer:
        shutil.copyfile(tokenizer, os.path.join(folder, "tokenizer.model"))
    tok = {"add_bos_token": False} if fam.startswith("qwen") else {"add_bos_token": True, "add_eos_token": False}
    json.dump(tok, open(os.path.join(folder, "tokenizer_config.json"), "w"))
    return {n: a for n, a, _ in t}  # the float64 originals, before rounding (for --self-check)


# ---------------------------------------------------------------- float64 HF forward pass
def rope_inv_freq(cfg, d):
    """[RU]: inv[i] = 1/theta^(2i/d), d = head_dim, then the rope_scaling rule (both layouts)."""
    params = cfg.get("rope_parameters") or {}
    theta = cfg.get("rope_theta", params.get("rope_theta", 10000.0))
    scaling = cfg.get("rope_scaling") or params
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    inv = 1.0 / theta ** (np.arange(0, d, 2, dtype=np.float64) / d)
    if kind == "linear":
        return inv / scaling["factor"]
    if kind == "llama3":
        f, lo, hi = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
        old = scaling["original_max_position_embeddings"]
        lam = 2 * math.pi / inv
        s = (old / lam - lo) / (hi - lo)
        blended = (1 - s) * inv / f + s * inv
        return np.where(lam < old / hi, inv, np.where(lam > old / lo, inv / f, blended))
    assert kind == "default", kind
    return inv


def rms_norm(x, w, eps, gemma=False):
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return y * (1.0 + w if gemma else w)


def rotate(x, cos, sin):  # x (L, heads, d); HF rotate_half pairs i with i + d/2
    half = x.shape[-1] // 2
    rot = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos[:, None, :] + rot * sin[:, None, :]


def attention_weights(s, window, variant):
    """s (L, L) scores of one query head. Visible: k <= q and (no window or k > q - W)."""
    L = s.shape[0]
    q, k = np.arange(L)[:, None], np.arange(L)[None, :]
    vis = (k <= q) if window is None else (k <= q) & (k > q - window)
    n = vis.sum(axis=1, keepdims=True)  # n_i = i + 1, or min(i + 1, W) under the window
    if variant == "softmax":
        e = np.where(vis, np.exp(s - np.where(vis, s, -np.inf).max(axis=1, keepdims=True)), 0.0)
        return e / e.sum(axis=1, keepdims=True)
    if variant in LATER_VARIANTS:
        out = np.zeros_like(s)
        for i in range(L):
            keys = np.nonzero(vis[i])[0]
            out[i, keys] = later_variant_row(s[i, keys], variant)
        return out
    r = np.where(vis, np.maximum(s, 0.0), 0.0)
    return r / n if variant == "relu_len" else r


LATER_VARIANTS = ("sigmoid", "softpick", "softmax1", "sparsemax", "entmax15", "ssmax", "stickbreaking")


def later_variant_row(row, variant):
    """PAPERS.md's later variants on one row's visible scores (default constants)."""
    row = np.asarray(row, dtype=np.float64)
    n = len(row)
    if variant == "sigmoid":
        return 1.0 / (1.0 + np.exp(-(row - math.log(n))))
    if variant == "softpick":
        e = np.expm1(row)
        return np.maximum(e, 0.0) / (np.abs(e).sum() + 1e-8)
    if variant == "softmax1":
        e = np.exp(row)
        return e / (1.0 + e.sum())
    if variant == "ssmax":
        z = 0.43 * math.log(n) * row
        e = np.exp(z - z.max())
        return e / e.sum()
    if variant == "stickbreaking":  # beta_j times the product of (1 - beta_k) over later keys
        beta = 1.0 / (1.0 + np.exp(-row))
        return np.array([beta[j] * np.prod(1.0 - beta[j + 1:]) for j in range(n)])
    alpha = 2.0 if variant == "sparsemax" else 1.5  # by bisection on tau
    z = (alpha - 1.0) * row
    p = lambda tau: np.maximum(z - tau, 0.0) ** (1.0 / (alpha - 1.0))
    lo, hi = z.max() - 1.0, z.max()
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if p(mid).sum() >= 1.0 else (lo, mid)
    out = p(lo)
    return out / out.sum()


# Per-layer and per-head overrides and an ablation (a head's own entry beats its layer's).
OVERRIDES = [{"layer": 1, "attention": "relu_len"}, {"layer": 0, "head": 1, "attention": "sparsemax"},
             {"layer": 1, "head": 0, "ablate": "zero"}, {"layer": 0, "head": 0, "ablate": "uniform"}]


def head_variant(attention, overrides, layer, head):
    """What head `head` of `layer` runs: (variant, ablation)."""
    layer_wide = own = None
    for o in overrides:
        if o["layer"] == layer and "head" not in o:
            layer_wide = o
        if o["layer"] == layer and o.get("head") == head:
            own = o
    chosen = own or layer_wide
    if chosen is None:
        return attention, None
    return (attention, chosen["ablate"]) if "ablate" in chosen else (chosen["attention"], None)


def forward(folder, ids, attention, ffn, overrides=()):
    cfg = json.load(open(os.path.join(folder, "config.json")))
    w = read_folder(folder)
    fam = cfg["model_type"]
    gemma = fam == "gemma"
    H, nh = cfg["hidden_size"], cfg["num_attention_heads"]
    nkv = cfg.get("num_key_value_heads") or nh
    d = cfg.get("head_dim") or H // nh
    eps = cfg["rms_norm_eps"]
    # Mistral: key absent -> 4096, null -> none. Qwen2/3: only when use_sliding_window is true.
    window = cfg.get("sliding_window", 4096 if fam == "mistral" else None) \
        if fam == "mistral" or cfg.get("use_sliding_window") else None
    L = len(ids)
    ang = np.arange(L, dtype=np.float64)[:, None] * rope_inv_freq(cfg, d)[None, :]
    cos, sin = np.cos(np.concatenate([ang, ang], 1)), np.sin(np.concatenate([ang, ang], 1))
    act = {"silu": lambda z: z / (1 + np.exp(-z)), "relu": lambda z: np.maximum(z, 0.0),
           "gelu_tanh": lambda z: 0.5 * z * (1 + np.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z ** 3)))}[ffn]
    lin = lambda x, name: x @ w[name + ".weight"].T + w.get(name + ".bias", 0.0)
    x = w["model.embed_tokens.weight"][ids]
    if gemma:
        x = x * math.sqrt(H)  # exact sqrt(H) (HF's float32 run), not the bf16-rounded constant
    maps, slots, after_layer = [], None, []
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps, gemma)
        q = lin(h, p + "self_attn.q_proj").reshape(L, nh, d)
        k = lin(h, p + "self_attn.k_proj").reshape(L, nkv, d)
        v = lin(h, p + "self_attn.v_proj").reshape(L, nkv, d)
        if fam == "qwen3":  # per-head q/k RMSNorm, after the projection, before rotary
            q = rms_norm(q, w[p + "self_attn.q_norm.weight"], eps)
            k = rms_norm(k, w[p + "self_attn.k_norm.weight"], eps)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        heads = []
        for hq in range(nh):
            g = hq // (nh // nkv)  # GQA: repeat_interleave of kv heads
            variant, ablation = head_variant(attention, overrides, l, hq)
            a = attention_weights(q[:, hq] @ k[:, g].T / math.sqrt(d), window, variant)
            if ablation == "zero":
                a = np.zeros_like(a)
            elif ablation == "uniform":  # 1 / n_i on every key the row sees
                qi, kj = np.arange(L)[:, None], np.arange(L)[None, :]
                vis = (kj <= qi) if window is None else (kj <= qi) & (kj > qi - window)
                a = vis / vis.sum(axis=1, keepdims=True)
            heads.append(a @ v[:, g])
            if (l, hq) in ((0, 0), (1, nh - 1)):
                maps.append({"layer": l, "head": hq, "weights": a.tolist()})
        x = x + lin(np.concatenate(heads, axis=1), p + "self_attn.o_proj")
        h2 = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps, gemma)
        m = act(lin(h2, p + "mlp.gate_proj")) * lin(h2, p + "mlp.up_proj")
        x = x + lin(m, p + "mlp.down_proj")
        after_layer.append(x)
        if l == 1:
            slots = {"layer": 1, "values": m.tolist()}
    tied = cfg.get("tie_word_embeddings", gemma) or "lm_head.weight" not in w
    unembed = lambda s: rms_norm(s, w["model.norm.weight"], eps, gemma) @ \
        w["model.embed_tokens.weight" if tied else "lm_head.weight"].T
    logits = unembed(x)
    # The logit lens: p(ids[i+1]) from the stream after each layer, through the final norm.
    lens = []
    for s in after_layer:
        z = unembed(s)
        z = z - z.max(axis=1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        lens.append([float(np.exp(logp[i, ids[i + 1]])) for i in range(L - 1)])
    return {"attention": attention, "ffn": ffn, "overrides": list(overrides), "logits": logits.tolist(),
            "maps": maps, "slots": slots, "lens": lens}


# ---------------------------------------------------------------- self-check (second parser)
def self_check(out, originals):
    def parse(path):  # deliberately different code path: struct-unpack every element
        raw = open(path, "rb").read()
        n = int.from_bytes(raw[:8], "little")
        assert (8 + n) % 8 == 0 and raw[8 + n - 1:8 + n] in (b" ", b"}")
        hdr, base, res = json.loads(raw[8:8 + n].decode()), 8 + n, {}
        for name, e in ((k, e) for k, e in hdr.items() if k != "__metadata__"):
            b, end = e["data_offsets"]
            code, size = {"F32": ("f", 4), "F16": ("e", 2), "BF16": ("H", 2)}[e["dtype"]]
            vals = struct.unpack(f"<{(end - b) // size}{code}", raw[base + b:base + end])
            if e["dtype"] == "BF16":
                vals = [struct.unpack("<f", struct.pack("<I", v << 16))[0] for v in vals]
            assert len(vals) == int(np.prod(e["shape"]))
            res[name] = (e["dtype"], np.array(vals, dtype=np.float64).reshape(e["shape"]))
        return res
    # bf16 rounding: ties to even, and carries into the exponent
    probe = np.array([1.0, 1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -8 + 2 ** -20, -2.5, 255.9999], np.float32)
    assert to_bf16_bits(probe).tolist() == [0x3F80, 0x3F80, 0x3F82, 0x3F81, 0xC020, 0x4380]
    ref = json.load(open(os.path.join(out, "reference.json")))
    for c in ref["cases"]:
        folder = os.path.join(out, c["folder"])
        mine = read_folder(folder)
        theirs = {k: v for f in sorted(os.listdir(folder)) if f.endswith(".safetensors")
                  for k, v in parse(os.path.join(folder, f)).items()}
        assert set(mine) == set(theirs) == set(originals[c["name"]]), c["name"]
        for n, (dt, a) in theirs.items():
            assert np.array_equal(mine[n], a), n
            o = originals[c["name"]][n]
            tol = {"F32": 2 ** -24, "F16": 2 ** -11, "BF16": 2 ** -8}[dt]  # half an ulp, relative
            assert np.all(np.abs(a - o) <= tol * np.abs(o) + 1e-7), (c["name"], n, dt)
            if dt == "BF16":
                assert np.all(np.asarray(a, np.float32).view(np.uint32) & 0xFFFF == 0)
        cfg = json.load(open(os.path.join(folder, "config.json")))
        W = cfg.get("sliding_window") if cfg["model_type"] == "mistral" else None
        for run in c["runs"]:
            assert np.all(np.isfinite(run["logits"]))
            for mp in run["maps"]:
                a = np.array(mp["weights"])
                i, j = np.indices(a.shape)
                hidden = (j > i) | ((i - j >= W) if W else False)
                assert np.all(a[hidden] == 0.0), (c["name"], "mask")
                if run["attention"] == "softmax":
                    assert np.allclose(a.sum(1), 1.0) and np.all(a[~hidden] > 0)
                if run["attention"] == "relu_len" and mp["layer"] == 0:  # = relu run's map / n_i
                    relu = next(r for r in c["runs"] if r["attention"] == "relu")
                    ra = np.array(relu["maps"][0]["weights"])
                    n = np.minimum(np.arange(len(a)) + 1, W or 10 ** 9)[:, None]
                    assert np.allclose(a, ra / n, rtol=1e-12, atol=0)
        print(f"{c['name']:26s} ok: {len(theirs)} tensors, max|logit| "
              f"{max(np.abs(r['logits']).max() for r in c['runs']):.3f}, max|slot| "
              f"{max(np.abs(r['slots']['values']).max() for r in c['runs']):.3f}")
    cfg = json.load(open(os.path.join(out, "llama3_rope", "config.json")))
    plain, scaled = rope_inv_freq({"rope_theta": cfg["rope_theta"]}, 16), rope_inv_freq(cfg, 16)
    ratio = plain / scaled  # 1: unchanged, 8: divided by factor, in between: blended
    print("llama3 inv_freq before:", plain, "\nafter:", scaled, "\nratio:", ratio.round(4))
    assert np.any(ratio == 1) and np.any(np.isclose(ratio, 8)) and np.any((ratio > 1) & (ratio < 8))
    print("self-check passed")


def make_bpe_folder(out, name, source):
    """A small random model folder around a real tokenizer.json (a byte-level BPE vocabulary):
    llama for names starting with "llama", else qwen3. Only for opening and running, so no
    reference outputs are written for it."""
    with open(os.path.join(source, "tokenizer.json")) as f:
        tok = json.load(f)
    vocab = 1 + max(max(tok["model"]["vocab"].values()),
                    max((a["id"] for a in tok.get("added_tokens", [])), default=0))
    fam = "llama" if name.startswith("llama") else "qwen3"
    case = (name, fam, 16, 32, 2, 1, 8 if fam == "qwen3" else None, "BF16", True, 1, {})
    global VOCAB
    saved, VOCAB = VOCAB, vocab
    try:
        make_case(out, case, 7, None)
    finally:
        VOCAB = saved
    folder = os.path.join(out, name)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        if os.path.exists(os.path.join(source, f)):
            shutil.copyfile(os.path.join(source, f), os.path.join(folder, f))
    cfg = json.load(open(os.path.join(folder, "config.json")))
    cfg.pop("bos_token_id", None)
    json.dump(cfg, open(os.path.join(folder, "config.json"), "w"), indent=2)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--self-check", action="store_true")
    ap.add_argument("--bpe", action="append", default=[], metavar="NAME=DIR",
                    help="also write folder NAME with DIR's tokenizer.json (no reference outputs)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for spec in args.bpe:
        name, source = spec.split("=", 1)
        make_bpe_folder(args.out, name, source)
    if args.bpe:
        return
    cases, originals = [], {}
    for seed, case in enumerate(CASES):
        name, fam = case[0], case[1]
        originals[name] = make_case(args.out, case, 1000 + seed, args.tokenizer)
        ids = IDS_NO_BOS if fam.startswith("qwen") else IDS_BOS
        own = "gelu_tanh" if fam == "gemma" else "silu"
        folder = os.path.join(args.out, name)
        runs = [forward(folder, ids, att, f) for att, f in
                (("softmax", own), ("relu", own), ("relu_len", own), ("softmax", "relu")) +
                tuple((v, own) for v in LATER_VARIANTS)]
        runs.append(forward(folder, ids, "softmax", own, OVERRIDES))
        cases.append({"name": name, "folder": name, "ids": ids, "runs": runs})
    with open(os.path.join(args.out, "reference.json"), "w") as f:
        json.dump({"cases": cases}, f)
    if args.self_check:
        self_check(args.out, originals)


if __name__ == "__main__":
    main()
