"""LabCallback: the thin adapter from Lightning's hooks to labkit's training events.

On rank 0 it times each step (waiting for data vs compute), batches the per-step records
and emits them as plain-dict events a few times per second (one ``.tolist()`` per batch of
steps, so a GPU is not synchronised every step), plus epoch, checkpoint, trace and end
events. On every rank it watches for a Stop request and stops all ranks together after
the current step, keeping a checkpoint.
"""

from __future__ import annotations

import os
import resource
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch

from labkit.train import _tensorboard
from labkit.train.checkpoint import CHECKPOINTS, LAST

Sink = Callable[[dict[str, Any]], None]
FILE_CHECK_S = 0.1  # a Stop through the stop file is seen within this (a stat per step costs)


def memory_bytes() -> int:
    """Memory in use: CUDA allocated bytes on a GPU, else this process's resident set."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return int(torch.cuda.memory_allocated())
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def _floats(metrics: dict[str, Any]) -> dict[str, float]:
    out = {}
    for k, v in metrics.items():
        if (isinstance(v, torch.Tensor) and v.numel() == 1) or isinstance(v, int | float):
            out[k] = float(v)
    return out


class LabCallback(pl.Callback):
    """Emits training events on rank 0 and handles Stop on every rank.

    Args:
        sink: Receives each event dict (rank 0 only).
        stop_event: Set by ``lab.stop()`` / the dashboard's Stop button (same process).
        stop_file: A file whose existence also means Stop (other processes).
        stop_every: Steps between two Stop checks when several processes train (a
            collective); 1 in a single process.
        flush_interval: Seconds between two ``steps`` events.
        trace_every: Sample a labkit timing trace every N steps (0: never).
        histogram_every: Write weight/gradient histograms every N steps (0: never).
        logdir: Run directory (traces go to ``<logdir>/traces/``).
        resumed_from: Checkpoint the fit resumes from, for the start event.
        hparams: Written to the logger as hyperparameters (the Recipe) on rank 0.
    """

    def __init__(
        self,
        sink: Sink,
        *,
        stop_event: threading.Event | None = None,
        stop_file: str | os.PathLike[str] | None = None,
        stop_every: int = 1,
        flush_interval: float = 0.2,
        trace_every: int = 0,
        histogram_every: int = 0,
        logdir: str | os.PathLike[str] | None = None,
        resumed_from: str | None = None,
        hparams: dict[str, Any] | None = None,
    ) -> None:
        self.sink = sink
        self.hparams = dict(hparams or {})
        self.stop_event = stop_event or threading.Event()
        self.stop_file = Path(stop_file) if stop_file else None
        self.stop_every = max(1, stop_every)
        self.flush_interval = flush_interval
        self.trace_every = trace_every
        self.histogram_every = histogram_every
        self.logdir = Path(logdir) if logdir else None
        self.resumed_from = resumed_from
        self.stopped = False
        self._pending: list[tuple[int, int, Any, float, float, int, float]] = []
        self._last_flush = 0.0
        self._t_end = 0.0
        self._t_start = 0.0
        self._recorder: Any = None
        self._tracing = False
        self._file_checked = -float("inf")

    # ------------------------------------------------------------------ helpers
    def _emit(self, trainer: pl.Trainer, event: dict[str, Any]) -> None:
        if trainer.is_global_zero:
            event.setdefault("t", time.time())
            self.sink(event)

    def _flush(self, trainer: pl.Trainer) -> None:
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        losses = torch.stack([p[2] for p in pending]).float().cpu().tolist()
        # t: the wall clock at the step's end (the runs view's wall-time axis)
        steps = [
            {"step": s, "epoch": e, "loss": loss, "compute_time": c, "data_time": d, "samples": n,
             "t": round(w, 4)}
            for (s, e, _, c, d, n, w), loss in zip(pending, losses, strict=True)
        ]  # fmt: skip
        self._emit(trainer, {"type": "steps", "steps": steps, "memory": memory_bytes()})
        self._last_flush = time.perf_counter()

    def _net(self, pl_module: pl.LightningModule) -> torch.nn.Module:
        return getattr(pl_module, "net", pl_module)

    def request_stop(self) -> None:
        """Ask every rank to stop after the current step."""
        self.stop_event.set()

    # ------------------------------------------------------------------ hooks
    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # here, not in on_fit_start: Lightning restores a resumed run's step in between
        total = trainer.estimated_stepping_batches
        self._emit(trainer, {
            "type": "start",
            "total_steps": int(total) if total != float("inf") else None,
            "max_epochs": trainer.max_epochs,
            "world_size": trainer.world_size,
            "start_step": trainer.global_step,
            "resumed_from": self.resumed_from,
        })  # fmt: skip

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        writer = getattr(trainer.logger, "experiment", None) if trainer.is_global_zero else None
        if self.hparams and writer is not None and hasattr(writer, "file_writer"):
            _tensorboard.log_hparams(writer, self.hparams)
        if self.trace_every and trainer.is_global_zero:
            from labkit.trace import Recorder

            self._recorder = Recorder(self._net(pl_module), mode="timing").attach()

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._t_end = time.perf_counter()

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: Any, batch: Any, i: int) -> None:
        self._t_start = time.perf_counter()
        if self._recorder is not None and trainer.global_step % self.trace_every == 0:
            self._recorder.start()
            self._tracing = True

    def on_before_optimizer_step(self, trainer: pl.Trainer, pl_module: Any, optimizer: Any) -> None:
        if self.histogram_every and trainer.global_step % self.histogram_every == 0:
            writer = getattr(trainer.logger, "experiment", None)
            if trainer.is_global_zero and writer is not None and hasattr(writer, "add_histogram"):
                norms = _tensorboard.log_histograms(writer, self._net(pl_module),
                                                    trainer.global_step, grads=True)  # fmt: skip
                self._emit(trainer, {"type": "grads", "step": trainer.global_step, "norms": norms})

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: Any, outputs: Any, batch: Any,
                           i: int) -> None:  # fmt: skip
        now = time.perf_counter()
        step = trainer.global_step  # already counts this step
        if self._tracing:
            self._tracing = False
            self._save_trace(trainer, self._recorder.stop(), step)
        if trainer.is_global_zero:
            loss = getattr(pl_module, "last_loss", None)
            if loss is None:
                loss = outputs["loss"] if isinstance(outputs, dict) else outputs
            n = getattr(pl_module, "last_batch_size", 0) or 0
            self._pending.append((step, trainer.current_epoch, loss.detach(),
                                  now - self._t_start, self._t_start - self._t_end, n,
                                  time.time()))  # fmt: skip
            if now - self._last_flush >= self.flush_interval:
                self._flush(trainer)
        self._t_end = now
        if step % self.stop_every == 0:
            local = self.stop_event.is_set() or self._stop_file_seen(now)
            if trainer.world_size > 1:
                local = trainer.strategy.reduce_boolean_decision(local, all=False)
            if local and not self.stopped:
                self.stopped = True
                trainer.should_stop = True
                if self.logdir is not None:
                    trainer.save_checkpoint(str(self.logdir / CHECKPOINTS / LAST))
                    self._emit(
                        trainer,
                        {
                            "type": "checkpoint",
                            "path": str(self.logdir / CHECKPOINTS / LAST),
                        },
                    )

    def _stop_file_seen(self, now: float) -> bool:
        """Whether the stop file exists, looked at no more than every ``FILE_CHECK_S``."""
        if self.stop_file is None or now - self._file_checked < FILE_CHECK_S:
            return False
        self._file_checked = now
        return self.stop_file.exists()

    def _save_trace(self, trainer: pl.Trainer, trace: Any, step: int) -> None:
        if self.logdir is None:
            return
        path = self.logdir / "traces" / f"step_{step:07d}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        trace.save(path)
        writer = getattr(trainer.logger, "experiment", None)
        if writer is not None and hasattr(writer, "add_scalar"):
            _tensorboard.log_trace(writer, trace, step)
        self._emit(trainer, {"type": "trace", "step": step, "path": str(path)})

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._flush(trainer)
        close = getattr(pl_module, "close_epoch", None)
        if callable(close):  # a LabModule logs its epoch means in its own (later) hook
            close("train")
        metrics = {}
        for k, v in _floats(trainer.callback_metrics).items():
            if k.endswith("_epoch"):
                metrics[k.removesuffix("_epoch")] = v
            elif not k.startswith("train_"):  # train_* without _epoch are last-step values
                metrics[k] = v
        self._emit(trainer, {"type": "epoch", "epoch": trainer.current_epoch,
                             "step": trainer.global_step, **metrics})  # fmt: skip

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._flush(trainer)
        self._detach()
        self._emit(trainer, {"type": "end", "status": "stopped" if self.stopped else "finished",
                             "step": trainer.global_step})  # fmt: skip

    def on_exception(self, trainer: pl.Trainer, pl_module: Any, exception: BaseException) -> None:
        try:
            self._flush(trainer)
        except Exception:  # a failing flush must not hide the training error
            self._pending = []
        self._detach()
        self._emit(trainer, {"type": "end", "status": "failed", "step": trainer.global_step,
                             "error": f"{type(exception).__name__}: {exception}"})  # fmt: skip

    def _detach(self) -> None:
        if self._recorder is not None:
            if self._tracing:
                self._recorder.stop()
                self._tracing = False
            self._recorder.detach()
            self._recorder = None

    def __repr__(self) -> str:
        return (
            f"LabCallback(flush_interval={self.flush_interval}, stop_every={self.stop_every}, "
            f"trace_every={self.trace_every}, histogram_every={self.histogram_every})"
        )


class LabCheckpoint(pl.Callback):
    """Saves ``<dirpath>/last.ckpt`` at the end of every ``every_n_epochs``-th epoch.

    Writes go through the trainer's ``CheckpointIO`` (``AtomicCheckpointIO`` in a Lab: a
    temporary file, then a rename) and are reported as ``checkpoint`` events.

    Args:
        sink: Receives the ``checkpoint`` events (rank 0).
        dirpath: Folder of the checkpoints.
        every_n_epochs: Epoch interval.
        keep_epochs: Also keep ``epoch=NNN.ckpt`` for every saved epoch.
    """

    def __init__(self, sink: Sink, *, dirpath: str | os.PathLike[str], every_n_epochs: int = 1,
                 keep_epochs: bool = False) -> None:  # fmt: skip
        self._sink = sink
        self.dirpath = Path(dirpath)
        self.every_n_epochs = max(1, every_n_epochs)
        self.keep_epochs = keep_epochs

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if (trainer.current_epoch + 1) % self.every_n_epochs or trainer.sanity_checking:
            return
        paths = [self.dirpath / LAST]
        if self.keep_epochs:
            paths.insert(0, self.dirpath / f"epoch={trainer.current_epoch:03d}.ckpt")
        for path in paths:
            trainer.save_checkpoint(str(path))
            if trainer.is_global_zero:
                self._sink({"type": "checkpoint", "path": str(path), "t": time.time(),
                            "step": trainer.global_step,
                            "epoch": trainer.current_epoch})  # fmt: skip

    def __repr__(self) -> str:
        return (f"LabCheckpoint(dirpath={str(self.dirpath)!r}, "
                f"every_n_epochs={self.every_n_epochs}, "
                f"keep_epochs={self.keep_epochs})")  # fmt: skip


class EpochSeed(pl.Callback):
    """Seeds ``random``, NumPy and torch with ``seed + epoch`` before each epoch's first step.

    The seed is set once the epoch's loader iterator exists and has fetched its first
    batch (creating an iterator draws from the global generator, and Lightning creates the
    first epoch's iterator earlier than later ones). What the steps draw (dropout masks)
    then depends only on the seed and the epoch, so a run resumed from an end-of-epoch
    checkpoint draws what an uninterrupted run drew. A hand-written loop matches it with
    ``if i == 0: torch.manual_seed(seed + epoch)`` inside ``for i, (x, y) in enumerate(loader)``.
    """

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: Any, batch: Any, i: int) -> None:
        if i == 0:
            seed_all(self.seed + trainer.current_epoch)

    def __repr__(self) -> str:
        return f"EpochSeed(seed={self.seed})"


def seed_all(seed: int) -> None:
    """Seed ``random``, NumPy (when present) and torch."""
    import random
    import sys

    random.seed(seed)
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
