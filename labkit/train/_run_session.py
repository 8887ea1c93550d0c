"""RunSession: a run's record on disk and on screen, for training labkit does not drive.

A watched plain loop, a user's own ``lightning.Trainer`` and a Hugging Face ``Trainer``
all train in this process (on rank 0 of several), so the events a
:class:`~labkit.train.recording.StepRecorder` emits are folded at once into the
:class:`~labkit.train.run.Run`, appended to ``events.jsonl`` and pushed to the live
dashboard, with no tail thread. The session holds the logdir's lock
(:class:`~labkit.train._lock.LogdirLock`) from :meth:`open` to :meth:`close`, which writes
``run.json`` and always ends the run ``finished``, ``stopped`` or ``failed``.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path
from typing import Any

from labkit.train._events import EVENTS_FILE, STOP_FILE, EventLog
from labkit.train.run import Run

SOURCES = ("lab", "loop", "lightning", "transformers")
DASH_THROTTLE_S = 1.0
"""Seconds between two dashboard updates of a watched run: each update recomputes the
curves and sends them (about a millisecond on a 2-core machine, taken from the training
thread's time), so four a second cost the loop several times what one does."""


def global_rank() -> int:
    """This process's rank: torch.distributed's once initialised, else the launcher's."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return int(dist.get_rank())
    for name in ("RANK", "SLURM_PROCID"):
        value = os.environ.get(name, "").strip()
        if value.isdigit():
            return int(value)
    return 0


def versions(*packages: str) -> dict[str, str]:
    """labkit's, torch's and ``packages``' versions, for the run record."""
    import importlib.metadata

    import torch

    import labkit

    out = {"labkit": labkit.__version__, "torch": torch.__version__}
    for name in packages:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            out[name] = importlib.metadata.version(name)
    return out


class RunSession:
    """The record of one run trained outside ``Lab.fit`` (see the module docstring).

    Args:
        logdir: The run's folder (created).
        source: ``"loop"``, ``"lightning"`` or ``"transformers"``.
        config: Settings recorded in ``run.json`` (``source`` and versions are added).
        dashboard: Show the live dashboard (None: in a notebook only).
        notes: Sentences for the Run's notes.
        compare_with: Overlay earlier runs of the logdir's family on the dashboard (True, or
            run names; default: offered behind the dashboard's toggle only).
        rank: This process's global rank (default: torch.distributed's or the launcher's).
    """

    def __init__(
        self,
        logdir: str | os.PathLike[str],
        *,
        source: str,
        config: dict[str, Any],
        dashboard: bool | None = None,
        notes: list[str] | None = None,
        rank: int | None = None,
        compare_with: bool | list[str] | None = None,
    ) -> None:
        if source not in SOURCES:
            raise ValueError(f"source must be one of {SOURCES}, got {source!r}")
        self.logdir = Path(logdir)
        self.rank = global_rank() if rank is None else rank
        self.stop_event = threading.Event()
        self.run = Run(
            logdir=str(self.logdir), config={**config, "source": source}, notes=list(notes or [])
        )
        self.dashboard_wanted = dashboard
        self.compare_with = compare_with
        self.dash: Any = None
        self._lock: Any = None
        self._log: EventLog | None = None
        self._writer: Any = None
        self._scalars: Any = None
        self.closed = False

    @property
    def recording(self) -> bool:
        """Whether this process writes the record (rank 0)."""
        return self.rank == 0

    @property
    def stop_file(self) -> Path:
        return self.logdir / STOP_FILE

    def open(self) -> RunSession:
        """Check the logdir, take its lock, clear a stale Stop, show the dashboard.

        Raises:
            LogdirBusyError: another run holds the logdir (named by pid and host).
            OutputPathError: the logdir cannot be created or written.
        """
        from labkit.train._lock import LogdirLock
        from labkit.train._preflight import check_logdir

        if self.recording:
            check_logdir(self.logdir, None)  # created, writable: before any work
        self._lock = LogdirLock.acquire(self.logdir)
        try:
            self.run.notes[:0] = self._lock.notes
            if self.recording:
                self.stop_file.unlink(missing_ok=True)
                self._log = EventLog(self.logdir / EVENTS_FILE)
                self.dash = self._dashboard()
        except BaseException:
            self._lock.release()
            raise
        return self

    def _dashboard(self) -> Any:
        from labkit.train import _launch

        want = self.dashboard_wanted
        if want is None:
            want = _launch.in_notebook()
        if not want:
            return None
        from labkit import _display
        from labkit.train.run_table import earlier_runs

        # labkit.views' Dashboard, found through the display registry; its Stop posts to the
        # server extension, which creates the stop file the loop polls
        view = _display.view("train.dashboard")
        dash = view(
            on_stop=self.stop_event.set,
            stop_file=self.stop_file,
            earlier=earlier_runs(self.logdir),
            compare_with=self.compare_with,
            throttle=DASH_THROTTLE_S,
        )
        if _launch.in_notebook():
            from IPython.display import display

            display(dash)
        return dash

    # ------------------------------------------------------------------ events
    def emit(self, event: dict[str, Any]) -> None:
        """Fold an event into the Run, ``events.jsonl`` and the dashboard (rank 0)."""
        if not self.recording or self.closed:
            return
        self.run.add_event(event)
        if self._log is not None:
            self._log(event)
        if self.dash is not None:
            self.dash.push(event)

    def scalars(self) -> Any:
        """The run's TensorBoard scalar file (``<logdir>/tensorboard``), made on first use."""
        if self._scalars is None and self.recording:
            from labkit.train._tensorboard import TB_DIR, ScalarFile

            self._scalars = ScalarFile(self.logdir / TB_DIR)
        return self._scalars

    def writer(self) -> Any:
        """The run's TensorBoard ``SummaryWriter`` (``<logdir>/tensorboard``), made on first use."""
        if self._writer is None and self.recording:
            from torch.utils.tensorboard import SummaryWriter

            from labkit.train._tensorboard import TB_DIR

            self._writer = SummaryWriter(log_dir=str(self.logdir / TB_DIR))
        return self._writer

    # ------------------------------------------------------------------ the end
    def close(self, status: str, error: str | None = None) -> Run:
        """End the run: its status, ``run.json`` written, the lock and files let go.

        Idempotent. The status is the one given unless an ``end`` event set one already.
        """
        if self.closed:
            return self.run
        self.closed = True
        run = self.run
        try:
            if run.status in ("created", "running"):
                run.status, run.error = status, error
            if run.ended is None:
                run.ended = time.time()
            if self.recording:
                with contextlib.suppress(OSError):
                    run.save()
        finally:
            for w in (self._writer, self._scalars):
                if w is not None:
                    with contextlib.suppress(Exception):
                        w.close()
            if self._log is not None:
                self._log.close()
            if self._lock is not None:
                self._lock.release()
            if self.recording:
                self.stop_file.unlink(missing_ok=True)
            run._live = None
            run._finish(None)
            if self.dash is not None:
                self.dash.finish(run)
        return run

    def __repr__(self) -> str:
        return f"RunSession(logdir={str(self.logdir)!r}, source={self.run.source!r})"
