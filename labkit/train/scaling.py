"""Scaling: short fits at several process counts on the same data, side by side.

:func:`scaling` (``lab.scaling(devices=[1, 2], steps=30)``) runs ``steps`` optimizer
steps at each process count from the same starting weights, each process on batches of
``lab.batch_size`` (so N processes take N batches per step), and reports the throughput,
the efficiency against one process (throughput / (N x one process's)) and where the step
goes: the share spent waiting in the all-reduce, the buckets' time in flight, data wait,
and how much the step grew over one process's, split into its parts.

Example:
    >>> s = lab.scaling(devices=[1, 2], steps=30)  # doctest: +SKIP
    >>> print(s.summary())                         # doctest: +SKIP
"""

from __future__ import annotations

import copy
import os
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import lightning.pytorch as pl
import torch

from labkit.train._ranks import SKIP, advice

if TYPE_CHECKING:
    from labkit.train.lab import Lab
    from labkit.train.run import Run

__all__ = ["Scaling", "ScalingPoint", "scaling"]


@dataclass(frozen=True)
class ScalingPoint:
    """One process count's short fit, as plain data (times in seconds per step, means).

    Args:
        processes: Process count.
        steps: Steps measured (after the warm-up steps left out).
        step_time: Mean step time on rank 0 (data wait included).
        samples_per_s: Samples per second over all processes.
        efficiency: ``samples_per_s / (processes x one process's)``; None without a
            one-process point.
        data_time: Mean data wait per step (mean over ranks).
        compute_time: Mean forward + backward + optimizer per step, all-reduce wait out.
        comm_wait: Mean time per step waiting for the all-reduce (0 on one process).
        comm_time: Mean buckets' time in flight per step (overlaps backward).
        bucket_bytes: Gradient bytes all-reduced per step.
        logdir: The short fit's run directory.
    """

    processes: int
    steps: int
    step_time: float
    samples_per_s: float
    efficiency: float | None
    data_time: float
    compute_time: float
    comm_wait: float
    comm_time: float
    bucket_bytes: int
    logdir: str

    @property
    def comm_share(self) -> float:
        """Share of the step spent waiting for the all-reduce."""
        return self.comm_wait / self.step_time if self.step_time else 0.0


@dataclass(frozen=True)
class Scaling:
    """Throughput and efficiency at several process counts (see :func:`scaling`).

    Args:
        points: One :class:`ScalingPoint` per process count, in the order run.
        batch_size: Samples per process per step.
        device: Where the fits ran (``"cpu"``, ``"gpu"``).
        notes: Sentences: how the figures were taken, where the rest goes, advice.

    Example:
        >>> s = Scaling([], batch_size=32, device="cpu")
        >>> s
        Scaling(processes=[], batch_size=32, device='cpu')
    """

    points: list[ScalingPoint]
    batch_size: int
    device: str
    notes: list[str] = field(default_factory=list)

    def point(self, processes: int) -> ScalingPoint:
        """The point measured at ``processes`` processes."""
        for p in self.points:
            if p.processes == processes:
                return p
        raise KeyError(f"no point at {processes} processes; measured {self._counts()}")

    def _counts(self) -> list[int]:
        return [p.processes for p in self.points]

    def summary(self) -> str:
        """The points as a monospace table, then the notes."""
        head = (
            f"{'processes':>9} {'step ms':>9} {'samples/s':>10} {'efficiency':>10} "
            f"{'comm wait':>9} {'in flight':>9} {'data wait':>9} {'MB/step':>8}"
        )
        lines = [head]
        for p in self.points:
            eff = f"{p.efficiency:.0%}" if p.efficiency is not None else "-"
            share = [_share(v, p.step_time) for v in (p.comm_wait, p.comm_time, p.data_time)]
            lines.append(
                f"{p.processes:>9} {1e3 * p.step_time:>9.2f} {p.samples_per_s:>10,.0f} "
                f"{eff:>10} {share[0]:>9} {share[1]:>9} "
                f"{share[2]:>9} {p.bucket_bytes / 2**20:>8.2f}"
            )
        return "\n".join([*lines, *self.notes])

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON-ready)."""
        return asdict(self)

    def __repr__(self) -> str:
        return (
            f"Scaling(processes={self._counts()}, batch_size={self.batch_size}, "
            f"device={self.device!r})"
        )


class _Threads(pl.Callback):
    """Sets torch's intra-op threads in each training process (at the trainer's setup)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        torch.set_num_threads(self.n)

    def __repr__(self) -> str:
        return f"_Threads({self.n})"


def _share(part: float, step: float) -> str:
    return f"{part / step:.0%}" if step else "-"


def _mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else 0.0


def _point(run: Run, processes: int) -> dict[str, Any]:
    """A short fit's figures: per-rank means on several processes, rank 0's steps on one."""
    ranks = [r for g in run.ranks for r in g["ranks"] if r["steps"]]
    steps = run.steps[SKIP:]
    if (processes > 1 and not ranks) or (processes == 1 and not steps):
        raise RuntimeError(
            f"the {processes}-process fit in {run.logdir} recorded no step "
            f"after warm-up ({run.status}: {run.error})"
        )
    if processes > 1:  # weighted by the steps each gathering holds, mean over ranks
        n = sum(r["steps"] for r in ranks)

        def avg(key: str) -> float:
            return sum(r[key] * r["steps"] for r in ranks) / n

        out = {
            "steps": n // processes,
            "step_time": avg("step_time"),
            "data_time": avg("data_time"),
            "compute_time": avg("compute_time"),
            "comm_wait": avg("comm_wait"),
            "comm_time": avg("comm_time"),
            "bucket_bytes": round(avg("bucket_bytes")),
        }
    else:
        out = {
            "steps": len(steps),
            "step_time": _mean([s["compute_time"] + s["data_time"] for s in steps]),
            "data_time": _mean([s["data_time"] for s in steps]),
            "compute_time": _mean([s["compute_time"] for s in steps]),
            "comm_wait": 0.0,
            "comm_time": 0.0,
            "bucket_bytes": 0,
        }
    per_step = processes * _mean([float(s.get("samples") or 0) for s in run.steps])
    out.update(
        processes=processes,
        logdir=run.logdir,
        samples_per_s=per_step / out["step_time"] if out["step_time"] else 0.0,
    )
    return out


def _notes(points: list[ScalingPoint]) -> list[str]:
    notes = [
        f"means per step after {SKIP} warm-up step(s), over every rank; throughput = "
        "samples per step over all processes / mean step time; efficiency = "
        "throughput / (processes x one process's)"
    ]
    one = next((p for p in points if p.processes == 1), None)
    for p in points:
        if p.processes == 1 or one is None:
            continue
        grew = p.step_time - one.step_time
        compute, data = p.compute_time - one.compute_time, p.data_time - one.data_time
        notes.append(
            f"{p.processes} processes: the step takes {1e3 * grew:+.2f} ms vs one process: "
            f"all-reduce wait {1e3 * p.comm_wait:+.2f}, compute {1e3 * compute:+.2f}, data "
            f"wait {1e3 * data:+.2f}, the rest (Lightning's loop between hooks) "
            f"{1e3 * (grew - p.comm_wait - compute - data):+.2f} ms"
        )
        notes += advice(
            {"step_time": p.step_time, "comm_wait": p.comm_wait, "data_time": p.data_time}
        )
    return notes


def scaling(
    lab: Lab,
    *,
    devices: Sequence[int] = (1, 2),
    steps: int = 30,
    accelerator: str = "cpu",
    logdir: str | os.PathLike[str] | None = None,
    threads: int | None = None,
    **fit_kwargs: object,
) -> Scaling:
    """Run ``steps`` steps at each process count in ``devices`` and compare throughput.

    Each count starts from the same weights (``lab.model`` is restored afterwards, and
    the short fits are not added to ``lab.runs``); its run lands in
    ``<logdir>/devices_<N>``.

    Args:
        lab: The :class:`~labkit.train.Lab`.
        devices: Process counts to measure (include 1 for the efficiency figure).
        steps: Optimizer steps per fit.
        accelerator: ``"cpu"`` or ``"gpu"``.
        logdir: Parent folder of the short fits (default ``<lab.logdir>/scaling``).
        threads: torch intra-op threads of every process, the same at every count so a
            process has the same resources at each (default: this machine's cores /
            the largest count, at least 1). Without it one process would take every core
            and N processes share them (Lightning's rule), which on a small or busy CPU
            makes the one-process figure the odd one out.
        **fit_kwargs: More ``Lab.fit`` options (``strategy``, ``trainer_kwargs``, ...).

    Returns:
        A :class:`Scaling`.

    Example:
        >>> print(lab.scaling(devices=[1, 2], steps=30).summary())  # doctest: +SKIP
    """
    if not devices or any(int(n) < 1 for n in devices):
        raise ValueError(f"devices must be process counts >= 1, got {list(devices)}")
    if steps <= SKIP + 1:
        raise ValueError(f"steps={steps}: give more than {SKIP + 1} (warm-up is left out)")
    root = Path(logdir) if logdir else Path(lab.logdir) / "scaling"
    cores = os.cpu_count() or 1
    threads = threads or max(1, cores // max(int(n) for n in devices))
    saved_threads, saved_env = torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = str(threads)  # Lightning's DDP workers keep it
    state = copy.deepcopy(lab.model.state_dict())
    n_runs = len(lab.runs)
    raw = []
    try:
        for n in devices:
            opts: dict[str, Any] = {
                "max_steps": steps,
                "max_epochs": -1,
                "devices": int(n),
                "accelerator": accelerator,
                "dashboard": False,
                "dry_run": False,
                "logdir": str(root / f"devices_{int(n)}"),
                "limit_val_batches": 0,
                **fit_kwargs,
            }
            tk: dict[str, Any] = {
                "enable_progress_bar": False,
                **(opts.get("trainer_kwargs") or {}),
            }
            extra = tk.get("callbacks") or []
            tk["callbacks"] = [
                _Threads(threads),
                *([extra] if not isinstance(extra, list) else extra),
            ]
            opts["trainer_kwargs"] = tk
            run = lab.fit(**opts)
            raw.append(_point(run, int(n)))
            lab.model.load_state_dict(state)
    finally:
        lab.model.load_state_dict(state)
        del lab.runs[n_runs:]
        torch.set_num_threads(saved_threads)
        if saved_env is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = saved_env
    one = next((r for r in raw if r["processes"] == 1), None)
    points = [
        ScalingPoint(
            **r,
            efficiency=r["samples_per_s"] / (r["processes"] * one["samples_per_s"])
            if one and one["samples_per_s"]
            else None,
        )
        for r in raw
    ]
    notes = _notes(points)
    notes.insert(
        1,
        f"each process ran torch on {threads} intra-op thread(s); this machine has {cores} core(s)",
    )
    return Scaling(points, batch_size=lab.batch_size, device=accelerator, notes=notes)
