"""StepRecorder: the one way a training run's steps become events, whoever runs the loop.

``Lab.fit``'s Lightning callback, :func:`labkit.watch`'s plain loop, the callback for a
user's own ``lightning.Trainer`` and the one for a Hugging Face ``Trainer`` all hand each
optimizer step to a :class:`StepRecorder`. It keeps the step's loss and metrics as they
are (tensors stay on their device: no ``.item()`` per step) and, at most every
``flush_interval`` seconds, reads them all at once (one ``stack(...).tolist()`` per device)
and emits one ``steps`` event. It also answers "was Stop asked?" (an in-process event, or
the stop file the dashboard's server extension creates, looked at no more than every
``FILE_CHECK_S``), samples timing traces (``trace_every``), writes histograms
(``histogram_every``) and TensorBoard scalars (every ``log_every`` steps), and emits the
start, epoch, learning-rate and end events. It imports no training framework.

Example:
    >>> events = []
    >>> rec = StepRecorder(events.append, flush_interval=60)
    >>> rec.start(total_steps=2)
    >>> rec.add_step(1, 0, torch.tensor(0.5), 0.01, 0.0, 8)  # kept, not read yet
    []
    >>> rec.flush()[0]["loss"]
    0.5
    >>> [e["type"] for e in events]
    ['start', 'steps']
"""

from __future__ import annotations

import math
import os
import resource
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

Sink = Callable[[dict[str, Any]], None]
FILE_CHECK_S = 0.1  # a Stop through the stop file is seen within this (a stat per step costs)
_SPECIAL = ("step", "epoch", "loss", "compute_time", "data_time", "samples", "t")


_STATM: dict[int, int] = {}  # pid -> descriptor of /proc/<pid>/statm, kept open


def _resident_bytes() -> int:
    """This process's resident set from ``/proc/self/statm``, through a descriptor kept
    open (one ``pread`` a flush, not an open, a read and a close); OSError where none."""
    pid = os.getpid()
    fd = _STATM.get(pid)
    if fd is None:
        _STATM.clear()  # a forked process: the parent's descriptor reads the parent
        fd = _STATM[pid] = os.open("/proc/self/statm", os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    return int(os.pread(fd, 256, 0).split()[1]) * os.sysconf("SC_PAGE_SIZE")


def memory_bytes() -> int:
    """Memory in use: CUDA allocated bytes on a GPU, else this process's resident set."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return int(torch.cuda.memory_allocated())
    try:
        return _resident_bytes()
    except OSError:
        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def read_values(values: list[Any]) -> list[float]:
    """Floats of ``values`` (scalar tensors and numbers), with one host read per device."""
    out: list[float] = [math.nan] * len(values)
    groups: dict[torch.device, list[int]] = {}
    for i, v in enumerate(values):
        if isinstance(v, torch.Tensor):
            groups.setdefault(v.device, []).append(i)
        else:
            out[i] = float(v)
    for idx in groups.values():
        parts = [values[i] for i in idx]
        try:  # the common case (detached scalars of one shape) as they are: one stack
            with torch.no_grad():
                stacked = torch.stack(parts)
            if stacked.dim() != 1:
                raise RuntimeError("not scalars")
        except RuntimeError:  # () and (1,) shapes mixed
            stacked = torch.stack([t.detach().reshape(()) for t in parts])
        if not stacked.is_floating_point():  # integer or bool figures: read as floats
            stacked = stacked.double()
        read = stacked.cpu().tolist()
        for i, x in zip(idx, read, strict=True):
            out[i] = x
    return out


def learning_rates(optimizer: object) -> float | list[float] | None:
    """The ``lr`` of each param group (one float when they agree), or None."""
    groups = getattr(optimizer, "param_groups", None)
    if not groups:
        return None
    lrs = []
    for g in groups:
        lr = g.get("lr")
        if isinstance(lr, torch.Tensor):  # a tensor lr (torch.optim allows it)
            lr = float(lr)
        if isinstance(lr, int | float):
            lrs.append(float(lr))
    if not lrs:
        return None
    return lrs[0] if all(x == lrs[0] for x in lrs) else lrs


class StopPoll:
    """Whether Stop was asked: ``event`` (same process) or ``file`` (any process).

    The file is looked at no more than every ``FILE_CHECK_S`` seconds.

    Args:
        event: Set by ``run.stop()`` / ``lab.stop()`` / the dashboard (same process).
        file: A path whose existence means Stop (the server extension creates it).
    """

    def __init__(
        self, event: threading.Event | None = None, file: str | os.PathLike[str] | None = None
    ) -> None:
        self.event = event or threading.Event()
        self.file = Path(file) if file else None
        self.checked = -math.inf

    def file_seen(self, now: float) -> bool:
        """Whether the stop file exists, looked at no more than every ``FILE_CHECK_S``."""
        if self.file is None or now - self.checked < FILE_CHECK_S:
            return False
        self.checked = now
        return self.file.exists()

    def __call__(self, now: float) -> bool:
        return self.event.is_set() or self.file_seen(now)

    def __repr__(self) -> str:
        return f"StopPoll(file={str(self.file) if self.file else None!r})"


class StepRecorder:
    """Turns steps into training events (see the module docstring).

    Args:
        sink: Receives each event dict (call it only on the process that records).
        flush_interval: Seconds between two ``steps`` events.
        stop: The Stop poll (default: a new, unset one).
        logdir: Run directory (sampled traces go to ``<logdir>/traces/``).
        trace_every: Sample a labkit timing trace every N steps (0: never).
        histogram_every: Write weight/gradient histograms every N steps (0: never).
        writer: A TensorBoard ``SummaryWriter`` (or a zero-argument function making one on
            first use), for histograms, traces and hparams.
        log_every: Write each step's loss and metrics every N steps (0: never;
            ``Lab.fit``'s LabModule writes its own through Lightning's logger).
        scalars: Where those scalars go, a batch per flush (a
            ``_tensorboard.ScalarFile``, or a function making one on first use); default
            ``writer``'s ``add_scalar``.
    """

    def __init__(
        self,
        sink: Sink,
        *,
        flush_interval: float = 0.2,
        stop: StopPoll | None = None,
        logdir: str | os.PathLike[str] | None = None,
        trace_every: int = 0,
        histogram_every: int = 0,
        writer: Any = None,
        log_every: int = 0,
        scalars: Any = None,
    ) -> None:
        self.sink = sink
        self.flush_interval = flush_interval
        self.stop = stop or StopPoll()
        self.logdir = Path(logdir) if logdir else None
        self.trace_every = trace_every
        self.histogram_every = histogram_every
        self.log_every = log_every
        self._writer = writer
        self._scalar_file = scalars
        self._unlogged: dict[str, Any] | None = None  # the last step, not yet in TensorBoard
        self._pending: list[tuple[Any, ...]] = []
        self._last_flush = time.perf_counter()
        self._recorder: Any = None
        self._tracing = False
        self._lr_sent = False

    # ------------------------------------------------------------------ events
    def emit(self, event: dict[str, Any]) -> None:
        """Send one event, stamped with the wall clock ``t``."""
        event.setdefault("t", time.time())
        self.sink(event)

    def start(self, **info: object) -> None:
        """The ``start`` event (``total_steps``, ``max_epochs``, ``world_size``, ...)."""
        self.emit({"type": "start", **info})

    def add_step(
        self,
        step: int,
        epoch: int,
        loss: torch.Tensor | float,
        compute_time: float,
        data_time: float,
        samples: int,
        metrics: dict[str, Any] | None = None,
    ) -> list[dict[str, Any]]:
        """Keep one optimizer step (``loss`` may be a device tensor); flush when due.

        Returns:
            The steps flushed now (read), or an empty list.
        """
        self._pending.append(
            (step, epoch, loss, compute_time, data_time, samples, time.time(), metrics)
        )
        if time.perf_counter() - self._last_flush >= self.flush_interval:
            return self.flush()
        return []

    def flush(self) -> list[dict[str, Any]]:
        """Read the kept steps (one host read per device) and emit them; returns them."""
        if not self._pending:
            return []
        pending, self._pending = self._pending, []
        values: list[Any] = [p[2] for p in pending]
        keys: list[tuple[int, str]] = []
        for i, p in enumerate(pending):
            for k, v in (p[7] or {}).items():
                keys.append((i, k))
                values.append(v)
        read = read_values(values)
        # t: the wall clock at the step's end (the runs view's wall-time axis)
        steps = [
            {
                "step": s,
                "epoch": e,
                "loss": loss,
                "compute_time": c,
                "data_time": d,
                "samples": n,
                "t": round(w, 4),
            }
            for (s, e, _, c, d, n, w, _m), loss in zip(pending, read, strict=False)
        ]
        for (i, k), v in zip(keys, read[len(pending) :], strict=True):
            steps[i][k] = v
        self.emit({"type": "steps", "steps": steps, "memory": memory_bytes()})
        self._scalars(steps)
        self._last_flush = time.perf_counter()
        return steps

    def _scalars(self, steps: list[dict[str, Any]], *, last: bool = False) -> None:
        """Every ``log_every``-th step's figures (and with ``last``, the last step's)."""
        if not self.log_every:
            return
        rows = []
        for i, s in enumerate(steps):
            if s["step"] % self.log_every == 0 or (last and i == len(steps) - 1):
                rows.append(("train_loss", s["loss"], s["step"], s["t"]))
                for k, v in s.items():
                    if k not in _SPECIAL:
                        tag = k if k.startswith(("train_", "val_")) else f"train_{k}"
                        rows.append((tag, v, s["step"], s["t"]))
        if steps:
            self._unlogged = None if steps[-1]["step"] % self.log_every == 0 else steps[-1]
        if rows:
            self._write_scalars(rows)

    def _write_scalars(self, rows: list[tuple[str, float, int, float]]) -> None:
        """Scalars to :attr:`scalars` (a batch, this thread) or else to :attr:`writer`."""
        target = self.scalars
        if target is not None:
            target.add_scalars(rows)
            return
        writer = self.writer
        if writer is not None:
            for tag, value, step, wall in rows:
                writer.add_scalar(tag, value, step, walltime=wall)

    @property
    def scalars(self) -> Any:
        """Where scalars go in a batch (``_tensorboard.ScalarFile``), made on first use."""
        if callable(self._scalar_file) and not hasattr(self._scalar_file, "add_scalars"):
            self._scalar_file = self._scalar_file()
        return self._scalar_file

    @property
    def writer(self) -> Any:
        """The TensorBoard writer (made on first use when given as a function), or None."""
        if callable(self._writer) and not hasattr(self._writer, "add_scalar"):
            self._writer = self._writer()
        return self._writer

    def epoch(self, epoch: int, step: int, metrics: dict[str, Any]) -> list[dict[str, Any]]:
        """An ``epoch`` event: evaluation figures (``val_loss``, ...) at ``step``.

        Returns:
            The kept steps, flushed first.
        """
        flushed = self.flush()
        figures = dict(zip(metrics, read_values(list(metrics.values())), strict=True))
        self.emit({"type": "epoch", "epoch": epoch, "step": step, **figures})
        if self.log_every:
            now = time.time()
            self._write_scalars([(k, v, step, now) for k, v in figures.items()])
        return flushed

    def learning_rate(self, optimizer: object, step: int) -> None:
        """Once per run: the ``lr`` the optimizer really has (its param groups now)."""
        if self._lr_sent:
            return
        self._lr_sent = True
        lr = learning_rates(optimizer)
        if lr is not None:
            self.emit(
                {"type": "optimizer", "step": step, "lr": lr, "optimizer": type(optimizer).__name__}
            )

    def end(self, status: str, step: int, error: str | None = None) -> None:
        """Flush, stop tracing, emit the ``end`` event (``finished``/``stopped``/``failed``)."""
        try:
            self.flush()
            if self._unlogged is not None:  # the run's last step, in TensorBoard too
                self._scalars([self._unlogged], last=True)
                self._unlogged = None
        except Exception:  # a failing read must not hide how the run ended
            self._pending = []
        self.detach()
        event: dict[str, Any] = {"type": "end", "status": status, "step": step}
        if error is not None:
            event["error"] = error
        self.emit(event)
        writer = self._writer if hasattr(self._writer, "flush") else None
        if writer is not None:
            writer.flush()
        if hasattr(self._scalar_file, "close"):
            self._scalar_file.close()

    # ------------------------------------------------------------------ sampling
    def attach_tracing(self, module: torch.nn.Module) -> None:
        """Attach the timing recorder to ``module`` when ``trace_every`` is set."""
        if self.trace_every and self._recorder is None:
            from labkit.trace import Recorder

            self._recorder = Recorder(module, mode="timing").attach()

    def begin_step(self, step: int) -> None:
        """Start a sampled trace when ``step`` is a multiple of ``trace_every``."""
        if self._recorder is not None and step % self.trace_every == 0:
            self._recorder.start()
            self._tracing = True

    def end_step(self, step: int) -> None:
        """Save the sampled trace of the step that just ended, if one was started."""
        if not self._tracing:
            return
        self._tracing = False
        trace = self._recorder.stop()
        if self.logdir is None:
            return
        path = self.logdir / "traces" / f"step_{step:07d}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        trace.save(path)
        writer = self.writer
        if writer is not None and hasattr(writer, "add_scalar"):
            from labkit.train import _tensorboard

            _tensorboard.log_trace(writer, trace, step)
        self.emit({"type": "trace", "step": step, "path": str(path)})

    def histograms(self, module: torch.nn.Module, step: int) -> None:
        """Weight and gradient histograms every ``histogram_every`` steps (before the update)."""
        if not self.histogram_every or step % self.histogram_every:
            return
        writer = self.writer
        if writer is not None and hasattr(writer, "add_histogram"):
            from labkit.train import _tensorboard

            norms = _tensorboard.log_histograms(writer, module, step, grads=True)
            self.emit({"type": "grads", "step": step, "norms": norms})

    def detach(self) -> None:
        """Remove the timing recorder's hooks (idempotent)."""
        if self._recorder is not None:
            if self._tracing:
                self._recorder.stop()
                self._tracing = False
            self._recorder.detach()
            self._recorder = None

    def __repr__(self) -> str:
        return (
            f"StepRecorder(flush_interval={self.flush_interval}, "
            f"trace_every={self.trace_every}, histogram_every={self.histogram_every}, "
            f"log_every={self.log_every})"
        )
