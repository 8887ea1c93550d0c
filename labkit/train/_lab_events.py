"""A Lab's run record, events and dashboard: what a fit records and shows while it runs.

:class:`LabEvents` is one of the parts :class:`~labkit.train.Lab` delegates to. It makes a
fit's :class:`~labkit.train.Run`, follows ``events.jsonl`` (rank 0 writes it, in whatever
process trains) into that Run, the live dashboard and the linked views, asks a running
fit to stop, and ends the record. Its state is the Lab's: ``lab.runs``, ``lab.traces``,
``lab.dashboard``, the views linked and the Stop event.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from labkit.train._events import EVENTS_FILE, STOP_FILE, EventTail
from labkit.train.run import Run

if TYPE_CHECKING:
    from labkit.train import _launch
    from labkit.train._lock import LogdirLock
    from labkit.train.fit_options import FitOptions
    from labkit.train.lab import Lab


class LiveView(Protocol):
    """What a fit's live view does (``labkit.views``' Dashboard): takes each event, then
    the ended run."""

    def push(self, event: dict[str, Any]) -> None: ...
    def finish(self, run: Run) -> None: ...


class LabEvents:
    """The record-and-show side of a :class:`~labkit.train.Lab` (see the module docstring).

    Args:
        lab: The Lab whose runs, traces and dashboard this fills.
    """

    def __init__(self, lab: Lab) -> None:
        self.lab = lab

    def refuse_while_running(self) -> None:
        """Refuse a second fit while this Lab's last one still runs (shared model, logdir)."""
        running = self.lab.last_run
        if running is not None and not running.done:
            raise RuntimeError(
                f"this Lab is still fitting ({running!r}); a second fit would share its model "
                "and logdir: wait for it (run.wait()) or stop it (lab.stop()) first"
            )

    def start_run(
        self,
        o: FitOptions,
        plan: _launch.Plan,
        logdir: Path,
        ckpt: str | None,
        resume: bool,
        notes: list[str],
    ) -> tuple[Run, LiveView | None, EventTail]:
        """The Run record, the dashboard and the events tail of a fit about to start."""
        from labkit.optimize.recipe_record import record_recipe
        from labkit.train.checkpoint import CHECKPOINTS, LAST

        lab = self.lab
        config = {
            "max_epochs": o.max_epochs,
            "max_steps": o.max_steps,
            "devices": o.devices,
            "accelerator": o.accelerator,
            "strategy": o.strategy if isinstance(o.strategy, str) else type(o.strategy).__name__,
            "num_nodes": o.num_nodes,
            "seed": o.seed,
            "resume": resume,
            "ckpt_path": ckpt,
            "launch": plan.mode,
            "processes": plan.processes,
            "recipe": lab.recipe.to_dict(),
            "lr": lab.lr,
            "source": "lab",
            "batch_size": lab.batch_size,
            "optimizer": lab._binding.optimizer_name(),
            "versions": versions(),
        }
        run = Run(logdir=str(logdir), config=config, notes=[plan.reason, *lab._data_notes, *notes])
        record_recipe(lab.recipe, source="Lab.fit")  # read by `labkit promote`; no-op outside
        if resume and ckpt is None:
            how = "resume=True" if o.resume else "ckpt_path='last'"
            run.notes.append(
                f"{how} but {logdir / CHECKPOINTS / LAST} does not exist yet: starting fresh"
            )
        lab.runs.append(run)
        lab._stop.clear()
        (logdir / STOP_FILE).unlink(missing_ok=True)
        try:
            dash = self.dashboard(o.dashboard, run, o.compare_with)
            handler = self.handler(run, dash)
            events = logdir / EVENTS_FILE
            offset = events.stat().st_size if events.exists() else 0
        except BaseException as exc:  # the run never started: it does not block the next fit
            run.status, run.error = "failed", f"{type(exc).__name__}: {exc}"
            run._finish(exc)
            raise
        return run, dash, EventTail(events, handler, offset=offset)

    def finish(
        self,
        run: Run,
        dash: LiveView | None,
        tail: EventTail,
        lock: LogdirLock,
        exc: BaseException | None,
    ) -> None:
        """End a fit's record: the last events read, its status, ``run.json`` saved (before
        the lock goes, so a reader never sees the lock gone without the record), the lock
        released, the dashboard told."""
        tail.stop()
        if tail.error is not None:
            run.notes.append(f"the events file stopped being read: {tail.error}")
        if exc is not None:
            run.status, run.error = "failed", f"{type(exc).__name__}: {exc}"
        elif run.status in ("created", "running"):
            run.status = "finished"
        with contextlib.suppress(OSError):
            run.save()
        lock.release()
        run._finish(exc)
        if dash is not None:
            dash.finish(run)

    def dashboard(
        self, want: bool | None, run: Run, compare_with: bool | Sequence[str] | None = None
    ) -> LiveView | None:
        """The live dashboard (``labkit.views``' Dashboard, found by kind), shown in a
        notebook; None when not wanted (default: in a notebook only). Earlier runs beside
        this one are offered for overlay, drawn when ``compare_with`` (or its toggle) asks."""
        from labkit.train import _launch

        if want is None:
            want = _launch.in_notebook()
        if not want:
            return None
        from labkit import _display
        from labkit.train.run_table import earlier_runs

        # Stop posts to the server extension, which creates the stop file every rank polls;
        # the latest runs beside this one are offered, overlaid only when asked
        dashboard = _display.view("train.dashboard")
        dash = dashboard(
            on_stop=self.lab.stop,
            stop_file=Path(run.logdir) / STOP_FILE,
            earlier=earlier_runs(run.logdir),
            compare_with=compare_with,
        )
        self.lab.dashboard = dash
        if _launch.in_notebook():
            from IPython.display import display

            display(dash)
        return dash

    def handler(self, run: Run, dash: LiveView | None) -> Callable[[dict[str, Any]], None]:
        """What each event read from ``events.jsonl`` does: the Run, the dashboard, and a
        sampled trace into ``lab.traces`` and every linked view."""
        lab = self.lab
        views = list(lab._views)

        def handle(event: dict[str, Any]) -> None:
            run.add_event(event)
            if dash is not None:
                dash.push(event)
            if event.get("type") == "trace" and views:
                from labkit.trace import Trace

                trace = Trace.load(event["path"])
                lab.traces.append(trace)
                for v in views:
                    v.update(trace)

        return handle

    def stop(self) -> None:
        """Ask a running fit to stop after the current step, on every rank (the in-process
        event and the stop file every rank polls)."""
        lab = self.lab
        lab._stop.set()
        run = lab.last_run
        if run is not None and run.logdir:
            with contextlib.suppress(OSError):
                (Path(run.logdir) / STOP_FILE).touch()


def versions() -> dict[str, str]:
    """labkit, torch and lightning versions, for the run record."""
    import importlib.metadata

    import torch

    import labkit

    out = {"labkit": labkit.__version__, "torch": torch.__version__}
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        out["lightning"] = importlib.metadata.version("lightning")
    return out
