#!/usr/bin/env python3
"""Collects the default models' training logs and evaluations into the model card's data:
resources/models/results.json (read by the tests), results.md (the table quoted in the model
card), sinks.md (attention sinks and massive activations, from `relulens inspect` JSON on
held-out passages) and training_curves.png. Usage: model_card.py MODELS_DIR WORK_DIR"""
import csv
import glob
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ORDER = ["softmax", "relu-len", "reluformer", "relu", "ffn-softmax", "ffn-softmax-ln", "sigmoid",
         "softpick"]


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
            "steps": int(last["step"]),
            "tokens_seen": int(last["tokens_seen"]),
            "wall_seconds": float(last["elapsed_s"]),
            "final_train_loss": train[-1],
            "final_validation_loss": val[-1][1] if val else None,
            "validation": evaluation["results"],
            "heldout_loss_256": heldout["results"][0]["loss"],
            "sinks": sink_summary(work, name),
        })
        # Smooth the noisy per-step training loss over 25 steps for the plot.
        smooth = [sum(train[max(0, i - 24):i + 1]) / len(train[max(0, i - 24):i + 1])
                  for i in range(len(train))]
        axes[0].plot(steps, smooth, label=name, linewidth=1.2)
        axes[1].plot([s for s, _ in val], [v for _, v in val], label=name, linewidth=1.2, marker=".")
    for ax, title in zip(axes, ["training loss (25-step mean)", "validation loss"]):
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.set_ylabel("cross-entropy (nats)")
        ax.set_ylim(2.5, 8.5)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("ReluLens default models: same data, size, seed and step budget")
    fig.tight_layout()
    fig.savefig(os.path.join(models_dir, "training_curves.png"))
    with open(os.path.join(models_dir, "results.json"), "w") as f:
        json.dump(results, f, indent=2)
        f.write("\n")
    lines = ["| model | attention | FFN | steps | wall time | loss@256 | loss@512 | loss@1024 | loss@2048 | ppl@256 | ppl@2048 | held-out@256 |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for m in results["models"]:
        by = {r["context"]: r for r in m["validation"]}
        cells = [f"{by[c]['loss']:.3f}" if c in by else "–" for c in (256, 512, 1024, 2048)]
        lines.append(f"| `{m['name']}` | {m['attention']} | {m['ffn']} | {m['steps']} | "
                     f"{m['wall_seconds'] / 60:.0f} min | " + " | ".join(cells) +
                     f" | {by[256]['perplexity']:.1f} | {by[2048]['perplexity']:.1f} | {m['heldout_loss_256']:.3f} |")
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


if __name__ == "__main__":
    main()
