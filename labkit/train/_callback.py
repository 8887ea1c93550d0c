"""LabCallback: the thin adapter from Lightning's hooks to labkit's training events.

The events come from a :class:`~labkit.train.recording.StepRecorder`, the same one a
watched plain loop and the callbacks for a user's own Trainer use: on rank 0 it times each
step (waiting for data vs compute), keeps the per-step losses on their device and emits
them as plain-dict events a few times per second, plus epoch, learning-rate, checkpoint,
trace and end events. On every rank this adapter watches for a Stop request and stops all
ranks together after the current step, keeping a checkpoint (in a Lab's logdir).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import lightning.pytorch as pl
import torch

from labkit.train import _tensorboard
from labkit.train.checkpoint import CHECKPOINTS, LAST
from labkit.train.recording import FILE_CHECK_S, Sink, StepRecorder, StopPoll, memory_bytes

if TYPE_CHECKING:
    from torch.utils.tensorboard import SummaryWriter

__all__ = ["FILE_CHECK_S", "EpochSeed", "LabCallback", "LabCheckpoint", "memory_bytes", "seed_all"]


def _floats(metrics: dict[str, Any]) -> dict[str, float]:
    out = {}
    for k, v in metrics.items():
        if (isinstance(v, torch.Tensor) and v.numel() == 1) or isinstance(v, int | float):
            out[k] = float(v)
    return out


def _null_sink(event: dict[str, Any]) -> None:
    """Ranks other than 0 record nothing."""


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
        writer: A TensorBoard ``SummaryWriter`` of labkit's own (or a function making one);
            default: the trainer's logger's, when it has one.
        log_every: Write each step's loss to that writer every N steps (0: the module
            writes its own scalars, as a Lab's LabModule does).
        checkpoint_on_stop: Save ``<logdir>/checkpoints/last.ckpt`` when stopped.
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
        writer: SummaryWriter | Callable[[], SummaryWriter | None] | None = None,
        log_every: int = 0,
        checkpoint_on_stop: bool = True,
    ) -> None:
        self.sink = sink
        self.hparams = dict(hparams or {})
        self.poll = StopPoll(stop_event, stop_file)
        self.stop_every = max(1, stop_every)
        self.flush_interval = flush_interval
        self.trace_every = trace_every
        self.histogram_every = histogram_every
        self.logdir = Path(logdir) if logdir else None
        self.resumed_from = resumed_from
        self.checkpoint_on_stop = checkpoint_on_stop
        self.stopped = False
        self._writer = writer
        self._log_every = log_every
        self.recorder = StepRecorder(
            sink,
            flush_interval=flush_interval,
            stop=self.poll,
            logdir=self.logdir,
            trace_every=trace_every,
            histogram_every=histogram_every,
            writer=writer,
            log_every=log_every,
        )
        self._t_end = 0.0
        self._t_start = 0.0
        self._flops: _StepFlops | None = None  # counting the first step's FLOPs (rank 0)
        self._flops_done = False

    @property
    def stop_event(self) -> threading.Event:
        """The in-process Stop event."""
        return self.poll.event

    @property
    def stop_file(self) -> Path | None:
        """The stop file polled, or None."""
        return self.poll.file

    # ------------------------------------------------------------------ helpers
    def _net(self, pl_module: pl.LightningModule) -> torch.nn.Module:
        return getattr(pl_module, "net", pl_module)

    def request_stop(self) -> None:
        """Ask every rank to stop after the current step."""
        self.poll.event.set()

    def _stop_file_seen(self, now: float) -> bool:
        """Whether the stop file exists, looked at no more than every ``FILE_CHECK_S``."""
        return self.poll.file_seen(now)

    @property
    def _file_checked(self) -> float:
        return self.poll.checked

    # ------------------------------------------------------------------ hooks
    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if not trainer.is_global_zero:  # every event is rank 0's
            self.recorder.sink = _null_sink
        elif self._writer is None:  # histograms, traces, hparams: the trainer's TensorBoard
            self.recorder._writer = lambda: _logger_writer(trainer)

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # here, not in on_fit_start: Lightning restores a resumed run's step in between
        total = trainer.estimated_stepping_batches
        self.recorder.start(
            total_steps=int(total) if total != float("inf") else None,
            max_epochs=trainer.max_epochs,
            world_size=trainer.world_size,
            start_step=trainer.global_step,
            resumed_from=self.resumed_from,
        )

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        writer = self.recorder.writer if trainer.is_global_zero else None
        if self.hparams and writer is not None and hasattr(writer, "file_writer"):
            _tensorboard.log_hparams(writer, self.hparams)
        if self.trace_every and trainer.is_global_zero:
            self.recorder.attach_tracing(self._net(pl_module))

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._t_end = time.perf_counter()

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: object, i: int
    ) -> None:
        traced = self.trace_every > 1 and trainer.global_step % self.trace_every == 0
        if not self._flops_done and trainer.is_global_zero and not traced:  # a sampled trace's
            self._flops_done = True  # times stay free of the counter; once per fit
            self._flops = _StepFlops.start(self.hparams, trainer, self.recorder)
        self._t_start = time.perf_counter()
        self.recorder.begin_step(trainer.global_step)

    def on_before_optimizer_step(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, optimizer: torch.optim.Optimizer
    ) -> None:
        if trainer.is_global_zero:
            self.recorder.learning_rate(optimizer, trainer.global_step)
            self.recorder.histograms(self._net(pl_module), trainer.global_step)

    def on_train_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: object,
        batch: object,
        i: int,
    ) -> None:
        now = time.perf_counter()
        step = trainer.global_step  # already counts this step
        self.recorder.end_step(step)
        if self._flops is not None:
            self._flops.stop(step, self._net(pl_module))
            self._flops = None
        if trainer.is_global_zero:
            loss = getattr(pl_module, "last_loss", None)
            if loss is None:
                loss = outputs["loss"] if isinstance(outputs, dict) else outputs
            if isinstance(loss, torch.Tensor):
                n = getattr(pl_module, "last_batch_size", 0) or 0
                self.recorder.add_step(
                    step,
                    trainer.current_epoch,
                    loss.detach(),
                    now - self._t_start,
                    self._t_start - self._t_end,
                    n,
                )
        self._t_end = now
        if step % self.stop_every == 0:
            local = self.poll(now)
            if trainer.world_size > 1:
                local = trainer.strategy.reduce_boolean_decision(local, all=False)
            if local and not self.stopped:
                self.stopped = True
                trainer.should_stop = True
                if self.logdir is not None and self.checkpoint_on_stop:
                    path = str(self.logdir / CHECKPOINTS / LAST)
                    trainer.save_checkpoint(path)
                    if trainer.is_global_zero:
                        self.recorder.emit({"type": "checkpoint", "path": path})

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.recorder.flush()
        close = getattr(pl_module, "close_epoch", None)
        if callable(close):  # a LabModule logs its epoch means in its own (later) hook
            close("train")
        metrics = {}
        for k, v in _floats(trainer.callback_metrics).items():
            if k.endswith("_epoch"):
                metrics[k.removesuffix("_epoch")] = v
            elif not k.startswith("train_"):  # train_* without _epoch are last-step values
                metrics[k] = v
        self.recorder.emit(
            {
                "type": "epoch",
                "epoch": trainer.current_epoch,
                "step": trainer.global_step,
                **metrics,
            }
        )

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.recorder.end("stopped" if self.stopped else "finished", trainer.global_step)

    def on_exception(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException
    ) -> None:
        if self._flops is not None:  # the counted step failed: its counter goes, nothing sent
            self._flops.abandon()
            self._flops = None
        self.recorder.end("failed", trainer.global_step, f"{type(exception).__name__}: {exception}")

    def _detach(self) -> None:
        self.recorder.detach()

    def __repr__(self) -> str:
        return (
            f"LabCallback(flush_interval={self.flush_interval}, stop_every={self.stop_every}, "
            f"trace_every={self.trace_every}, histogram_every={self.histogram_every})"
        )


class _StepFlops:
    """Counts one training step's FLOPs (``FlopCounterMode``, the reference labkit's own
    counter equals) on rank 0, from its ``on_train_batch_start`` to its ``on_train_batch_end``,
    and emits a ``flops`` event: ``Run.summary`` divides them by the median step time of the
    other steps (this one ran with the counter's per-op cost)."""

    def __init__(self, recorder: StepRecorder, device: str, name: str, dtype: str) -> None:
        from torch.utils.flop_counter import FlopCounterMode

        self.recorder, self.device, self.name, self.dtype = recorder, device, name, dtype
        self.mode = FlopCounterMode(display=False)
        self.mode.__enter__()

    @classmethod
    def start(
        cls, hparams: dict[str, Any], trainer: pl.Trainer, recorder: StepRecorder
    ) -> _StepFlops | None:
        """Begin counting, or emit why not (a compiled model: its graphs are opaque to the
        counter, and counting would recompile it) and return None."""
        if str(hparams.get("recipe/compile", "none")) not in ("none", "False", ""):
            why = (
                "no FLOPs counted: the model is compiled (FlopCounterMode cannot count "
                "inside compiled graphs without recompiling them)"
            )
            recorder.emit({"type": "flops", "flops": None, "how": why})
            return None
        from labkit._utilization import dtype_of

        device = trainer.strategy.root_device
        name = torch.cuda.get_device_name(device) if device.type == "cuda" else str(device)
        matmul = str(hparams.get("recipe/matmul_precision", torch.get_float32_matmul_precision()))
        dtype = dtype_of(str(trainer.precision), matmul)
        return cls(recorder, str(device), name, dtype)

    def stop(self, step: int, net: torch.nn.Module) -> None:
        """End counting after training step ``step`` and emit the ``flops`` event."""
        self.mode.__exit__(None, None, None)
        self.recorder.emit(
            {
                "type": "flops",
                "step": step,
                "flops": int(self.mode.get_total_flops()),
                "device": self.device,
                "device_name": self.name,
                "dtype": self.dtype,
                "how": f"training step {step} (forward, backward and optimizer step of "
                f"{type(net).__name__}, one process)",
            }
        )

    def abandon(self) -> None:
        """Leave the counter (the step failed)."""
        self.mode.__exit__(None, None, None)


def _logger_writer(trainer: pl.Trainer) -> SummaryWriter | None:
    """The trainer's TensorBoard ``SummaryWriter`` (its logger's ``experiment``), or None."""
    writer = getattr(trainer.logger, "experiment", None)
    return writer if hasattr(writer, "add_scalar") else None


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

    def __init__(
        self,
        sink: Sink,
        *,
        dirpath: str | os.PathLike[str],
        every_n_epochs: int = 1,
        keep_epochs: bool = False,
    ) -> None:
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
                self._sink(
                    {
                        "type": "checkpoint",
                        "path": str(path),
                        "t": time.time(),
                        "step": trainer.global_step,
                        "epoch": trainer.current_epoch,
                    }
                )

    def __repr__(self) -> str:
        return (
            f"LabCheckpoint(dirpath={str(self.dirpath)!r}, "
            f"every_n_epochs={self.every_n_epochs}, "
            f"keep_epochs={self.keep_epochs})"
        )


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

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: object, i: int
    ) -> None:
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
