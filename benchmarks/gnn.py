"""GAT node classification: Lab.fit against a hand-written PyG loop, full-batch and NeighborLoader.

Run: ``python -m benchmarks.gnn`` (``--quick`` for a short run).
Targets (issue 8), on an SBM graph of 20k nodes, ~200k edges, 64 features:
epoch time and peak memory of ``Lab.fit`` / a hand-written PyG loop <= 1.05 each, for
full-batch and NeighborLoader training; 2-process DDP / 1 process epoch time (reported).

Every sample is a fresh Python process (``--one VARIANT``), so peak memory is that
process's own: the kernel's peak-RSS counter is reset (``/proc/self/clear_refs``) right
before training and read after it. Samples run interleaved (A B C ... A B C ...). An epoch
is one pass over the training nodes plus a full-batch validation pass, in both the loop and
Lab (where Lightning runs validation and Lab writes its end-of-epoch checkpoint); its time
is the median gap between consecutive epoch ends after the first epoch. The DDP variant
runs 2 forked processes; its peak memory is not measured. Every process uses ``--threads``
torch threads (default 1: on a small shared machine OpenMP threads that outnumber free
cores spin and make timings erratic), so DDP x2 uses twice the cores of one process.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._harness import BenchResult, Row, report

NODES, CLASSES, FEATURES, DEGREE = 20_000, 8, 64, 10
BATCH, FANOUT = 1024, [10, 10]
VARIANTS = {
    "loop full-batch": "1.00x",
    "Lab full-batch": "<= 1.05x loop (target)",
    "loop NeighborLoader": "1.00x",
    "Lab NeighborLoader": "<= 1.05x loop (target)",
    "Lab NeighborLoader DDP x2": "vs Lab NeighborLoader (reported)",
}


def _graph():  # type: ignore[no-untyped-def]
    from labkit.gnn import sbm

    return sbm(NODES, CLASSES, seed=0, num_features=FEATURES, avg_degree=DEGREE)


def _model():  # type: ignore[no-untyped-def]
    import torch

    from labkit.gnn import GAT

    torch.manual_seed(0)
    return GAT(FEATURES, 8, CLASSES, heads=8, dropout=0.5)


def _rss() -> tuple[int, int]:
    """(current RSS, peak RSS since the last reset) of this process, in bytes."""
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) * 1024
    return fields["VmRSS"], fields["VmHWM"]


def _reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS


def _loop(data, epochs: int, minibatch: bool) -> list[float]:  # type: ignore[no-untyped-def]
    """What a user writes by hand with PyG: Adam, cross-entropy on the training nodes."""
    import torch
    import torch.nn.functional as F

    from labkit.gnn.sampler import neighbor_loader

    model = _model()
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    loader = None
    if minibatch:
        loader = neighbor_loader(
            data, FANOUT, input_nodes=data.train_mask, batch_size=BATCH, shuffle=True
        )
    ends = []
    for _ in range(epochs):
        model.train()
        batches = loader if minibatch else [data]
        for batch in batches:
            opt.zero_grad()
            out = model(batch.x, batch.edge_index)
            sel = slice(0, batch.batch_size) if minibatch else batch.train_mask
            loss = F.cross_entropy(out[sel], batch.y[sel])
            loss.backward()
            opt.step()
            loss.item()
        model.eval()
        with torch.no_grad():
            out = model(data.x, data.edge_index)
            F.cross_entropy(out[data.val_mask], data.y[data.val_mask]).item()
        ends.append(time.perf_counter())
    return ends


def _lab(data, epochs: int, minibatch: bool, devices: int) -> list[float]:  # type: ignore[no-untyped-def]
    import torch.nn.functional as F

    from labkit.gnn import GraphDataModule
    from labkit.train import Lab

    dm = GraphDataModule(data, batch_size=BATCH if minibatch else None, num_neighbors=FANOUT)
    with tempfile.TemporaryDirectory() as d:
        lab = Lab(_model(), dm, loss=F.cross_entropy, lr=5e-3, logdir=d)
        run = lab.fit(
            max_epochs=epochs,
            devices=devices,
            accelerator="cpu",
            dashboard=False,
            trainer_kwargs={"enable_progress_bar": False},
        )
    assert run.status == "finished", run.error
    return [e["t"] for e in run.epochs]


def one(variant: str, epochs: int, threads: int) -> dict[str, float]:
    """Run one sample of ``variant`` in this process; return its figures."""
    import torch

    torch.set_num_threads(threads)  # per process; forked DDP workers inherit it
    # import what Lab.fit imports before the peak-RSS counter is reset, in every variant:
    # code pages of Lightning and TensorBoard are not training memory
    import lightning.pytorch
    import lightning.pytorch.loggers  # noqa: F401
    import tensorboard  # noqa: F401

    import labkit.train.lab
    import labkit.train.module  # noqa: F401

    data = _graph()
    minibatch = "NeighborLoader" in variant
    devices = 2 if "DDP" in variant else 1
    rss0, _ = _rss()
    _reset_peak()
    if variant.startswith("loop"):
        ends = _loop(data, epochs, minibatch)
    else:
        ends = _lab(data, epochs, minibatch, devices)
    _, peak = _rss()
    gaps = [b - a for a, b in itertools.pairwise(ends)]
    return {
        "epoch_s": statistics.median(gaps),
        "peak_rss": peak,
        "rss_before": rss0,
        "edges": data.num_edges,
    }


def _sample(variant: str, epochs: int, threads: int) -> dict[str, float]:
    cmd = [
        sys.executable,
        "-W",
        "ignore",
        "-m",
        "benchmarks.gnn",
        "--one",
        variant,
        "--epochs",
        str(epochs),
        "--threads",
        str(threads),
    ]
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    out = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        env=env,
        check=False,
        cwd=Path(__file__).resolve().parents[1],
    )
    if out.returncode != 0:
        raise RuntimeError(f"{variant} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _rows(samples, key, base, anchors, scale=1.0):  # type: ignore[no-untyped-def]
    rows = []
    for name, vals in samples.items():
        xs = [v[key] * scale for v in vals]
        med = statistics.median(xs)
        rows.append(
            Row(
                name=name,
                median_s=med,
                min_s=min(xs),
                max_s=max(xs),
                ratio=med / statistics.median(x[key] * scale for x in samples[base]),
                anchor=anchors.get(name, ""),
                samples=len(xs),
            )
        )
    return tuple(rows)


def _memory_table(kind: str, base: str, samples, meta) -> None:  # type: ignore[no-untyped-def]
    """Peak RSS and its rise over the pre-training RSS, in MiB, as ratios to the loop."""
    mib = 2**20
    figures = {
        n: (
            statistics.median(s["peak_rss"] for s in v) / mib,
            statistics.median(s["peak_rss"] - s["rss_before"] for s in v) / mib,
        )
        for n, v in samples.items()
    }
    b_peak, b_rise = figures[base]
    print(f"\n### gnn_memory_{kind} (baseline: {base})\n")
    print("| variant | peak RSS | ratio | rise during training | ratio | anchor |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    rows = []
    for n, (peak, rise) in figures.items():
        anchor = "1.00x" if n == base else "<= 1.05x loop (target)"
        print(
            f"| {n} | {peak:.0f} MiB | {peak / b_peak:.2f}x | {rise:.0f} MiB | "
            f"{rise / b_rise:.2f}x | {anchor} |"
        )
        rows.append(
            Row(
                name=n,
                median_s=peak,
                min_s=rise,
                max_s=rise,
                ratio=peak / b_peak,
                anchor=anchor,
                samples=len(samples[n]),
            )
        )
    note = {"unit": "MiB: median_s = peak RSS, min_s = max_s = rise during training"}
    path = BenchResult(
        name=f"gnn_memory_{kind}", baseline=base, rows=tuple(rows), meta={**meta, **note}
    ).save()
    print(f"\nwrote {path}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--one", choices=list(VARIANTS))
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="torch threads per process")
    ap.add_argument("--quick", action="store_true", help="4 epochs, 1 round")
    a = ap.parse_args()
    if a.one:
        print(json.dumps(one(a.one, a.epochs, a.threads)))
        return
    epochs, rounds = (4, 1) if a.quick else (a.epochs, a.rounds)
    samples: dict[str, list[dict[str, float]]] = {v: [] for v in VARIANTS}
    for _ in range(rounds):
        for v in VARIANTS:
            samples[v].append(_sample(v, epochs, a.threads))
    edges = samples["loop full-batch"][0]["edges"]
    meta = {
        "nodes": NODES,
        "edges": edges,
        "features": FEATURES,
        "classes": CLASSES,
        "model": "GAT(64, 8, 8, heads=8)",
        "batch_size": BATCH,
        "fanout": FANOUT,
        "epochs": epochs,
        "rounds": rounds,
        "threads_per_process": a.threads,
        "cpus": os.cpu_count(),
    }
    groups = {
        "full-batch": ["loop full-batch", "Lab full-batch"],
        "NeighborLoader": [
            "loop NeighborLoader",
            "Lab NeighborLoader",
            "Lab NeighborLoader DDP x2",
        ],
    }
    for kind, names in groups.items():
        base = names[0]
        sub = {n: samples[n] for n in names}
        report(
            BenchResult(
                name=f"gnn_epoch_{kind}",
                baseline=base,
                rows=_rows(sub, "epoch_s", base, VARIANTS),
                meta=meta,
            )
        )
        measured = {n: v for n, v in sub.items() if "DDP" not in n}
        _memory_table(kind, base, measured, meta)
    ddp = statistics.median(s["epoch_s"] for s in samples["Lab NeighborLoader DDP x2"])
    single = statistics.median(s["epoch_s"] for s in samples["Lab NeighborLoader"])
    print(
        f"\nDDP x2 / 1 process epoch time (NeighborLoader, same global batch {BATCH}): "
        f"{ddp / single:.2f}x ({ddp:.2f} s vs {single:.2f} s, {os.cpu_count()} cores)"
    )


if __name__ == "__main__":
    main()
