"""Dashboard: the live view of a fit: loss and metric curves, throughput, step-time split,
memory, progress with ETA and a Stop button.

It is a thin adapter over training events (plain dicts, see ``labkit.train._events``):
:meth:`Dashboard.push` folds an event into plain state at once (cheap, any thread) and a
:class:`~labkit.views._throttle.Throttle` sends the traits at most a few times per
second, so a fast training loop never waits on the browser and Jupyter's output limits
are never reached. Curves are bucket-averaged down to ``max_points`` points.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anywidget
import traitlets as t
from ipywidgets import Widget

from labkit._assets import bundle_path
from labkit.views._keep import KeepsPicture
from labkit.views._throttle import Throttle

WINDOW = 20  # steps averaged for the throughput and step-time figures


def downsample(
    xs: list[float], ys: list[float], max_points: int
) -> tuple[list[float], list[float]]:
    """Bucket means of ``(xs, ys)`` down to at most ``max_points`` points; the last point kept."""
    n = len(xs)
    if n <= max_points:
        return list(xs), list(ys)
    size = n / max_points
    ox, oy = [], []
    for b in range(max_points):
        lo, hi = int(b * size), max(int((b + 1) * size), int(b * size) + 1)
        ox.append(xs[hi - 1])
        seg = [y for y in ys[lo:hi] if y == y]  # drop NaN from the mean
        oy.append(sum(seg) / len(seg) if seg else float("nan"))
    return ox, oy


def last_of_buckets(values: list[Any], max_points: int) -> list[Any]:
    """The last value of each of :func:`downsample`'s buckets (the point its x comes from)."""
    n = len(values)
    if n <= max_points:
        return list(values)
    size = n / max_points
    return [values[max(int((b + 1) * size), int(b * size) + 1) - 1] for b in range(max_points)]


def _register(stop_file: Path) -> str:
    """The token under which the server extension finds ``stop_file`` ("" when it cannot)."""
    try:
        from labkit._stops import register

        return register(stop_file)
    except (ImportError, OSError):  # no jupyter_core, or a read-only runtime dir
        return ""


def _reopen(widget: Widget) -> None:
    """Send ``widget``'s ``comm_open`` again under its model id, with its current state."""
    import ipywidgets

    if widget.comm is None:
        return
    # what Widget.open sends: the state without its binary buffers, and the buffers
    state, paths, buffers = ipywidgets.widgets.widget._remove_buffers(widget.get_state())
    meta = {"version": ipywidgets.__protocol_version__}
    widget.comm.open(data={"state": state, "buffer_paths": paths}, metadata=meta, buffers=buffers)


def _overlay(
    earlier: dict[str, Any], compare_with: bool | Sequence[str] | None
) -> tuple[dict[str, Any], bool]:
    """The earlier runs offered and whether they are overlaid, from ``compare_with``."""
    if compare_with is None or isinstance(compare_with, bool):
        return earlier, bool(compare_with)
    names = [compare_with] if isinstance(compare_with, str) else list(compare_with)
    if not all(isinstance(n, str) for n in names):
        raise TypeError(f"compare_with={compare_with!r}: True, or names of earlier runs")
    missing = [n for n in names if n not in earlier]
    if missing:
        have = ", ".join(earlier) or "none (no finished or stopped run beside this logdir)"
        raise ValueError(
            f"compare_with names {missing}, not among the earlier runs of this "
            f"logdir family: {have}"
        )
    return {n: earlier[n] for n in names}, True


class Dashboard(KeepsPicture, anywidget.AnyWidget):
    """Live training dashboard with a Stop button.

    Args:
        on_stop: Called (once) when the Stop button's message reaches the kernel; ``Lab``
            passes ``lab.stop``. A kernel busy with the fit's cell reads no widget messages,
            so the button also posts to labkit's server extension (``stop_file``).
        stop_file: The fit's stop file (polled by every rank). Registered under the
            ``stop_token`` the button posts to ``/labkit/api/stop``, which creates the file:
            Stop then works while the cell runs (foreground, background and DDP fits).
        throttle: Minimum seconds between two updates sent to the browser.
        max_points: Points per curve sent to the browser.
        earlier: Earlier runs of the same logdir family
            (``labkit.train.run_table.earlier_runs``): offered by the dashboard's "earlier
            runs" toggle, drawn dimmed under this fit's curves only when asked.
        compare_with: Overlay ``earlier`` from the start: True for all of them, or the run
            names to overlay. None or False (default): no overlay until the toggle is set.

    A page reloaded while the fit's cell runs gets the live view back: its labkit
    extension posts the dashboard's token to the server extension, and a thread of this
    dashboard, which polls for that request, sends the widget's state again
    (:meth:`reattach`), as a busy kernel answers no widget message itself.

    Returns:
        A widget; ``Lab.fit`` shows one in a notebook and pushes its events into it.

    Example:
        >>> dash = Dashboard()
        >>> dash.push({"type": "start", "total_steps": 10, "max_epochs": 1, "world_size": 1})
        >>> dash.push({"type": "steps", "steps": [{"step": 1, "epoch": 0, "loss": 0.7,
        ...            "compute_time": 0.01, "data_time": 0.001, "samples": 32}]})
        >>> dash.flush(); dash.stats["step"]
        1
    """

    series = t.Dict().tag(sync=True)
    #: earlier runs from the same logdir root, drawn dimmed under this fit's curves when
    #: ``compare`` is set: run name -> curve name (``train_loss``, ``val_*``) -> ``{"x", "t", "y"}``
    earlier = t.Dict().tag(sync=True)
    #: whether ``earlier`` is overlaid (``compare_with=``, or the dashboard's toggle)
    compare = t.Bool(False).tag(sync=True)
    #: curve name -> wall-clock seconds since the fit started, per point of ``series``
    #: (None where unknown): the charts' wall-time axis
    series_t = t.Dict().tag(sync=True)
    stats = t.Dict().tag(sync=True)
    status = t.Unicode("idle").tag(sync=True)
    error = t.Unicode("").tag(sync=True)
    notes = t.List(t.Unicode()).tag(sync=True)
    grad_norms = t.Dict().tag(sync=True)
    stop_requested = t.Bool(False).tag(sync=True)
    stop_token = t.Unicode("").tag(sync=True)
    updates = t.Int(0).tag(sync=True)

    @property
    def _esm(self) -> str:  # read by AnyWidget.__init__
        return bundle_path("dashboard").read_text()

    def __init__(
        self,
        *,
        on_stop: Callable[[], None] | None = None,
        stop_file: str | os.PathLike[str] | None = None,
        throttle: float = 0.25,
        max_points: int = 400,
        earlier: dict[str, Any] | None = None,
        compare_with: bool | Sequence[str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.earlier, self.compare = _overlay(dict(earlier or {}), compare_with)
        self.on_stop = on_stop
        self.stop_file = Path(stop_file) if stop_file is not None else None
        if self.stop_file is not None:
            self.stop_token = _register(self.stop_file)
        self.max_points = max_points
        self._throttle = Throttle(self._publish, interval=throttle)
        self._steps: list[float] = []
        self._times: list[float | None] = []  # wall clock of each step (its "t")
        self._epoch_t: dict[int, float] = {}
        self._losses: list[float] = []
        self._metrics: dict[str, list[float]] = {}
        self._epochs: list[dict[str, Any]] = []
        self._recent: list[dict[str, Any]] = []
        self._start: dict[str, Any] = {}
        self._epoch = -1  # epoch of the last step seen (0-based)
        self._t0 = time.time()
        self._t_first_step: float | None = None
        self._step0 = 0
        self._memory = 0
        self._status = "idle"
        self._error = ""
        self._notes: list[str] = []
        self._norms: dict[str, float] = {}
        self._ranks: dict[str, Any] = {}  # the last per-rank gathering (several processes)
        self._ended = threading.Event()
        self.observe(self._stop_clicked, names="stop_requested")
        if self.stop_token:
            threading.Thread(
                target=self._watch_reattach, name="labkit-dashboard-reattach", daemon=True
            ).start()

    # ------------------------------------------------------------------ events in
    def push(self, event: dict[str, Any]) -> None:
        """Fold one training event in; the browser hears of it within ``throttle`` seconds."""
        kind = event.get("type")
        if kind == "start":
            self._start = dict(event)
            self._t0 = event.get("t", time.time())
            self._step0 = event.get("start_step") or 0
            self._status = "running"
        elif kind == "steps":
            if self._t_first_step is None:
                self._t_first_step = event.get("t", time.time())
            for s in event["steps"]:
                self._epoch = max(self._epoch, int(s.get("epoch", self._epoch)))
                self._steps.append(s["step"])
                self._times.append(s.get("t"))
                self._losses.append(s["loss"])
                for k, v in s.items():
                    if k.startswith("train_") and isinstance(v, float):
                        self._metrics.setdefault(k, []).append(v)
            self._recent = (self._recent + event["steps"])[-WINDOW:]
            self._memory = event.get("memory", self._memory)
        elif kind == "epoch":
            self._epochs = [e for e in self._epochs if e["epoch"] != event["epoch"]]
            self._epochs.append({k: v for k, v in event.items() if k not in ("type", "t")})
            if isinstance(event.get("t"), int | float):
                self._epoch_t[event["epoch"]] = float(event["t"])
        elif kind == "grads":
            self._norms = dict(event.get("norms", {}))
        elif kind == "ranks":  # per-rank step breakdown at an epoch end (labkit.train._ranks)
            keys = ("rank", "step_time", "data_time", "compute_time", "comm_wait")
            self._ranks = {
                "ranks": [{k: r[k] for k in keys} for r in event["ranks"]],
                "stragglers": [s["text"] for s in event.get("stragglers", [])],
            }
        elif kind == "end":
            self._status = event.get("status", "finished")
            self._error = event.get("error") or ""
        self._throttle.submit(None)

    def finish(self, run: Any) -> None:
        """Show the final state of ``run`` (status, error, notes) at once."""
        self._status = run.status
        self._error = run.error or ""
        self._notes = list(run.notes) + [s["text"] for s in getattr(run, "stragglers", [])]
        self._unregister()
        self._throttle.submit(None)
        self._throttle.flush()
        self.refresh_output()  # the saved notebook keeps the final state, not the first

    def _picture(self) -> dict[str, str]:
        from labkit.views._final_state import dashboard_picture

        self._throttle.flush()
        return dashboard_picture(self.series, self.stats, self.status, self.error, self.notes)

    def _labkit_meta(self) -> dict[str, Any]:
        # while the fit runs, a reloaded page posts this token to get the live view back
        live = self.stop_token and not self._ended.is_set()
        return {"reattach": self.stop_token} if live else {}

    def reattach(self) -> bool:
        """Send this widget to the front end again: a ``comm_open`` under the same model id
        with the current state, from any thread. A page reloaded while the kernel is busy
        makes the widget's model from it (ipywidgets' own restore waits for the kernel).

        Returns:
            Whether it was sent (False when the widget has no comm: closed, or no kernel).
        """
        if self.comm is None:
            return False
        self._throttle.flush()
        # the widgets its state refers to first ("IPY_MODEL_<id>": its Layout), then itself
        for child in self.keys:
            value = getattr(self, child, None)
            if isinstance(value, Widget) and value is not self:
                _reopen(value)
        _reopen(self)
        return True

    def _watch_reattach(self) -> None:
        from labkit import _reattach

        while not self._ended.wait(_reattach.POLL_S):
            if _reattach.take(self.stop_token):
                with contextlib.suppress(Exception):  # a failed send must not end the polling
                    self.reattach()

    def to_png(self) -> bytes:
        """The curves as shown now, as a PNG (matplotlib)."""
        from labkit.views._final_state import curves_png

        self._throttle.flush()
        return curves_png(self.series, f"labkit fit: {self.status}")

    def to_html(self) -> str:
        """Status, figures (monospace) and curves as static HTML."""
        return self._picture()["text/html"]

    def _unregister(self) -> None:
        self._ended.set()
        if self.stop_token:
            from labkit._stops import unregister

            with contextlib.suppress(OSError, ImportError):
                unregister(self.stop_token)

    def flush(self) -> None:
        """Send a pending update now."""
        self._throttle.flush()

    # ------------------------------------------------------------------ state out
    def _stats(self) -> dict[str, Any]:
        recent = self._recent
        world = int(self._start.get("world_size") or 1)
        compute = sum(s.get("compute_time", 0.0) for s in recent)
        data = sum(s.get("data_time", 0.0) for s in recent)
        samples = sum(s.get("samples", 0) for s in recent)
        n = max(len(recent), 1)
        step = self._steps[-1] if self._steps else self._step0
        total = self._start.get("total_steps")
        now = time.time()
        eta = None
        if total and self._steps and self._t_first_step is not None:
            done = step - self._step0
            rate = (now - self._t0) / max(done, 1)
            eta = max(total - step, 0) * rate if self._status == "running" else 0.0
        return {
            "step": step,
            "total_steps": total,
            # the epoch the last step ran in (1-based), so a stop in epoch 1 reads "1/3"
            "epoch": self._epoch + 1 if self._epoch >= 0 else len(self._epochs),
            "max_epochs": self._start.get("max_epochs"),
            "world_size": world,
            "samples_per_s": world * samples / (compute + data) if compute + data > 0 else None,
            "step_time": (compute + data) / n if recent else None,
            "compute_time": compute / n if recent else None,
            "data_time": data / n if recent else None,
            "memory": self._memory,
            "elapsed_s": now - self._t0,
            "eta_s": eta,
            "loss": self._losses[-1] if self._losses else None,
            "ranks": self._ranks.get("ranks", []),
            "stragglers": self._ranks.get("stragglers", []),
        }

    def _series(self) -> dict[str, Any]:
        xs, ys = downsample(self._steps, self._losses, self.max_points)
        curves: dict[str, Any] = {"train_loss": {"x": xs, "y": ys}}
        for k, v in self._metrics.items():
            mx, my = downsample(self._steps[-len(v) :], v, self.max_points)
            curves[k] = {"x": mx, "y": my}
        for key in sorted({k for e in self._epochs for k in e} - {"epoch", "step"}):
            pts = [(e["step"], e[key]) for e in self._epochs if isinstance(e.get(key), float)]
            if pts and key.startswith("val_"):
                curves[key] = {"x": [p[0] for p in pts], "y": [p[1] for p in pts]}
        return curves

    def _series_t(self, series: dict[str, Any]) -> dict[str, list[float | None]]:
        t0 = self._t0

        def rel(values: list[Any]) -> list[float | None]:
            return [round(v - t0, 4) if isinstance(v, int | float) else None for v in values]

        out = {"train_loss": rel(last_of_buckets(self._times, self.max_points))}
        for k, v in self._metrics.items():
            out[k] = rel(last_of_buckets(self._times[-len(v) :], self.max_points))
        for key in series:
            if key.startswith("val_"):
                pts = [e for e in self._epochs if isinstance(e.get(key), float)]
                out[key] = rel([self._epoch_t.get(e["epoch"]) for e in pts])
        return out

    def _publish(self, _: Any) -> None:
        with self.hold_sync():
            self.series = self._series()
            self.series_t = self._series_t(self.series)
            self.stats = self._stats()
            self.status = self._status
            self.error = self._error
            self.notes = list(self._notes)
            self.grad_norms = dict(sorted(self._norms.items(), key=lambda kv: -kv[1])[:10])
            self.updates = self.updates + 1

    def _stop_clicked(self, change: dict[str, Any]) -> None:
        # a foreground fit reads the click only after its cell ended: nothing left to stop
        if self._status in ("finished", "stopped", "failed"):
            return
        if change["new"] and self.on_stop is not None:
            self._status = "stopping"
            self.on_stop()
            self._throttle.submit(None)

    @property
    def sends(self) -> int:
        """Updates sent to the browser so far."""
        return self._throttle.sends

    def __repr__(self) -> str:
        s = self._stats()
        loss = f"{s['loss']:.4g}" if s["loss"] is not None else "-"
        return (
            f"Dashboard(status={self._status!r}, step={s['step']}/{s['total_steps']}, "
            f"loss={loss}, throttle={self._throttle.interval}, updates={self._throttle.sends})"
        )
