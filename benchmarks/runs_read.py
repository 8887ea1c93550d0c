"""Reading many runs: ``labkit.runs`` over 200 runs of 100k steps each (target <= 2 s).

Run: ``python -m benchmarks.runs_read`` (``--runs``, ``--steps``, ``--points``).

The runs are written with labkit's own writer (:func:`labkit.train.run_table.write_columns`,
which ``Run.save`` uses for every fit): ``series.bin`` per run with the step columns a fit
records (``step``, ``epoch``, ``loss``, ``compute_time``, ``data_time``, ``samples``,
``t``) and an epoch record per 1,000 steps (``val_loss``, ``val_acc``). ``run.json`` is
not written: ``labkit.runs`` does not read it when ``series.bin`` is there (at 100k steps
it would be ~15 MB of JSON per run, 3 GB for 200).

Variants, interleaved after a warm-up (A B C A B C ...):

- ``labkit.runs``: every run's record, summaries and the curves of ``loss`` and the epoch
  metrics, each cut to ``--points`` points by min/max buckets: the figure with the target;
- ``columns only``: every run's ``loss`` and ``step`` columns mapped and summed, nothing
  else: the floor of any reader of these files;
- ``labkit.runs, 2 metrics``: ``metrics=["loss", "val_acc"]``.

The page cache is warm after the warm-up round (as in a notebook re-reading its runs).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks._harness import Bench
from labkit.train.run_table import SERIES_FILE, read_series, runs, write_columns


def make_runs(root: Path, n_runs: int, steps: int) -> None:
    """``n_runs`` runs of ``steps`` steps, each with its own noisy loss curve and a spike."""
    rng = np.random.default_rng(0)
    step = np.arange(1, steps + 1, dtype=np.float64)
    for i in range(n_runs):
        t0 = 1.8e9 + 1e5 * i
        loss = 2.0 * np.exp(-step / (steps / (2 + i % 5))) + 0.05 * rng.standard_normal(steps)
        loss[rng.integers(steps)] += 5.0  # a spike the downsampling must keep
        cols = {
            "step": step,
            "epoch": (step - 1) // 1000,
            "loss": loss,
            "compute_time": 0.01 + 0.001 * rng.random(steps),
            "data_time": 0.001 * rng.random(steps),
            "samples": np.full(steps, 32.0),
            "t": t0 + 0.011 * step,
        }
        epochs = [
            {
                "epoch": e,
                "step": (e + 1) * 1000,
                "t": t0 + 11.0 * (e + 1),
                "val_loss": float(loss[(e + 1) * 1000 - 1]),
                "val_acc": 0.5 + e / 400,
            }
            for e in range(steps // 1000)
        ]
        meta = {
            "schema": "labkit.run",
            "version": 1,
            "logdir": str(root / f"run{i:03d}"),
            "config": {
                "lr": 10 ** -(1 + i % 4),
                "seed": i,
                "max_epochs": steps // 1000,
                "recipe": {"precision": "32"},
            },
            "status": "finished",
            "epochs": epochs,
            "checkpoints": [],
            "traces": [],
            "error": None,
            "notes": [],
            "ranks": [],
            "started": t0,
            "ended": t0 + 0.011 * steps,
        }
        folder = root / f"run{i:03d}"
        folder.mkdir()
        write_columns(meta, cols, folder, n_steps=steps)


def columns_only(root: Path) -> float:
    """Map every run's series and sum its ``loss`` and ``step`` columns (every byte read)."""
    total = 0.0
    for folder in sorted(root.iterdir()):
        _, cols = read_series(folder, ["loss", "step"])
        total += float(cols["loss"].sum() + cols["step"].sum())
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--points", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        t = time.perf_counter()
        make_runs(root, args.runs, args.steps)
        size = sum(f.stat().st_size for f in root.rglob(SERIES_FILE))
        print(
            f"wrote {args.runs} runs x {args.steps} steps ({size / 2**20:.0f} MiB) in "
            f"{time.perf_counter() - t:.1f} s"
        )
        rs = runs(root, points=args.points)
        longest = max(len(c["loss"]["x"]) for c in rs.curves.values())
        spikes = sum(max(c["loss"]["y"]) > 4.0 for c in rs.curves.values())
        print(
            f"read {len(rs)} runs; loss curves cut to <= {longest} points; the spike kept in "
            f"{spikes}/{len(rs)}"
        )
        bench = Bench("runs_read", baseline="columns only", warmup=1, rounds=args.rounds)
        bench.add("columns only", lambda: columns_only(root), anchor="1.00x (reading floor)")
        bench.add("labkit.runs", lambda: runs(root, points=args.points), anchor="<= 2 s (issue 30)")
        bench.add(
            "labkit.runs, 2 metrics",
            lambda: runs(root, metrics=["loss", "val_acc"], points=args.points),
            anchor="<= 2 s",
        )
        result = bench.run()
        print(result.to_markdown())
        full = result.row("labkit.runs").median_s
        print(
            f"labkit.runs: {full:.2f} s for {args.runs} runs x {args.steps} steps "
            f"({'meets' if full <= 2.0 else 'MISSES'} the 2 s target)"
        )
        result.save()


if __name__ == "__main__":
    main()
