#!/usr/bin/python3
"""What a notebook user does today, for `relulens bench --baseline` to measure against.

Runs a ReluLens model folder's weights on given token ids in PyTorch eager mode (Debian's
python3-torch), returning every layer's attention maps the way notebook tools ask a model for
them (`output_attentions`), then draws one head's map to a PNG with matplotlib. Prints one JSON
object with the median times; writes the drawn head's weights as raw little-endian float32 so
that ReluLens can check the two implementations agree.

    bench/baseline.py --model resources/models/softmax --ids ids.txt --layer 0 --head 0 \
        --repeats 3 --threads 1 --map-out map.f32 --png map.png
"""
import argparse
import json
import math
import resource
import statistics
import struct
import time

import numpy as np
import torch

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    kinds = {"F32": "<f4", "F16": "<f2"}
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        if info["dtype"] == "BF16":
            raw = np.frombuffer(data[b:e], dtype="<u2").astype(np.uint32) << 16
            array = raw.view(np.float32)
        else:
            array = np.frombuffer(data[b:e], dtype=kinds[info["dtype"]]).astype(np.float32)
        tensors[name] = torch.from_numpy(array.reshape(info["shape"]).copy())
    return tensors


def rotary(x, base):
    L, dh = x.shape[-2], x.shape[-1]
    half = dh // 2
    inv = base ** (-torch.arange(half, dtype=torch.float32) * 2.0 / dh)
    ang = torch.outer(torch.arange(L, dtype=torch.float32), inv)
    c, s = ang.cos(), ang.sin()
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1)


def attention(scores, cfg, gamma):
    L = scores.shape[-1]
    mask = torch.ones(L, L, dtype=torch.bool).tril()
    n = torch.arange(1, L + 1, dtype=torch.float32)[:, None]
    spec = cfg["attention"]
    kind = spec["variant"]
    if kind == "softmax":
        return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    w = torch.relu(scores).masked_fill(~mask, 0.0)
    if kind == "relu":
        return w
    if kind == "relu_len":
        return w / n ** spec.get("a", 1.0)
    if kind == "reluformer":
        return w / (gamma[:, None, None] * torch.sqrt(n / 2.0))
    raise SystemExit(f"baseline: attention '{kind}' is not implemented here")


def forward(t, cfg, ids):
    """Logits and every layer's (H, L, L) attention weights."""
    d, H = cfg["d_model"], cfg["n_heads"]
    dh = d // H
    eps = cfg["norm_eps"]
    L = ids.shape[0]
    x = t["tok_emb.weight"][ids]
    maps = []
    for layer in range(cfg["n_layers"]):
        p = f"layers.{layer}."
        h = torch.nn.functional.layer_norm(x, (d,), t[p + "ln1.weight"], t[p + "ln1.bias"], eps)
        q = (h @ t[p + "attn.wq"].T).view(L, H, dh).transpose(0, 1)
        k = (h @ t[p + "attn.wk"].T).view(L, H, dh).transpose(0, 1)
        v = (h @ t[p + "attn.wv"].T).view(L, H, dh).transpose(0, 1)
        q, k = rotary(q, cfg["rope_base"]), rotary(k, cfg["rope_base"])
        w = attention(q @ k.transpose(1, 2) / math.sqrt(dh), cfg, t[p + "attn.gamma"])
        maps.append(w)
        x = x + (w @ v).transpose(0, 1).reshape(L, d) @ t[p + "attn.wo"].T
        f = torch.nn.functional.layer_norm(x, (d,), t[p + "ln2.weight"], t[p + "ln2.bias"], eps)
        kind = cfg["ffn"]
        if kind in ("relu", "gelu"):
            pre = f @ t[p + "ffn.w1"].T + t[p + "ffn.b1"]
            m = torch.relu(pre) if kind == "relu" else torch.nn.functional.gelu(pre)
            out = m @ t[p + "ffn.w2"].T + t[p + "ffn.b2"]
        else:
            out = torch.softmax(f @ t[p + "ffn.w1"].T, dim=-1) @ t[p + "ffn.w2"].T
            if kind == "softmax_ln":
                out = torch.nn.functional.layer_norm(out, (d,), t[p + "ffn.ln.weight"],
                                                     t[p + "ffn.ln.bias"], eps)
        x = x + out
    x = torch.nn.functional.layer_norm(x, (d,), t["ln_f.weight"], t["ln_f.bias"], eps)
    return x @ t["tok_emb.weight"].T, maps


def draw(weights, path, title):
    fig, ax = plt.subplots(figsize=(8, 8), dpi=100)
    image = ax.imshow(weights.numpy(), cmap="viridis", interpolation="nearest")
    fig.colorbar(image, ax=ax)
    ax.set_title(title)
    ax.set_xlabel("key token")
    ax.set_ylabel("query token")
    fig.savefig(path)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--ids", required=True, help="file of whitespace-separated token ids")
    parser.add_argument("--layer", type=int, default=0)
    parser.add_argument("--head", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--map-out", required=True)
    parser.add_argument("--png", required=True)
    a = parser.parse_args()

    torch.set_num_threads(a.threads)
    cfg = json.load(open(f"{a.model}/config.json"))
    t = read_safetensors(f"{a.model}/model.safetensors")
    ids = torch.tensor([int(v) for v in open(a.ids).read().split()], dtype=torch.long)
    forward_ms, picture_ms = [], []
    with torch.no_grad():
        forward(t, cfg, ids[:16])  # warm up
        for _ in range(a.repeats):
            start = time.perf_counter()
            logits, maps = forward(t, cfg, ids)
            middle = time.perf_counter()
            head = maps[a.layer][a.head]
            draw(head, a.png, f"layer {a.layer} head {a.head}")
            end = time.perf_counter()
            forward_ms.append((middle - start) * 1e3)
            picture_ms.append((end - start) * 1e3)
            del logits, maps
    head.contiguous().numpy().astype("<f4").tofile(a.map_out)
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"tokens": int(ids.shape[0]), "torch": torch.__version__,
                      "threads": torch.get_num_threads(),
                      "forward_with_maps_ms": statistics.median(forward_ms),
                      "text_to_picture_ms": statistics.median(picture_ms),
                      "peak_rss_mb": peak_kb / 1024.0}))


if __name__ == "__main__":
    main()
