"""The ``lightning.Trainer`` a Lab's fit runs: its arguments and labkit's callbacks.

Part of :class:`~labkit.train._lab_launch.LabLaunch` (launch and ranks): the Recipe's
precision, TensorBoard, atomic checkpoints, no Lightning checkpointing or model summary,
and labkit's callbacks as one :class:`~labkit.train._callback_group.CallbackGroup`
(events, epoch seeds, checkpoints, rank progress and per-rank figures, the NaN guard).
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from labkit.train import _launch
from labkit.train._events import STOP_FILE, EventLog
from labkit.train.fit_options import FitOptions

if TYPE_CHECKING:
    import lightning.pytorch as pl

    from labkit.train.lab import Lab

_PRECISION: dict[str, Any] = {"32": "32-true", "bf16-mixed": "bf16-mixed", "16-mixed": "16-mixed"}
_QUIET_LOGGERS = ("lightning.pytorch", "lightning.fabric", "lightning.pytorch.utilities.rank_zero")


@contextlib.contextmanager
def _quiet_lightning() -> Iterator[None]:
    """Silence Lightning's info lines and its hints about the user's data loaders."""
    levels = {}
    for name in _QUIET_LOGGERS:
        lg = logging.getLogger(name)
        levels[name] = lg.level
        lg.setLevel(logging.WARNING)
    with warnings.catch_warnings():
        # hints about the user's own DataLoaders (worker count, logging interval vs. batches):
        # labkit shows throughput and data wait in the dashboard instead
        warnings.filterwarnings("ignore", message=r".*does not have many workers.*")
        warnings.filterwarnings("ignore", message=r".*smaller than the logging interval.*")
        # LabModule always defines validation_step; training-only data is a valid choice
        warnings.filterwarnings("ignore", message=r".*but have no `val_dataloader`.*")
        # a graph without val_mask validates on nothing (GraphDataModule's empty val list)
        warnings.filterwarnings("ignore", message=r"Total length of `list` across ranks is zero")
        # Lightning 2.6 on torch >= 2.10 calls a deprecated torch.utils._pytree API
        warnings.filterwarnings(
            "ignore", message=r".*isinstance\(treespec, LeafSpec\).*", category=FutureWarning
        )
        try:
            yield
        finally:
            for name, level in levels.items():
                logging.getLogger(name).setLevel(level)


def lab_callbacks(
    lab: Lab,
    plan: _launch.Plan,
    o: FitOptions,
    *,
    ckpt: str | None,
    logdir: Path,
    module: pl.LightningModule | None,
    sink: EventLog,
) -> tuple[Any, Any]:
    """labkit's callbacks as one :class:`CallbackGroup`, and the rank progress (fork)."""
    from labkit.train._callback import EpochSeed, LabCallback, LabCheckpoint
    from labkit.train._callback_group import CallbackGroup
    from labkit.train._progress import RankProgress
    from labkit.train._tensorboard import hparams_of
    from labkit.train.checkpoint import CHECKPOINTS
    from labkit.train.guards import NonFiniteGuard

    lab_cb = LabCallback(
        sink,
        stop_event=lab._stop,
        stop_file=logdir / STOP_FILE,
        stop_every=1 if plan.processes <= 1 else 10,
        trace_every=o.trace_every,
        histogram_every=o.histogram_every,
        logdir=logdir,
        resumed_from=ckpt,
        hparams=hparams_of(
            lab.recipe.to_dict(), {"seed": o.seed, "lr": lab.lr, "max_epochs": o.max_epochs}
        ),
    )
    callbacks: list[Any] = [
        lab_cb,
        EpochSeed(o.seed),
        LabCheckpoint(sink, dirpath=logdir / CHECKPOINTS),
    ]
    progress = RankProgress(plan.processes) if plan.mode == "fork" else None
    if progress is not None:  # names the rank that hung when a collective times out
        callbacks.append(progress)
    if o.rank_stats and (plan.processes * o.num_nodes > 1 or _launch.under_launcher()):
        from labkit.train._ranks import RankStats  # per-rank step breakdown, stragglers

        callbacks.insert(1, RankStats(sink, logdir=logdir))
    if o.guard:
        callbacks.append(
            NonFiniteGuard(
                check_grads=lab.recipe.precision != "16-mixed",
                step=getattr(module, "step_fn", None),
                loss=getattr(module, "loss_fn", None),
            )
        )
    return CallbackGroup(callbacks), progress  # Lightning dispatches each hook once for all


def trainer_kwargs_of(
    lab: Lab, plan: _launch.Plan, o: FitOptions, *, logdir: Path, n_batches: int | None
) -> dict[str, Any]:
    """``lightning.Trainer``'s arguments for this fit (callbacks added by the caller)."""
    from lightning.pytorch.loggers import TensorBoardLogger

    from labkit.train._tensorboard import TB_DIR
    from labkit.train.checkpoint import AtomicCheckpointIO

    kw: dict[str, Any] = {
        "max_epochs": o.max_epochs,
        "max_steps": o.max_steps,
        "accelerator": o.accelerator,
        "devices": o.devices,
        "num_nodes": o.num_nodes,
        "strategy": _launch.ddp_strategy(plan, o.strategy, o.ddp_timeout),
        "precision": _PRECISION[lab.recipe.precision],
        "logger": TensorBoardLogger(save_dir=str(logdir), name=TB_DIR, default_hp_metric=False),
        "plugins": [AtomicCheckpointIO()],
        "enable_model_summary": False,
        "enable_checkpointing": False,
        "enable_progress_bar": not _launch.in_notebook(),
        "num_sanity_val_steps": 0,
        "log_every_n_steps": max(1, min(o.log_every, n_batches or o.log_every)),
        "default_root_dir": str(logdir),
    }
    if o.limit_train_batches is not None:
        kw["limit_train_batches"] = o.limit_train_batches
    if o.limit_val_batches is not None:
        kw["limit_val_batches"] = o.limit_val_batches
    return kw
