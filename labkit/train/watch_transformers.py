"""``labkit.watch.transformers()``: labkit's run record for a Hugging Face ``Trainer``.

A ``transformers.TrainerCallback``. The Trainer hands callbacks no per-step loss, so one
forward hook on the model keeps the ``loss`` of each training forward (a detached
tensor, read lazily with the others by the
:class:`~labkit.train.recording.StepRecorder`); an optimizer step's loss is the mean of
its micro-batches' (what the Trainer itself logs: the sum instead when the model takes
loss keywords, which the Trainer then expects to divide by ``num_items_in_batch``,
:func:`sums_micro_losses`). Evaluation figures (``eval_loss``)
are recorded as ``val_*`` at their step. The guard is the plain loop's
:class:`~labkit.train._step_guard.StepGuard` on the Trainer's optimizer. Stop sets
``control.should_training_stop``: the Trainer ends after the current step, as stopped.

The Trainer has no hook for an exception inside ``train()``: a run the guard stops is
recorded ``failed`` by the guard itself; any other error leaves it to the next
``train()`` with this callback, or the interpreter's exit, to record as ``failed``.

Example:
    >>> cb = labkit.watch.transformers(logdir="runs/bert")  # doctest: +SKIP
    >>> Trainer(model, args, train_dataset=ds, callbacks=[cb]).train()  # doctest: +SKIP
    >>> cb.run.losses  # doctest: +SKIP
"""

from __future__ import annotations

import atexit
import math
import os
import time
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from transformers import TrainerCallback

from labkit.train.run import Run
from labkit.train.watching import WatchOptions

if TYPE_CHECKING:
    from transformers import TrainerControl, TrainerState, TrainingArguments

__all__ = ["WatchTrainerCallback"]


def _loss_of(output: object) -> torch.Tensor | None:
    loss = output.get("loss") if isinstance(output, dict) else getattr(output, "loss", None)
    if loss is None and isinstance(output, tuple | list) and output:
        loss = output[0]  # return_dict=False: the loss comes first
    return loss if isinstance(loss, torch.Tensor) and loss.numel() == 1 else None


def sums_micro_losses(model: torch.nn.Module) -> bool:
    """Whether the Trainer adds its micro-batches' losses (not their mean) for a step.

    The Trainer's own rule: a model that accepts loss keywords (``accepts_loss_kwargs``,
    else a ``**kwargs`` in its ``forward``) is given ``num_items_in_batch`` and its loss is
    not divided by the accumulation steps.
    """
    import inspect

    if hasattr(model, "accepts_loss_kwargs"):
        return bool(model.accepts_loss_kwargs)
    params = inspect.signature(model.forward).parameters.values()
    return any(p.kind == inspect.Parameter.VAR_KEYWORD for p in params)


class WatchTrainerCallback(TrainerCallback):
    """Records a Hugging Face ``Trainer``'s training as a labkit run (module docstring).

    Args:
        logdir: The run's folder (default ``labkit_runs/<model class>``).
        dashboard: Show the live dashboard (None: in a notebook).
        **options: :class:`~labkit.train.watching.WatchOptions`.

    Attributes:
        run: The :class:`~labkit.train.run.Run` of the last ``train()`` (None before one).
    """

    def __init__(
        self,
        logdir: str | os.PathLike[str] | None = None,
        dashboard: bool | None = None,
        **options: object,
    ) -> None:
        if dashboard is not None and not isinstance(dashboard, bool):
            raise TypeError(
                f"labkit.watch.transformers(dashboard={dashboard!r}): True, False "
                "or None (in a notebook)"
            )
        self.options = WatchOptions.build(options, "labkit.watch.transformers")
        self.logdir = Path(logdir) if logdir is not None else None
        self.dashboard = dashboard
        self.run: Run | None = None
        self.session: Any = None
        self.recorder: Any = None
        self.guard: Any = None
        self.stopped = False
        self._losses: list[torch.Tensor] = []
        self._handles: list[Any] = []
        self._t = 0.0
        self._net: torch.nn.Module | None = None
        self._sum = False
        self.clock: Any = None  # per-rank step breakdown under DDP (rank_stats)

    # ------------------------------------------------------------------ the start
    def on_train_begin(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        model: torch.nn.Module | None = None,
        optimizer: torch.optim.Optimizer | None = None,
        **kwargs: object,
    ) -> None:
        from labkit.train._run_session import RunSession, versions
        from labkit.train._step_guard import StepGuard
        from labkit.train.recording import StepRecorder, StopPoll
        from labkit.train.watching import default_logdir

        if model is None:  # the Trainer always passes its model
            raise TypeError(
                "labkit.watch.transformers: on_train_begin(model=...) needs the model being "
                "trained; add this callback to a transformers.Trainer"
            )
        self._close("failed", "the previous train() ended by an exception")
        o = self.options
        logdir = self.logdir if self.logdir is not None else default_logdir(model)
        config: dict[str, Any] = {
            "model": type(model).__name__,
            "params": sum(p.numel() for p in model.parameters()),
            "max_steps": state.max_steps,
            "max_epochs": args.num_train_epochs,
            "batch_size": args.per_device_train_batch_size,
            "gradient_accumulation_steps": args.gradient_accumulation_steps,
            "world_size": args.world_size,
            "seed": args.seed,
            "optimizer": None,
            "lr": None,
            "guard": o.guard,
            "trace_every": o.trace_every,
            "histogram_every": o.histogram_every,
            "versions": versions("transformers", "accelerate"),
            **(o.config or {}),
        }
        session = RunSession(
            logdir,
            source="transformers",
            config=config,
            dashboard=self.dashboard,
            rank=args.process_index,
            compare_with=o.compare_with,
        )
        session.open()
        self.session, self.run, self.stopped = session, session.run, False
        self.recorder = StepRecorder(
            session.emit,
            flush_interval=o.flush_interval,
            stop=StopPoll(session.stop_event, session.stop_file),
            logdir=logdir,
            trace_every=o.trace_every,
            histogram_every=o.histogram_every,
            writer=session.writer,
            log_every=o.log_every,
            scalars=session.scalars,
        )
        self._net = model
        self._sum = sums_micro_losses(model)
        if self._sum and args.gradient_accumulation_steps > 1:
            session.run.notes.append(
                "a step's loss is the sum of its micro-batches' losses, as the Trainer trains "
                "and logs it: the model takes loss keywords, so the Trainer leaves dividing by "
                "the accumulation steps to it (num_items_in_batch)"
            )
        self._handles = [model.register_forward_hook(self._keep_loss)]
        inner = getattr(optimizer, "optimizer", optimizer)  # accelerate's AcceleratedOptimizer
        if o.guard:
            self.guard = StepGuard(model).attach(None)
            if inner is not None:
                self._handles.append(inner.register_step_pre_hook(self._before_update))
        self.clock = None
        if o.rank_stats and args.world_size > 1:
            self._start_clock(args, model, inner)
        self.recorder.start(
            total_steps=state.max_steps or None,
            max_epochs=args.num_train_epochs,
            world_size=args.world_size,
            start_step=state.global_step,
        )
        if session.recording:
            self.recorder.attach_tracing(model)
        _OPEN.add(self)

    def _start_clock(
        self,
        args: TrainingArguments,
        model: torch.nn.Module,
        optimizer: torch.optim.Optimizer | None,
    ) -> None:
        """Time each training step's parts on every rank (``_ranks.StepClock``)."""
        import torch.distributed as dist

        from labkit.train._ranks import StepClock

        if not (dist.is_available() and dist.is_initialized()):
            return
        device = torch.device("cpu")
        if dist.get_backend() == "nccl":
            device = next((p.device for p in model.parameters()), device)
        clock = self.clock = StepClock(
            self.session.emit,
            world=dist.get_world_size(),
            rank=dist.get_rank(),
            device=device,
            logdir=self.session.logdir,
        )

        def start(module: torch.nn.Module, inputs: tuple[object, ...]) -> None:
            if module.training and torch.is_grad_enabled():
                clock.forward_start()

        def end(module: torch.nn.Module, inputs: tuple[object, ...], output: object) -> None:
            if module.training and torch.is_grad_enabled():
                clock.forward_end()

        self._handles += [model.register_forward_pre_hook(start), model.register_forward_hook(end)]
        if optimizer is not None:
            self._handles.append(optimizer.register_step_pre_hook(clock.before_optimizer))

    def _keep_loss(self, module: torch.nn.Module, args: tuple[object, ...], output: object) -> None:
        if module.training and torch.is_grad_enabled():
            loss = _loss_of(output)
            if loss is not None:
                self._losses.append(loss.detach())

    def _before_update(
        self, optimizer: torch.optim.Optimizer, args: tuple[object, ...], kwargs: dict[str, object]
    ) -> None:
        if self.guard is None:
            return
        try:
            self.guard.check_gradients()
        except Exception as exc:
            self._close("failed", f"{type(exc).__name__}: {exc}")
            raise

    # ------------------------------------------------------------------ steps
    def on_step_begin(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        **kwargs: object,
    ) -> None:
        self._t = time.perf_counter()
        if self.recorder is not None:
            self.recorder.begin_step(state.global_step + 1)

    def on_pre_optimizer_step(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        **kwargs: object,
    ) -> None:
        if self.recorder is None:
            return
        step = state.global_step + 1
        optimizer = kwargs.get("optimizer")
        if optimizer is not None:
            self.recorder.learning_rate(getattr(optimizer, "optimizer", optimizer), step)
        if self._net is not None and self.session.recording:
            self.recorder.histograms(self._net, step)

    def on_step_end(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        **kwargs: object,
    ) -> None:
        if self.recorder is None:
            return
        now = time.perf_counter()
        step = state.global_step
        losses, self._losses = self._losses, []
        self.recorder.end_step(step)
        if losses:
            loss = losses[0] if len(losses) == 1 else torch.stack(losses).sum(0)
            if len(losses) > 1 and not self._sum:
                loss = loss / len(losses)
            n = args.per_device_train_batch_size * args.gradient_accumulation_steps
            epoch = int(state.epoch) if state.epoch is not None else 0
            try:
                flushed = self.recorder.add_step(step, epoch, loss, now - self._t, 0.0, n)
                if self.guard is not None:
                    self.guard.check_losses(flushed)
                    self.guard.stepped(step)
            except Exception as exc:
                self._close("failed", f"{type(exc).__name__}: {exc}")
                raise
        if self.clock is not None:
            self.clock.step_end()
        if self.recorder.stop(now) and not self.stopped:
            self.stopped = True
            control.should_training_stop = True

    def on_epoch_begin(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        **kwargs: object,
    ) -> None:
        if self.clock is not None:
            self.clock.restart()  # what came before the epoch is no data wait

    def on_epoch_end(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        **kwargs: object,
    ) -> None:
        if self.clock is not None:  # every rank calls it: the one collective of a gathering
            epoch = max(0, round(state.epoch or 0) - 1)
            self.clock.gather(epoch, state.global_step)

    def on_evaluate(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        metrics: Mapping[str, object] | None = None,
        **kwargs: object,
    ) -> None:
        if self.clock is not None:
            self.clock.restart()  # the evaluation is no data wait of the next step
        if self.recorder is None or not metrics:
            return
        figures = {
            "val_" + k.removeprefix("eval_"): float(v)
            for k, v in metrics.items()
            if isinstance(v, int | float)
            and not isinstance(v, bool)
            and k.startswith("eval_")
            and not k.endswith(("_runtime", "per_second"))
        }
        if figures:
            n = len(self.session.run.epochs)
            flushed = self.recorder.epoch(n, state.global_step, figures)
            if self.guard is not None:
                self.guard.check_losses(flushed)

    # ------------------------------------------------------------------ the end
    def on_train_end(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        **kwargs: object,
    ) -> None:
        if self.clock is not None:  # steps since the last epoch end (max_steps, a Stop)
            try:
                self.clock.gather(max(0, math.ceil(state.epoch or 0) - 1), state.global_step)
            finally:
                self.clock = None
        self._close("stopped" if self.stopped else "finished", None, step=state.global_step)

    def _close(self, status: str, error: str | None, *, step: int | None = None) -> None:
        session = self.session
        if session is None or session.closed:
            return
        _OPEN.discard(self)
        try:
            for h in self._handles:
                h.remove()
            self._handles = []
            if self.guard is not None:
                self.guard.detach()
            try:
                last = session.run.steps[-1]["step"] if session.run.steps else 0
                self.recorder.end(status, step if step is not None else last, error)
            except Exception as exc:  # the record is written whatever this says
                session.run.notes.append(
                    f"the run's end could not be recorded in full: {type(exc).__name__}: {exc}"
                )
        finally:
            session.close(status, error)
            self._losses = []
            self.clock = None

    def __repr__(self) -> str:
        where = str(self.logdir) if self.logdir else None
        return f"labkit.watch.transformers(logdir={where!r}, {self.options!r})"


_OPEN: weakref.WeakSet[WatchTrainerCallback] = weakref.WeakSet()


@atexit.register
def _close_open_runs() -> None:
    """A Trainer's run still open at exit ended in an exception inside ``train()``."""
    for cb in list(_OPEN):
        cb._close("failed", "Trainer.train() ended without on_train_end (an exception)")
