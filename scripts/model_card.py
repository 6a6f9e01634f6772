#!/usr/bin/env python3
"""Collects the default models' training logs and evaluations into the model card's data:
resources/models/results.json (read by the tests), results.md (the table quoted in the model
card), sinks.md (attention sinks and massive activations, from `relulens inspect` JSON on
held-out passages), long.md (the long-input claim: each variant against softmax trained at the
same length, paired over the same windows), training_curves.png and loss_vs_context.png.
Usage: model_card.py MODELS_DIR WORK_DIR"""
import csv
import glob
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ORDER = ["softmax", "relu-len", "reluformer", "relu", "ffn-softmax", "ffn-softmax-ln", "sigmoid",
         "softpick", "long-softmax", "long-relu-len", "long-reluformer"]
CONTEXTS = [256, 512, 1024, 2048, 4096]
# The comparisons the long-input claim is about: (variant, baseline), trained at the same length.
PAIRS = [("reluformer", "softmax"), ("relu-len", "softmax"),
         ("long-reluformer", "long-softmax"), ("long-relu-len", "long-softmax"),
         ("long-softmax", "softmax"), ("long-reluformer", "reluformer"), ("long-relu-len", "relu-len")]
COLOURS = {"softmax": "C0", "relu_len": "C1", "reluformer": "C2", "relu": "C3", "sigmoid": "C6",
           "softpick": "C7"}


def paired(a, b, context):
    """Mean and standard error of a's loss minus b's over the windows both were scored on."""
    wa = next(r for r in a["validation"] if r["context"] == context)["window_losses"]
    wb = next(r for r in b["validation"] if r["context"] == context)["window_losses"]
    d = [x - y for x, y in zip(wa, wb)]
    mean = sum(d) / len(d)
    if len(d) < 2:
        return mean, 0.0
    return mean, math.sqrt(sum((x - mean) ** 2 for x in d) / (len(d) - 1) / len(d))


def loss_cell(by, context):
    if context not in by:
        return "–"
    return f"{by[context]['loss']:.3f} ± {by[context]['standard_error']:.3f}"


def plot_loss_vs_context(models, path):
    """Validation loss against window length: the papers' three variants trained at 256 and at
    1,024 tokens (left), and every model (right); dashed lines and squares for 1,024."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), dpi=120)
    claim = {"softmax", "relu-len", "reluformer", "long-softmax", "long-relu-len", "long-reluformer"}
    for ax, subset, title in [(axes[0], claim, "softmax, ReLU ÷ n, ReLUFormer: trained at 256 vs 1,024"),
                              (axes[1], None, "every bundled model")]:
        for m in models:
            if subset is not None and m["name"] not in subset:
                continue
            long_trained = m["training_context"] > 256
            rows = sorted(m["validation"], key=lambda r: r["context"])
            xs = [r["context"] for r in rows]
            colour = COLOURS.get(m["attention"], "C8" if m["ffn"] == "softmax" else "C9")
            if m["attention"] == "softmax" and m["ffn"] != "relu":
                colour = "C4" if m["ffn"] == "softmax" else "C5"
            ax.errorbar(xs, [r["loss"] for r in rows], yerr=[2 * r["standard_error"] for r in rows],
                        label=f"{m['name']} (trained at {m['training_context']:,})", color=colour,
                        linestyle="--" if long_trained else "-", marker="s" if long_trained else "o",
                        markersize=4, linewidth=1.3, capsize=2)
        for trained, style in [(256, ":"), (1024, "-.")]:
            ax.axvline(trained, color="grey", linestyle=style, linewidth=0.8)
        ax.set_xscale("log", base=2)
        ax.set_xticks(CONTEXTS)
        ax.set_xticklabels([f"{c:,}" for c in CONTEXTS])
        ax.set_xlabel("window length (tokens); dotted: 256, dash-dot: 1,024 training lengths")
        ax.set_ylabel("validation loss (nats), ± 2 s.e.")
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    fig.suptitle("ReluLens default models: loss against context length")
    fig.tight_layout()
    fig.savefig(path)


def read_log(path):
    rows = list(csv.DictReader(open(path)))
    steps = [int(r["step"]) for r in rows]
    train = [float(r["train_loss"]) for r in rows]
    val = [(int(r["step"]), float(r["val_loss"])) for r in rows if r["val_loss"]]
    return steps, train, val, rows[-1]


def sink_summary(work, name):
    """Per model, over every held-out passage: the share of heads flagged as sinks, the mean
    first-token share, and the largest residual value over the median (the largest layer)."""
    files = sorted(glob.glob(os.path.join(work, f"{name}.sinks.passage_*.json")))
    if not files:
        return None
    heads = sinks = 0
    shares, ratios, kurtoses, per_layer_share = [], [], [], {}
    tokens = abstaining = rows = 0
    for path in files:
        capture = json.load(open(path))
        tokens += len(capture["tokens"])
        best = 0.0
        for layer in capture["layers"]:
            for head in layer["heads"]:
                heads += 1
                sinks += bool(head["sink"]["sink_head"])
                abstaining += head["sink"]["zero_mass_rows"]
                rows += len(capture["tokens"]) - 1
                shares.append(head["sink"]["first_token_share"])
                per_layer_share.setdefault(layer["layer"], []).append(head["sink"]["first_token_share"])
            best = max(best, layer["residual"]["largest_over_median"])
            kurtoses.append(layer["residual"]["kurtosis"])
        ratios.append(best)
    return {
        "passages": len(files),
        "tokens": tokens,
        "threshold": capture["run"]["sink_threshold"],
        "sink_rate": sinks / heads,
        "abstaining_rows": abstaining / max(rows, 1),
        "mean_first_token_share": sum(shares) / len(shares),
        "first_token_share_by_layer": [sum(v) / len(v) for _, v in sorted(per_layer_share.items())],
        "largest_over_median": sum(ratios) / len(ratios),
        "max_kurtosis": max(kurtoses),
    }


def main():
    models_dir, work = sys.argv[1], sys.argv[2]
    results = {"heldout_file": "tests/data/heldout.txt", "models": []}
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), dpi=120)
    for name in ORDER:
        folder = os.path.join(models_dir, name)
        if not os.path.isdir(folder):
            continue
        config = json.load(open(os.path.join(folder, "config.json")))
        steps, train, val, last = read_log(os.path.join(folder, "train_log.csv"))
        evaluation = json.load(open(os.path.join(work, f"{name}.eval.json")))
        heldout = json.load(open(os.path.join(work, f"{name}.heldout.json")))
        results["models"].append({
            "name": name,
            "attention": config["attention"]["variant"],
            "ffn": config["ffn"],
            "training_context": config["context_length"],
            "steps": int(last["step"]),
            "tokens_seen": int(last["tokens_seen"]),
            "wall_seconds": float(last["elapsed_s"]),
            "final_train_loss": train[-1],
            "final_validation_loss": val[-1][1] if val else None,
            "validation": evaluation["results"],
            "heldout_loss_256": next(r["loss"] for r in heldout["results"] if r["context"] == 256),
            "heldout_loss_1024": next(r["loss"] for r in heldout["results"] if r["context"] == 1024),
            "sinks": sink_summary(work, name),
        })
        # Smooth the noisy per-step training loss over 25 steps for the plot.
        smooth = [sum(train[max(0, i - 24):i + 1]) / len(train[max(0, i - 24):i + 1])
                  for i in range(len(train))]
        style = "--" if config["context_length"] > 256 else "-"
        axes[0].plot(steps, smooth, label=name, linewidth=1.2, linestyle=style)
        axes[1].plot([s for s, _ in val], [v for _, v in val], label=name, linewidth=1.2,
                     marker=".", linestyle=style)
    for ax, title in zip(axes, ["training loss (25-step mean)", "validation loss"]):
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.set_ylabel("cross-entropy (nats)")
        ax.set_ylim(2.5, 8.5)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("ReluLens default models: same data, size, seed and step budget "
                 "(dashed: trained at 1,024 tokens, validated at 1,024)")
    fig.tight_layout()
    fig.savefig(os.path.join(models_dir, "training_curves.png"))
    plot_loss_vs_context(results["models"], os.path.join(models_dir, "loss_vs_context.png"))
    with open(os.path.join(models_dir, "results.json"), "w") as f:
        json.dump(results, f, indent=2)
        f.write("\n")
    lines = ["| model | attention | FFN | trained at | wall time | " +
             " | ".join(f"loss@{c}" for c in CONTEXTS) + " | ppl@256 | held-out@256 | held-out@1024 |",
             "| --- | --- | --- | ---: | ---: | " + " | ".join("---:" for _ in CONTEXTS) + " | ---: | ---: | ---: |"]
    for m in results["models"]:
        by = {r["context"]: r for r in m["validation"]}
        cells = [loss_cell(by, c) for c in CONTEXTS]
        lines.append(f"| `{m['name']}` | {m['attention']} | {m['ffn']} | {m['training_context']:,} | "
                     f"{m['wall_seconds'] / 60:.0f} min | " + " | ".join(cells) +
                     f" | {by[256]['perplexity']:.1f} | {m['heldout_loss_256']:.3f} | {m['heldout_loss_1024']:.3f} |")
    with open(os.path.join(models_dir, "results.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    sink_lines = ["| model | attention | sink heads | mean first-token share | first-token share by layer | rows with no mass | largest ÷ median | max kurtosis |",
                  "| --- | --- | ---: | ---: | --- | ---: | ---: | ---: |"]
    for m in results["models"]:
        s = m["sinks"]
        if not s:
            continue
        layers = " / ".join(f"{v:.2f}" for v in s["first_token_share_by_layer"])
        sink_lines.append(f"| `{m['name']}` | {m['attention']} | {100 * s['sink_rate']:.0f} % | "
                          f"{s['mean_first_token_share']:.3f} | {layers} | {100 * s['abstaining_rows']:.1f} % | "
                          f"{s['largest_over_median']:.1f} | "
                          f"{s['max_kurtosis']:.1f} |")
    with open(os.path.join(models_dir, "sinks.md"), "w") as f:
        f.write("\n".join(sink_lines) + "\n")
    print("\n".join(sink_lines))
    by_name = {m["name"]: m for m in results["models"]}
    long_lines = ["| difference (nats) | " + " | ".join(f"at {c:,}" for c in CONTEXTS) + " |",
                  "| --- | " + " | ".join("---:" for _ in CONTEXTS) + " |"]
    for a, b in PAIRS:
        if a not in by_name or b not in by_name:
            continue
        cells = []
        for c in CONTEXTS:
            mean, se = paired(by_name[a], by_name[b], c)
            cells.append(f"{mean:+.3f} ± {se:.3f}")
        long_lines.append(f"| `{a}` − `{b}` | " + " | ".join(cells) + " |")
    with open(os.path.join(models_dir, "long.md"), "w") as f:
        f.write("\n".join(long_lines) + "\n")
    print("\n".join(long_lines))


if __name__ == "__main__":
    main()
