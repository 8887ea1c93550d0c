"""``labkit.watch.lightning()``: labkit's run record for the user's own ``lightning.Trainer``.

One callback, registered with Lightning as one (a
:class:`~labkit.train._callback_group.CallbackGroup`), whose members are the callbacks
``Lab.fit`` uses: :class:`~labkit.train._callback.LabCallback` (the events through the same
:class:`~labkit.train.recording.StepRecorder`, Stop on every rank), ``RankStats`` (per-rank
step breakdown under DDP) and ``NonFiniteGuard`` (the first NaN/Inf, located by a replay
of the user's ``training_step``). The record goes to a
:class:`~labkit.train._run_session.RunSession` opened when the fit starts: ``run.json``,
``events.jsonl``, ``tensorboard/`` in ``logdir``, the live dashboard in a notebook.

Example:
    >>> cb = labkit.watch.lightning(logdir="runs/mine")       # doctest: +SKIP
    >>> lightning.Trainer(max_epochs=2, callbacks=[cb]).fit(module, loader)  # doctest: +SKIP
    >>> cb.run.status, cb.run.losses[-1]                       # doctest: +SKIP
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import lightning.pytorch as pl

from labkit.train._callback import LabCallback
from labkit.train._callback_group import CallbackGroup
from labkit.train._ranks import RankStats
from labkit.train.guards import NonFiniteGuard
from labkit.train.run import Run
from labkit.train.watching import WatchOptions

__all__ = ["WatchCallback"]


class _Session(pl.Callback):
    """Opens the run's session when the fit is set up and closes it when the fit ends."""

    def __init__(self, owner: WatchCallback) -> None:
        self.owner = owner

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if stage == "fit":
            self.owner._open(trainer, pl_module)

    def on_exception(self, trainer: pl.Trainer, pl_module: Any, exception: BaseException) -> None:
        self.owner._close("failed", f"{type(exception).__name__}: {exception}")

    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if stage == "fit":
            self.owner._close("finished", None)


class WatchCallback(CallbackGroup):
    """Records the user's own ``lightning.Trainer`` fit as a labkit run.

    Args:
        logdir: The run's folder (default ``labkit_runs/<LightningModule class>``).
        dashboard: Show the live dashboard (None: in a notebook).
        **options: :class:`~labkit.train.watching.WatchOptions`.

    Attributes:
        run: The :class:`~labkit.train.run.Run` of the last fit (None before one).
    """

    def __init__(
        self,
        logdir: str | os.PathLike[str] | None = None,
        dashboard: bool | None = None,
        **options: Any,
    ) -> None:
        if dashboard is not None and not isinstance(dashboard, bool):
            raise TypeError(
                f"labkit.watch.lightning(dashboard={dashboard!r}): True, False or "
                "None (in a notebook)"
            )
        self.options = WatchOptions.build(options, "labkit.watch.lightning")
        self.logdir = Path(logdir) if logdir is not None else None
        self.dashboard = dashboard
        self.run: Run | None = None
        self.session: Any = None
        o = self.options
        self.events = LabCallback(
            self._emit,
            flush_interval=o.flush_interval,
            trace_every=o.trace_every,
            histogram_every=o.histogram_every,
            log_every=o.log_every,
        )
        members: list[pl.Callback] = [self.events]
        if o.rank_stats:
            members.append(RankStats(self._emit))
        if o.guard:
            members.append(NonFiniteGuard())
        # last: the session opens after the members' setup and closes after their end events
        super().__init__([*members, _Session(self)])

    def _emit(self, event: dict[str, Any]) -> None:
        if self.session is not None:
            self.session.emit(event)

    def _open(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        from labkit.train._run_session import RunSession, versions
        from labkit.train.watching import default_logdir

        logdir = self.logdir if self.logdir is not None else default_logdir(pl_module)
        o = self.options
        config: dict[str, Any] = {
            "model": type(pl_module).__name__,
            "params": sum(p.numel() for p in pl_module.parameters()),
            "max_epochs": trainer.max_epochs,
            "max_steps": trainer.max_steps,
            "devices": trainer.num_devices,
            "world_size": trainer.world_size,
            "num_nodes": trainer.num_nodes,
            "precision": str(trainer.precision),
            "strategy": type(trainer.strategy).__name__,
            "optimizer": None,
            "lr": None,
            "guard": o.guard,
            "trace_every": o.trace_every,
            "histogram_every": o.histogram_every,
            "versions": versions("lightning"),
            **(o.config or {}),
        }
        # several processes: rank 0 may be a process forked from the notebook's kernel,
        # which cannot show a widget; the record is on disk (labkit.runs reads it)
        notes = []
        dashboard = self.dashboard
        if trainer.world_size > 1 and dashboard is not False:
            dashboard = False
            notes.append(
                "no live dashboard with several processes; labkit.runs(logdir) reads the record"
            )
        self.session = RunSession(
            logdir,
            source="lightning",
            config=config,
            notes=notes,
            dashboard=dashboard,
            rank=trainer.global_rank,
            compare_with=o.compare_with,
        )
        self.session.open()
        self.run = self.session.run
        ev = self.events
        ev.poll.event = self.session.stop_event
        ev.poll.file = self.session.stop_file
        ev.logdir = ev.recorder.logdir = Path(logdir)
        ev.stopped = False
        if trainer.world_size > 1:
            ev.stop_every = 10  # a collective: every 10 steps, as Lab.fit does
        if trainer.is_global_zero:  # labkit's own TensorBoard folder, steps every log_every
            ev._writer = ev.recorder._writer = self.session.writer
            ev.recorder._scalar_file = self.session.scalars
        for member in self.callbacks:
            if isinstance(member, RankStats):
                member.logdir = Path(logdir)
            if isinstance(member, NonFiniteGuard):
                member.check_grads = str(trainer.precision) != "16-mixed"

    def _close(self, status: str, error: str | None) -> None:
        if self.session is not None and not self.session.closed:
            self.session.close(status, error)

    def __repr__(self) -> str:
        where = str(self.logdir) if self.logdir else None
        return f"labkit.watch.lightning(logdir={where!r}, {self.options!r})"
