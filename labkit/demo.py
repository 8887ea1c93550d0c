"""``make demo``: the main walkthrough, headless, on data that ships with scikit-learn.

Traces a small classifier for the handwritten digits (8x8 images) through a full
training step, trains it, and writes what a researcher would look at: the per-layer
table, the trace file (loadable with ``labkit.Trace.load``) and a short report.

Run: ``python -m labkit.demo --out demo-output``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def load_digits_tensors(seed: int = 0) -> tuple[Any, Any, Any, Any]:
    """Standardised digits split 80/20: ``(x_train, y_train, x_val, y_val)``."""
    import torch
    from sklearn.datasets import load_digits

    data = load_digits()
    x = torch.tensor(data.data, dtype=torch.float32)
    y = torch.tensor(data.target, dtype=torch.long)
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(len(x), generator=g)
    x, y = x[perm], y[perm]
    cut = int(0.8 * len(x))
    mean, std = x[:cut].mean(0), x[:cut].std(0).clamp_min(1e-3)
    x = (x - mean) / std
    return x[:cut], y[:cut], x[cut:], y[cut:]


def build_model() -> Any:
    """A small MLP classifier for 64-pixel digits."""
    from torch import nn

    return nn.Sequential(
        nn.Linear(64, 128), nn.ReLU(), nn.Dropout(0.1),
        nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10),
    )  # fmt: skip


def _write_text(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def run(out: Path, *, epochs: int = 5, seed: int = 0) -> dict[str, Any]:
    """Run the walkthrough and write its outputs under ``out``; returns what it wrote."""
    import torch
    import torch.nn.functional as F

    import labkit

    torch.manual_seed(seed)
    out.mkdir(parents=True, exist_ok=True)
    x_tr, y_tr, x_va, y_va = load_digits_tensors(seed)
    model = build_model()
    batch = x_tr[:64], y_tr[:64]

    trace = labkit.trace(model, batch[0], loss=lambda logits: F.cross_entropy(logits, batch[1]))
    trace.save(out / "trace.json")
    summary = trace.summary()
    _write_text(out / "summary.txt", summary + "\n")

    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    losses = []
    t0 = time.perf_counter()
    for _ in range(epochs):
        model.train()
        for i in range(0, len(x_tr), 64):
            opt.zero_grad()
            loss = F.cross_entropy(model(x_tr[i : i + 64]), y_tr[i : i + 64])
            loss.backward()
            opt.step()
            losses.append(loss.item())
    train_s = time.perf_counter() - t0
    model.eval()
    with torch.no_grad():
        acc = (model(x_va).argmax(1) == y_va).float().mean().item()

    top = trace.top(3, by="time")
    report = {
        "data": f"sklearn digits: {len(x_tr)} train / {len(x_va)} validation images",
        "params": trace.total_params,
        "flops_per_step": trace.total_flops,
        "slowest_modules": [(r["path"], r["type"], r["value"]) for r in top],
        "epochs": epochs,
        "final_loss": losses[-1],
        "val_accuracy": acc,
        "train_seconds": train_s,
        "files": {"trace": str(out / "trace.json"), "summary": str(out / "summary.txt")},
    }
    _write_text(out / "report.json", json.dumps(report, indent=2) + "\n")
    report["files"]["report"] = str(out / "report.json")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m labkit.demo", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--out", type=Path, default=Path("demo-output"), help="output folder")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    report = run(args.out, epochs=args.epochs, seed=args.seed)
    print(Path(report["files"]["summary"]).read_text())
    print(f"validation accuracy after {args.epochs} epochs: {report['val_accuracy']:.3f}")
    for what, path in report["files"].items():
        print(f"{what:8s} {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
