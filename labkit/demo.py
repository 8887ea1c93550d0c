"""``make demo``: the main walkthrough, headless, on data that ships with scikit-learn.

Traces a small classifier for the handwritten digits (8x8 images) through a full
training step, records the step's memory, compares three optimization recipes against
fp32, trains it with :class:`labkit.Lab` (Lightning, CPU) and writes what a researcher
would look at: one self-contained HTML report (graph picture, per-layer table, memory
timeline, recipe comparison, training curves), the trace file (loadable with
``labkit.Trace.load``), TensorBoard logs and a JSON summary.

Run: ``python -m labkit.demo --out demo-output``.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# the three recipes measured against fp32 (labkit.compare adds the fp32 row)
RECIPES: dict[str, dict[str, Any]] = {
    "bf16-mixed": {"precision": "bf16-mixed"},
    "checkpoint": {"checkpoint": ["Linear"]},
    "bf16 + checkpoint": {"precision": "bf16-mixed", "checkpoint": ["Linear"]},
}


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
        nn.Linear(64, 128),
        nn.ReLU(),
        nn.Dropout(0.1),
        nn.Linear(128, 64),
        nn.ReLU(),
        nn.Linear(64, 10),
    )


def accuracy(out: Any, target: Any) -> Any:
    """Share of correct arg-max predictions."""
    return (out.argmax(1) == target).float().mean()


def _write_text(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def curves_png(run: Any) -> bytes:
    """Training loss per step and validation loss/accuracy per epoch, as one PNG."""
    import io

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 3.2), dpi=100)  # no pyplot: no backend switch, no global state
    ax1, ax2 = fig.subplots(1, 2)
    ax1.plot([s["step"] for s in run.steps], [s["loss"] for s in run.steps], color="#4e79a7")
    ax1.set_xlabel("optimizer step", fontsize=8)
    ax1.set_ylabel("training loss", fontsize=8)
    ax1.set_title("training loss", fontsize=9)
    epochs = [e for e in run.epochs if "val_loss" in e]
    xs = [e["epoch"] for e in epochs]
    ax2.plot(xs, [e["val_loss"] for e in epochs], "o-", color="#e15759", label="val loss")
    ax2.set_xlabel("epoch", fontsize=8)
    ax2.set_title("validation", fontsize=9)
    if epochs and "val_acc" in epochs[0]:
        ax3 = ax2.twinx()
        ax3.plot(xs, [e["val_acc"] for e in epochs], "s-", color="#59a14f", label="val acc")
        ax3.set_ylabel("accuracy", fontsize=8)
        ax3.tick_params(labelsize=7)
    ax2.legend(fontsize=7, loc="center right")
    for ax in (ax1, ax2):
        ax.tick_params(labelsize=7)
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    return buf.getvalue()


def _table(head: list[str], rows: list[list[str]]) -> str:
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def report_html(trace: Any, mem: Any, comparison: Any, run: Any, facts: dict[str, Any]) -> str:
    """The self-contained report: every picture is an inline base64 PNG."""
    from labkit._format import fmt_bytes, fmt_time
    from labkit.views import png_img, profile_html

    cmp_rows = [
        [
            r.label,
            "error: " + r.error if r.error else fmt_time(r.step_time or 0.0),
            _fmt(r.speedup, ".2f") + ("x" if r.speedup is not None else ""),
            fmt_bytes(r.peak_memory) if r.peak_memory is not None else "-",
            _fmt(r.max_abs, ".2g"),
            _fmt(r.loss, ".4f"),
        ]
        for r in comparison.results
    ]
    cmp_head = ["recipe", "step (median)", "speedup", "peak memory", "max |out - fp32|", "loss"]
    val = run.epochs[-1] if run.epochs else {}
    css = (
        "body{font-family:system-ui,sans-serif;max-width:1000px;margin:2em auto;color:#222}"
        "table{border-collapse:collapse;font-size:13px;margin:1em 0}"
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
        "pre{background:#f6f6f6;padding:8px;overflow-x:auto;font-size:12px}"
    )
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>labkit demo report</title><style>{css}</style></head><body>",
        "<h1>labkit demo: an MLP on scikit-learn's digits</h1>",
        f"<p>{html.escape(facts['data'])}; {facts['params']:,} parameters, "
        f"{facts['flops_per_step']:,} FLOPs per training step (batch of 64).</p>",
        "<h2 id='graph'>Graph</h2>",
        png_img(trace.plot("graph"), alt="graph"),
        "<h2 id='layers'>Per-layer table</h2>",
        profile_html(trace),
        f"<pre>{html.escape(trace.summary())}</pre>",
        "<h2 id='memory'>Memory timeline</h2>",
        f"<p>Peak {fmt_bytes(mem.peak_bytes)} in {html.escape(mem.peak_phase)}.</p>",
        png_img(mem.trace.plot("memory"), alt="memory timeline"),
        f"<pre>{html.escape(mem.summary())}</pre>",
        "<h2 id='recipes'>Recipe comparison</h2>",
        f"<p>{comparison.mode} steps, interleaved, median of {comparison.steps} per recipe, "
        f"on {html.escape(comparison.device)}; ratios depend on this machine and its load.</p>",
        _table(cmp_head, cmp_rows),
        "<h2 id='training'>Training curves</h2>",
        f"<p>{len(run.epochs)} epochs with labkit.Lab (Lightning), status {run.status}; "
        f"final validation: "
        + ", ".join(f"{k} {v:.4f}" for k, v in val.items() if k.startswith("val_"))
        + "</p>",
        png_img(curves_png(run), alt="training curves"),
        f"<p>TensorBoard logs: <code>{html.escape(facts['tensorboard'])}</code></p>",
        "</body></html>",
    ]
    return "\n".join(parts)


def run(out: Path, *, epochs: int = 5, seed: int = 0) -> dict[str, Any]:
    """Run the walkthrough and write its outputs under ``out``; returns what it wrote."""
    import torch
    import torch.nn.functional as F
    from torch.utils.data import TensorDataset

    import labkit
    from labkit.optimize import Recipe

    torch.manual_seed(seed)
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    x_tr, y_tr, x_va, y_va = load_digits_tensors(seed)
    model = build_model()
    batch = x_tr[:64], y_tr[:64]

    def loss_fn(logits: Any) -> Any:
        return F.cross_entropy(logits, batch[1])

    trace = labkit.trace(model, batch[0], loss=loss_fn)  # type: ignore[operator]  # callable module
    trace.save(out / "trace.json")
    summary = trace.summary()
    _write_text(out / "summary.txt", summary + "\n")

    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    mem = labkit.memory(model, batch[0], loss=loss_fn, optimizer=opt)

    recipes = {name: Recipe.from_dict(r) for name, r in RECIPES.items()}
    comparison = labkit.compare(
        model, batch[0], recipes, loss=loss_fn, steps=6, warmup=2, val=(x_va, y_va), seed=seed
    )

    model = build_model()  # train from fresh weights (the memory step took one Adam step)
    lab = labkit.Lab(
        model,
        (TensorDataset(x_tr, y_tr), TensorDataset(x_va, y_va)),
        loss=F.cross_entropy,
        optimizer="adam",
        lr=1e-3,
        batch_size=64,
        metrics={"acc": accuracy},
        logdir=out / "run",
    )
    t0 = time.perf_counter()
    fit = lab.fit(
        max_epochs=epochs,
        seed=seed,
        accelerator="cpu",
        dashboard=False,
        trainer_kwargs={"enable_progress_bar": False},
    )
    train_s = time.perf_counter() - t0
    if fit.status != "finished":
        raise RuntimeError(f"training did not finish: {fit.status} {fit.error or ''}")
    model.eval()
    with torch.no_grad():
        acc = (model(x_va).argmax(1) == y_va).float().mean().item()
    tb = str(Path(fit.logdir) / "tensorboard")

    top = trace.top(3, by="time")
    report: dict[str, Any] = {
        "data": f"sklearn digits: {len(x_tr)} train / {len(x_va)} validation images",
        "params": trace.total_params,
        "flops_per_step": trace.total_flops,
        "slowest_modules": [(r["path"], r["type"], r["value"]) for r in top],
        "peak_memory_bytes": mem.peak_bytes,
        "recipes": {
            r.label: {"speedup": r.speedup, "peak_memory": r.peak_memory, "error": r.error}
            for r in comparison.results
        },
        "epochs": epochs,
        "final_loss": fit.losses[-1] if fit.losses else None,
        "val_accuracy": acc,
        "train_seconds": train_s,
        "tensorboard": tb,
    }
    _write_text(out / "report.html", report_html(trace, mem, comparison, fit, report))
    report["files"] = {
        "trace": str(out / "trace.json"),
        "summary": str(out / "summary.txt"),
        "html": str(out / "report.html"),
        "tensorboard": tb,
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
    for label, r in report["recipes"].items():
        speed = f"{r['speedup']:.2f}x" if r["speedup"] is not None else r["error"]
        print(f"recipe {label:24s} speedup vs fp32: {speed}")
    print(f"validation accuracy after {args.epochs} epochs: {report['val_accuracy']:.3f}")
    for what, path in report["files"].items():
        print(f"{what:12s} {path}")
    print(f"open the report: {report['files']['html']}")
    print(f"TensorBoard: tensorboard --logdir {report['tensorboard']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
