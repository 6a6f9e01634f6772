#!/usr/bin/env python3
"""Independent NumPy implementation of the ReluLens forward pass (PAPERS.md formulas).

Writes tests/data/tiny_reference.json, against which test_reference_model checks the C++ engine:
token ids from SentencePiece's own `spm_encode` tool, and for several attention/FFN variants the
final logits, one head's attention map and some memory-slot activations; for runs with per-layer
or per-head overrides and head ablations, also what they change at every token against the same
run without them; and the logit lens of the first run. Shares no code with the C++
implementation. Run from the repository root:  python3 tests/reference/reference_forward.py
"""
import json
import math
import struct
import subprocess
import sys

import numpy as np

MODEL = "tests/data/tiny"
OUT = "tests/data/tiny_reference.json"
TEXT = "It is a truth universally acknowledged, café 🙂 that she"

SPECS = [
    {"attention": "softmax", "ffn": "relu"},
    {"attention": "relu", "ffn": "relu"},
    {"attention": "relu_len", "a": 1.0, "ffn": "relu"},
    {"attention": "relu_len", "a": 0.5, "ffn": "gelu"},
    {"attention": "reluformer", "ffn": "relu"},
    {"attention": "family", "h": "relu2", "a": 1.5, "ffn": "softmax"},
    {"attention": "family", "h": "gelu", "a": 1.0, "ffn": "softmax_ln"},
    {"attention": "family", "h": "softplus", "a": 0.0, "ffn": "relu"},
    {"attention": "family", "h": "sigmoid", "a": 2.0, "ffn": "gelu"},
    {"attention": "softmax", "ffn": "softmax_ln"},
    {"attention": "sigmoid", "ffn": "relu"},
    {"attention": "sigmoid", "bias": -1.5, "ffn": "gelu"},
    {"attention": "softpick", "ffn": "relu"},
    {"attention": "softmax1", "ffn": "relu"},
    {"attention": "sparsemax", "ffn": "relu"},
    {"attention": "entmax15", "ffn": "softmax"},
    {"attention": "ssmax", "ffn": "relu"},
    {"attention": "ssmax", "sigma": 1.2, "ffn": "relu"},
    {"attention": "stickbreaking", "ffn": "relu"},
    # Overrides stack: a head's beats its layer's, and a later one an earlier one.
    {"attention": "softmax", "ffn": "relu", "overrides": [{"layer": 1, "attention": "relu_len"}]},
    {"attention": "softmax", "ffn": "relu",
     "overrides": [{"layer": 0, "head": 1, "attention": "sparsemax"},
                   {"layer": 1, "attention": "reluformer"},
                   {"layer": 1, "head": 0, "attention": "sigmoid"}]},
    {"attention": "relu_len", "ffn": "relu", "overrides": [{"layer": 1, "head": 1, "ablate": "zero"}]},
    {"attention": "softmax", "ffn": "relu",
     "overrides": [{"layer": 1, "head": 1, "ablate": "uniform"}, {"layer": 0, "head": 0, "ablate": "zero"}]},
]
MAP_LAYER, MAP_HEAD = 1, 1
SLOT_LAYER, SLOT_TOKEN = 0, 5


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", "the reference reads f32 fixtures only"
        b, e = info["data_offsets"]
        tensors[name] = np.frombuffer(data[b:e], dtype="<f4").astype(np.float64).reshape(info["shape"])
    return tensors


erf = np.vectorize(math.erf)


def gelu(x):
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def softplus(x):
    return np.where(x > 20, x, np.log1p(np.exp(np.minimum(x, 20))))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def relu(x):
    return np.maximum(x, 0.0)


def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def softmax(x):
    z = x - x.max(-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(-1, keepdims=True)


def entmax_bisect(row, alpha, iterations=200):
    # alpha-entmax of one row by bisection on tau: p_j = [(alpha-1) z_j - tau]_+^(1/(alpha-1)),
    # tau chosen so that the p_j sum to 1 (alpha = 2: sparsemax; alpha = 1.5: 1.5-entmax).
    z = (alpha - 1.0) * np.asarray(row, dtype=np.float64)
    p = lambda tau: np.maximum(z - tau, 0.0) ** (1.0 / (alpha - 1.0))
    lo, hi = z.max() - 1.0, z.max()  # sum >= 1 at lo, 0 at hi
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        if p(mid).sum() >= 1.0:
            lo = mid
        else:
            hi = mid
    out = p(lo)
    return out / out.sum()


def stick_breaking(row):
    # alpha_j = beta_j * prod over the later keys k (j < k <= i) of (1 - beta_k), as a product.
    beta = sigmoid(np.asarray(row, dtype=np.float64))
    out = np.zeros(len(beta))
    for j in range(len(beta)):
        out[j] = beta[j] * np.prod(1.0 - beta[j + 1:])
    return out


def rotary(x, base):
    # x: (H, L, dh); pairs (i, i + dh/2) rotate by position * base^(-2i/dh)
    H, L, dh = x.shape
    half = dh // 2
    inv = base ** (-np.arange(half) * 2.0 / dh)
    ang = np.arange(L)[:, None] * inv[None, :]
    c, s = np.cos(ang), np.sin(ang)
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * c - x2 * s, x1 * s + x2 * c], axis=-1)


def head_plan(spec, layer, head):
    """(variant spec, ablation) of one head: the run's variant unless an override names the
    layer (any head) or this head; the head's own override wins, then the latest."""
    layer_wide = own = None
    for o in spec.get("overrides", []):
        if o["layer"] != layer:
            continue
        if "head" not in o:
            layer_wide = o
        elif o["head"] == head:
            own = o
    chosen = own if own is not None else layer_wide
    if chosen is None:
        return spec, None
    if "ablate" in chosen:
        return spec, chosen["ablate"]
    return {"attention": chosen["attention"]}, None


def attention_weights(s, spec, gamma, layer=0):
    # s: (H, L, L) scores. Row i sees keys 0..i, n_i = i + 1. Loops written out per entry.
    H, L, _ = s.shape
    w = np.zeros_like(s)
    for h in range(H):
        head_spec, ablation = head_plan(spec, layer, h)
        v = head_spec["attention"]
        for i in range(L):
            n = i + 1
            row = s[h, i, :n]
            if ablation == "zero":
                w[h, i, :n] = 0.0
            elif ablation == "uniform":
                w[h, i, :n] = 1.0 / n
            elif v == "softmax":
                w[h, i, :n] = softmax(row)
            elif v == "relu":
                w[h, i, :n] = relu(row)
            elif v == "relu_len":
                w[h, i, :n] = relu(row) / n ** head_spec.get("a", 1.0)
            elif v == "reluformer":
                w[h, i, :n] = relu(row) / (gamma[h] * math.sqrt(n / 2.0))
            elif v == "family":
                fn = {"relu": relu, "relu2": lambda x: relu(x) ** 2, "gelu": gelu,
                      "softplus": softplus, "sigmoid": sigmoid}[head_spec["h"]]
                w[h, i, :n] = fn(row) / n ** head_spec["a"]
            elif v == "sigmoid":
                w[h, i, :n] = sigmoid(row + head_spec.get("bias", -math.log(n)))
            elif v == "softpick":
                e = np.expm1(row)
                w[h, i, :n] = relu(e) / (np.abs(e).sum() + 1e-8)
            elif v == "softmax1":
                e = np.exp(row)
                w[h, i, :n] = e / (1.0 + e.sum())
            elif v == "sparsemax":
                w[h, i, :n] = entmax_bisect(row, 2.0)
            elif v == "entmax15":
                w[h, i, :n] = entmax_bisect(row, 1.5)
            elif v == "ssmax":
                w[h, i, :n] = softmax(head_spec.get("sigma", 0.43) * math.log(n) * row)
            elif v == "stickbreaking":
                w[h, i, :n] = stick_breaking(row)
            else:
                raise ValueError(f"no reference for attention {v}")
    return w


def forward(t, cfg, ids, spec):
    d, H = cfg["d_model"], cfg["n_heads"]
    dh = d // H
    eps = cfg["norm_eps"]
    x = t["tok_emb.weight"][ids]
    L = len(ids)
    capture = {}
    for l in range(cfg["n_layers"]):
        p = f"layers.{l}."
        h = layer_norm(x, t[p + "ln1.weight"], t[p + "ln1.bias"], eps)
        q = (h @ t[p + "attn.wq"].T).reshape(L, H, dh).transpose(1, 0, 2)
        k = (h @ t[p + "attn.wk"].T).reshape(L, H, dh).transpose(1, 0, 2)
        v = (h @ t[p + "attn.wv"].T).reshape(L, H, dh).transpose(1, 0, 2)
        q, k = rotary(q, cfg["rope_base"]), rotary(k, cfg["rope_base"])
        s = q @ k.transpose(0, 2, 1) / math.sqrt(dh)
        w = attention_weights(s, spec, t[p + "attn.gamma"], l)
        o = (w @ v).transpose(1, 0, 2).reshape(L, d)
        x = x + o @ t[p + "attn.wo"].T
        f = layer_norm(x, t[p + "ln2.weight"], t[p + "ln2.bias"], eps)
        ffn = spec["ffn"]
        if ffn in ("relu", "gelu"):
            pre = f @ t[p + "ffn.w1"].T + t[p + "ffn.b1"]
            m = relu(pre) if ffn == "relu" else gelu(pre)
            out = m @ t[p + "ffn.w2"].T + t[p + "ffn.b2"]
        else:
            m = softmax(f @ t[p + "ffn.w1"].T)
            out = m @ t[p + "ffn.w2"].T
            if ffn == "softmax_ln":
                out = layer_norm(out, t[p + "ffn.ln.weight"], t[p + "ffn.ln.bias"], eps)
        x = x + out
        capture.setdefault("after_layer", []).append(x.copy())
        if l == MAP_LAYER:
            capture["map"] = w[MAP_HEAD]
        if l == SLOT_LAYER:
            capture["slots"] = m[SLOT_TOKEN]
    logits = unembed(t, cfg, x)
    return logits, capture


def unembed(t, cfg, x):
    x = layer_norm(x, t["ln_f.weight"], t["ln_f.bias"], cfg["norm_eps"])
    return x @ t["tok_emb.weight"].T


def log_softmax(x):
    z = x - x.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def effect(changed, unchanged, ids):
    """Per token i < L - 1: the change in log p(ids[i+1]) and KL(unchanged || changed)."""
    p, q = log_softmax(changed), log_softmax(unchanged)
    delta, kl = [], []
    for i in range(len(ids) - 1):
        delta.append(p[i, ids[i + 1]] - q[i, ids[i + 1]])
        kl.append(float(np.sum(np.exp(q[i]) * (q[i] - p[i]))))
    n = len(ids) - 1
    return {"delta_log_prob": rounded(delta), "kl": rounded(kl),
            "loss": -sum(p[i, ids[i + 1]] for i in range(n)) / n,
            "unchanged_loss": -sum(q[i, ids[i + 1]] for i in range(n)) / n}


def rounded(a):
    return [float(f"{v:.8g}") for v in np.asarray(a).ravel()]


def main():
    cfg = json.load(open(f"{MODEL}/config.json"))
    t = read_safetensors(f"{MODEL}/model.safetensors")
    ids_text = subprocess.run(["spm_encode", f"--model={MODEL}/tokenizer.model", "--output_format=id"],
                              input=TEXT.encode(), capture_output=True, check=True).stdout.decode()
    ids = [int(v) for v in ids_text.split()]
    runs = []
    lens = None
    for spec in SPECS:
        logits, cap = forward(t, cfg, ids, spec)
        m = cap["map"]
        run = {
            "spec": spec,
            "last_logits": rounded(logits[-1]),
            "first_logits": rounded(logits[0]),
            "map": [rounded(m[i, :i + 1]) for i in range(len(ids))],
            "slots": rounded(cap["slots"]),
        }
        if "overrides" in spec:
            unchanged = {k: v for k, v in spec.items() if k != "overrides"}
            run["effect"] = effect(logits, forward(t, cfg, ids, unchanged)[0], ids)
        if lens is None:
            # The logit lens of the first run: p(ids[i+1]) from each layer's residual stream.
            lens = {"spec": spec, "next_token_probability": [
                rounded([np.exp(log_softmax(unembed(t, cfg, x))[i, ids[i + 1]]) for i in range(len(ids) - 1)])
                for x in cap["after_layer"]]}
        runs.append(run)
        print(spec, "last-position argmax", int(np.argmax(logits[-1])), file=sys.stderr)
    out = {"text": TEXT, "ids": ids, "map_layer": MAP_LAYER, "map_head": MAP_HEAD,
           "slot_layer": SLOT_LAYER, "slot_token": SLOT_TOKEN, "runs": runs, "lens": lens}
    with open(OUT, "w") as f:
        json.dump(out, f, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
