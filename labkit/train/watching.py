"""``labkit.watch``: labkit's run record, dashboard and guards for training code as it is.

Three ways in, one record (a :class:`~labkit.train.run.Run`, ``events.jsonl``,
``run.json``, TensorBoard scalars under ``<logdir>/tensorboard``, read by
:func:`labkit.runs` beside ``Lab.fit``'s runs with their ``source``):

- ``labkit.watch(model, optimizer)``: a plain loop calls ``run.step(loss=loss)`` once per
  optimizer step (a context manager; Stop makes the next ``run.step`` raise
  :class:`~labkit.train.run.RunStopped`, which the ``with`` block turns into a stopped run);
- ``labkit.watch.lightning()``: a ``lightning.Callback`` for the user's own ``Trainer``;
- ``labkit.watch.transformers()``: a ``transformers.TrainerCallback`` for a Hugging Face
  ``Trainer``.

All three feed a :class:`~labkit.train.recording.StepRecorder` (the one ``Lab.fit`` uses)
and a :class:`~labkit.train._run_session.RunSession`. Options are :class:`WatchOptions`.
"""

from __future__ import annotations

import atexit
import dataclasses
import math
import os
import time
import weakref
from pathlib import Path
from typing import Any

import torch

from labkit._options import args_doc, changes_repr, check_names
from labkit.train.recording import FILE_CHECK_S
from labkit.train.run import Run, RunStopped

__all__ = ["Watch", "WatchOptions", "watch"]

FLUSH_SHARE = 0.001
"""Most share of the loop's time its reads of the kept losses (a flush: the steps event,
``events.jsonl``, TensorBoard scalars) may take: a flush that took ``t`` seconds is
followed by the next one no sooner than ``t / FLUSH_SHARE`` (and no sooner than
``flush_interval``). A flush takes 0.1-0.2 ms on a quiet machine (so ``flush_interval``
decides) and 0.5-1 ms out of the caches on a loaded one, where this spaces them out, up
to :data:`FLUSH_MAX_S` apart (a first flush that imports TensorBoard's writer takes 0.1 s)."""
FLUSH_MAX_S = 1.0
"""Seconds between two flushes at most, whatever one cost (unless ``flush_interval`` asks
for more): the dashboard and the loss guard stay a second behind at worst."""


def _opt(default: Any, help: str) -> Any:
    return dataclasses.field(default=default, metadata={"help": help})


@dataclasses.dataclass(frozen=True)
class WatchOptions:
    """The options of ``labkit.watch`` and its ``.lightning()``/``.transformers()`` callbacks.

    Args:
        guard: Stop at the first non-finite loss or gradient, naming the step and, for a
            forward NaN/Inf, the first module whose output was non-finite.
        trace_every: Sample a labkit timing trace every N steps (0: never).
        histogram_every: Write weight/gradient histograms every N steps (0: never).
        log_every: TensorBoard scalar interval in steps (0: none).
        rank_stats: Per-rank step breakdown and stragglers with several processes
            (``run.ranks``; gathered at each epoch change and at the end).
        flush_interval: Seconds between two reads of the kept losses (one host read each);
            longer (up to a second) when a read takes more than 0.1% of the time (a
            loaded machine), and 0 reads every step.
        total_steps: Steps the loop will take, for the dashboard's progress and ETA.
        config: Settings of yours to record in ``run.json`` (JSON-ready values).
        compare_with: Overlay earlier runs of this logdir's family on the dashboard, dimmed:
            True for the latest ones, or their run names (default: none; the dashboard's
            toggle shows them).
    """

    guard: bool = _opt(True, "Stop at the first non-finite loss or gradient.")
    trace_every: int = _opt(0, "Sample a labkit timing trace every N steps (0: never).")
    histogram_every: int = _opt(0, "Weight/gradient histograms every N steps (0: never).")
    log_every: int = _opt(10, "TensorBoard scalar interval in steps (0: none).")
    rank_stats: bool = _opt(True, "Per-rank step breakdown with several processes.")
    flush_interval: float = _opt(0.2, "Seconds between two reads of the kept losses.")
    total_steps: int | None = _opt(None, "Steps the loop will take (progress and ETA).")
    config: dict[str, Any] | None = _opt(  # noqa: RUF009 (_opt returns a dataclasses.field)
        None, "Settings of yours to record in run.json."
    )
    compare_with: bool | list[str] | None = _opt(  # noqa: RUF009 (_opt returns a dataclasses.field)
        None, "Overlay earlier runs of this logdir's family on the dashboard (True, or names)."
    )

    @classmethod
    def build(cls, options: dict[str, Any], where: str) -> WatchOptions:
        """Check ``options`` (names and values) and make the options; errors name the fix."""
        check_names(cls, options, where, "an unknown option")
        for name in ("trace_every", "histogram_every", "log_every"):
            v = options.get(name, 0)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"{where}({name}={v!r}): a whole number of steps >= 0")
        for name in ("guard", "rank_stats"):
            if not isinstance(options.get(name, True), bool):
                raise TypeError(f"{where}({name}={options[name]!r}): True or False")
        f = options.get("flush_interval", 0.2)
        if not isinstance(f, int | float) or isinstance(f, bool) or not 0 <= f < math.inf:
            raise ValueError(f"{where}(flush_interval={f!r}): seconds >= 0")
        n = options.get("total_steps")
        if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 1):
            raise ValueError(f"{where}(total_steps={n!r}): a whole number >= 1, or None")
        c = options.get("config")
        if c is not None and not isinstance(c, dict):
            raise TypeError(
                f"{where}(config=...) is a dict of your settings, got {type(c).__name__}"
            )
        return cls(**options)

    def __repr__(self) -> str:
        return changes_repr(self)


def default_logdir(model: Any) -> Path:
    """``labkit_runs/<model class>``, as ``Lab`` chooses."""
    inner = getattr(model, "module", model)  # a DDP-wrapped model: its module's name
    return Path("labkit_runs") / type(inner).__name__


def check_process_group(where: str) -> None:
    """Refuse a process of several (torchrun) that has no process group yet."""
    import torch.distributed as dist

    world = os.environ.get("WORLD_SIZE", "1").strip()
    if world.isdigit() and int(world) > 1 and not (dist.is_available() and dist.is_initialized()):
        raise RuntimeError(
            f"{where}: this process is one of {world} (WORLD_SIZE={world}, "
            f"RANK={os.environ.get('RANK', '?')}) but torch.distributed has no process group; "
            "call torch.distributed.init_process_group(...) before labkit.watch, so only rank "
            "0 writes the run and Stop reaches every rank"
        )


# ---------------------------------------------------------------------- the plain loop
def np_number() -> tuple[type, ...]:
    """NumPy's scalar number types when NumPy is loaded (a figure may be one)."""
    import sys

    np = sys.modules.get("numpy")
    return (np.number,) if np is not None else ()


def _number(name: str, value: Any) -> Any:
    """A step figure as kept: a scalar tensor (detached, read later) or a float."""
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise ValueError(
                f"run.step({name}=...) got a tensor of shape {list(value.shape)}; "
                f"a figure is one number: reduce it ({name}.mean())"
            )
        if value.is_complex():
            raise TypeError(f"run.step({name}=...) got a complex tensor; a figure is real")
        return value.detach()
    if isinstance(value, bool) or not isinstance(value, (int, float, *np_number())):
        raise TypeError(
            f"run.step({name}={value!r}): a figure is a scalar tensor or a number, "
            f"not {type(value).__name__}"
        )
    return float(value)  # type: ignore[arg-type]  # an int, float or NumPy number


def _loss(loss: Any) -> Any:
    if loss is None:
        raise TypeError(
            "run.step() needs the step's loss: run.step(loss=loss) once per optimizer step"
        )
    if isinstance(loss, int) and not isinstance(loss, bool):
        raise TypeError(
            f"run.step(loss={loss!r}) got a Python int; pass the loss tensor (or "
            "its float), as the backward pass used it"
        )
    if isinstance(loss, torch.Tensor) and not loss.is_floating_point():
        raise TypeError(
            f"run.step(loss=...) got a {loss.dtype} tensor; a loss is a floating point scalar"
        )
    return _number("loss", loss)


class LoopWatch:
    """The live side of a watched loop's Run: ``run.step`` lands here (see :func:`watch`)."""

    STOP_EVERY = 10  # steps between two Stop agreements across processes (a collective)

    def __init__(
        self, model: torch.nn.Module, optimizer: Any, session: Any, options: WatchOptions
    ) -> None:
        from labkit.train._step_guard import StepGuard
        from labkit.train.recording import StepRecorder, StopPoll

        self.model = model
        self.net = getattr(model, "module", model)  # DDP: hooks on the module it wraps
        self.optimizer = optimizer
        self.session = session
        self.options = options
        self.recorder = StepRecorder(
            session.emit,
            flush_interval=options.flush_interval,
            stop=StopPoll(session.stop_event, session.stop_file),
            logdir=session.logdir,
            trace_every=options.trace_every,
            histogram_every=options.histogram_every,
            writer=session.writer,
            log_every=options.log_every,
            scalars=session.scalars,
        )
        self.guard = StepGuard(self.net) if options.guard else None
        # without an optimizer the guard checks each loss in run.step (no gradients seen)
        self._loss_guard = self.guard if optimizer is None else None
        self._plain = True  # run.step's short way: set by start()
        self._flush_gap = options.flush_interval  # seconds from one flush to the next
        self.count = 0
        self.epoch = 0
        self._hook: Any = None
        self._t = time.perf_counter()
        import torch.distributed as dist

        self.world = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
        self.clock: Any = None  # per-rank step breakdown (several processes, rank_stats)
        self._clock_hooks: list[Any] = []
        self._gathered_epoch = 0

    def start(self) -> None:
        self.recorder.start(
            total_steps=self.options.total_steps,
            max_epochs=None,
            world_size=self.world,
            start_step=0,
        )
        if self.guard is not None:
            self.guard.attach(self.optimizer)
        if self.optimizer is not None and self.options.histogram_every:
            self._hook = self.optimizer.register_step_pre_hook(self._histograms)
        if self.session.recording:
            self.recorder.attach_tracing(self.net)
            self.recorder.begin_step(1)
        if self.world > 1 and self.options.rank_stats:
            self._start_clock()
        self._plain = self.world == 1 and self.clock is None and self.recorder._recorder is None
        self._t = time.perf_counter()

    def _start_clock(self) -> None:
        """Time each step's parts on every rank (hooks taken off when the run ends)."""
        import torch.distributed as dist

        from labkit.train._ranks import StepClock

        device = torch.device("cpu")
        if dist.get_backend() == "nccl":
            device = next((p.device for p in self.net.parameters()), device)
        self.clock = StepClock(
            self.session.emit,
            world=self.world,
            rank=dist.get_rank(),
            device=device,
            logdir=self.session.logdir,
        )
        # the model as called (a DDP wrapper: its forward with the buffers' broadcast)
        self._clock_hooks = [
            self.model.register_forward_pre_hook(self.clock.forward_start),
            self.model.register_forward_hook(self.clock.forward_end),
        ]
        if self.optimizer is not None:
            self._clock_hooks.append(
                self.optimizer.register_step_pre_hook(self.clock.before_optimizer)
            )

    def _gather(self, epoch: int) -> None:
        """Every rank's step breakdown to rank 0 (a collective: each rank calls it)."""
        if self.clock is not None:
            self.clock.gather(epoch, self.count)

    def _histograms(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        self.recorder.histograms(self.net, self.count + 1)

    # ------------------------------------------------------------------ run.step / run.log
    def step(self, loss: Any, metrics: dict[str, Any]) -> None:
        # the common case first (a floating point scalar tensor, no other figures), with as
        # little Python per step as can be: this runs once per optimizer step, between the
        # user's own steps, where every object it touches is out of the caches (each
        # attribute read or call costs about a microsecond there, measured)
        kept: Any
        if type(loss) is torch.Tensor and loss.is_cpu:
            # a CPU loss is read now (no sync to wait for, the same float the flush would
            # read, and cheaper than a detached copy kept until then); item() refuses a
            # tensor of several numbers, and an integer or bool one gives no float
            try:
                kept = loss.item()
            except RuntimeError:
                kept = None
            if type(kept) is not float:  # not one floating point number: the error
                kept = _loss(loss)
        elif type(loss) is torch.Tensor and loss.is_floating_point() and loss.numel() == 1:
            kept = loss.detach()  # on its device until the flush: no sync per step
        else:
            kept = _loss(loss)
        epoch, samples, figures = self.epoch, 0, None
        if metrics:
            epoch, samples, figures = self._figures(metrics)
        now = time.perf_counter()
        self.count = k = self.count + 1
        self.epoch = epoch
        rec = self.recorder
        guard = self.guard
        if k == 1:
            self._first_step(kept)
        elif self._loss_guard is not None:
            self._loss_guard.check_loss(kept)  # no optimizer: the loss, at once
        if rec._tracing:
            rec.end_step(k)
        # StepRecorder.add_step, inline: kept as it is, read at the flush
        rec._pending.append((k, epoch, kept, now - self._t, 0.0, samples, time.time(), figures))
        if now - rec._last_flush >= self._flush_gap:
            self._flush(now)
        if guard is not None:  # StepGuard.stepped, inline
            guard.step = k + 1
            if guard._inputs:
                guard._inputs = []
        if self._plain:  # one process, no clock, no sampled traces: the Stop check alone
            stop = rec.stop  # _should_stop, inline: the event, the stop file now and then
            if stop.event.is_set() or (now - stop.checked >= FILE_CHECK_S and stop.file_seen(now)):
                raise RunStopped(f"Stop was asked: the watched loop stopped after step {k}")
        else:
            self._step_end(now, k)
        self._t = now

    def _flush(self, now: float) -> None:
        """Read the kept steps (the guard checks their losses) and pace the next read."""
        flushed = self.recorder.flush()
        if self.guard is not None and flushed:
            self.guard.check_losses(flushed)  # read together, a few times a second
        interval = self.options.flush_interval
        if interval > 0:  # no sooner than FLUSH_SHARE of the time allows, within a second
            took = time.perf_counter() - now
            self._flush_gap = max(interval, min(took / FLUSH_SHARE, FLUSH_MAX_S))

    def _first_step(self, kept: Any) -> None:
        """The first ``run.step``: the loss checked (no optimizer), the learning rate sent."""
        if self._loss_guard is not None:
            self._loss_guard.check_loss(kept)
        if self.optimizer is not None:
            self.recorder.learning_rate(self.optimizer, 1)

    def _step_end(self, now: float, k: int) -> None:
        """The end of ``run.step`` with a clock, several processes or sampled traces."""
        if self.clock is not None:
            self.clock.step_end()
        if self._should_stop(now, k):
            raise RunStopped(f"Stop was asked: the watched loop stopped after step {k}")
        if self.recorder._recorder is not None:
            self.recorder.begin_step(k + 1)

    def _figures(self, metrics: dict[str, Any]) -> tuple[int, int, dict[str, Any] | None]:
        """``run.step``'s other arguments: the epoch, the samples and the figures kept."""
        epoch = metrics.pop("epoch", self.epoch)
        samples = metrics.pop("samples", 0)
        if not isinstance(epoch, int) or isinstance(epoch, bool):
            raise TypeError(f"run.step(epoch={epoch!r}): the epoch is a whole number")
        if not isinstance(samples, int) or isinstance(samples, bool) or samples < 0:
            raise TypeError(f"run.step(samples={samples!r}): the batch's samples, a whole number")
        return epoch, samples, {k: _number(k, v) for k, v in metrics.items()} or None

    def _should_stop(self, now: float, k: int) -> bool:
        if self.world == 1:
            return self.recorder.stop(now)
        if k % self.STOP_EVERY:
            return False
        import torch.distributed as dist

        local = self.recorder.stop.event.is_set() or (
            self.session.recording
            and self.recorder.stop.file is not None
            and self.recorder.stop.file.exists()
        )
        device = next((p.device for p in self.net.parameters()), torch.device("cpu"))
        if dist.get_backend() != "nccl":
            device = torch.device("cpu")
        # the epoch rides along: every rank sees the same newest epoch, and gathers the
        # per-rank figures at the same step when it changed
        flag = torch.tensor([1.0 if local else 0.0, float(self.epoch)], device=device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        stop, epoch = flag.tolist()
        if self.clock is not None and int(epoch) > self._gathered_epoch:
            self._gather(self._gathered_epoch)
            self._gathered_epoch = int(epoch)
        return bool(stop)

    def log(self, metrics: dict[str, Any]) -> None:
        if not metrics:
            raise TypeError("run.log() needs figures: run.log(val_loss=...)")
        figures = {k: _number(k, v) for k, v in metrics.items()}
        flushed = self.recorder.epoch(len(self.session.run.epochs), self.count, figures)
        if self.guard is not None:
            self.guard.check_losses(flushed)

    def request_stop(self) -> None:
        self.recorder.stop.event.set()

    # ------------------------------------------------------------------ the end
    def close(self, exc: BaseException | None) -> None:
        if self.session.closed:
            return
        _OPEN.discard(self)
        if exc is None:
            status, error = "finished", None
        elif isinstance(exc, RunStopped):
            status, error = "stopped", None
        elif isinstance(exc, KeyboardInterrupt):
            status, error = "stopped", "interrupted (KeyboardInterrupt)"
        else:
            status, error = "failed", f"{type(exc).__name__}: {exc}"
        try:
            for h in self._clock_hooks:
                h.remove()
            self._clock_hooks = []
            if self.clock is not None and (status == "finished" or isinstance(exc, RunStopped)):
                try:  # every rank ends here together (the same steps, or an agreed Stop)
                    self._gather(self.epoch)
                except Exception as gather_exc:
                    self.session.run.notes.append(
                        f"the ranks' step figures could not be gathered at the end: "
                        f"{type(gather_exc).__name__}: {gather_exc}"
                    )
                self.clock = None
            if self._hook is not None:
                self._hook.remove()
            if self.guard is not None:
                self.guard.detach()
            try:
                self.recorder.end(status, self.count, error)
            except Exception as end_exc:  # the record is written whatever this says
                self.session.run.notes.append(
                    f"the run's end could not be recorded in full: "
                    f"{type(end_exc).__name__}: {end_exc}"
                )
        finally:
            self.session.close(status, error)

    def __repr__(self) -> str:
        return f"LoopWatch(step={self.count}, {self.options!r})"


_OPEN: weakref.WeakSet[LoopWatch] = weakref.WeakSet()


@atexit.register
def _close_open_watches() -> None:
    """A watched loop left open when the interpreter exits ends as stopped, recorded."""
    for live in list(_OPEN):
        live.session.run.notes.append(
            "the process ended before the watched loop's block ended (or run.close() was called)"
        )
        live.clock = None  # no collective at exit: the other ranks may be gone
        live.close(RunStopped("the process ended"))


def watch_loop(
    model: Any,
    optimizer: Any = None,
    logdir: Any = None,
    dashboard: bool | None = None,
    **options: Any,
) -> Run:
    """See :class:`Watch` (``labkit.watch``)."""
    from labkit.train._lock import LogdirBusyError
    from labkit.train._run_session import RunSession, versions

    if not isinstance(model, torch.nn.Module):
        raise TypeError(
            f"labkit.watch(model, ...) watches a torch.nn.Module, got {type(model).__name__}"
        )
    if optimizer is not None and not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(
            f"labkit.watch(model, optimizer=...) takes a torch.optim.Optimizer (its "
            f"step is where gradients are checked), got "
            f"{type(optimizer).__name__}"
        )
    if dashboard is not None and not isinstance(dashboard, bool):
        raise TypeError(
            f"labkit.watch(dashboard={dashboard!r}): True, False or None (in a notebook)"
        )
    o = WatchOptions.build(options, "labkit.watch")
    check_process_group("labkit.watch")
    inner = getattr(model, "module", model)
    config: dict[str, Any] = {
        "model": type(inner).__name__,
        "params": sum(p.numel() for p in inner.parameters()),
        "optimizer": type(optimizer).__name__ if optimizer is not None else None,
        "lr": None,
        "guard": o.guard,
        "trace_every": o.trace_every,
        "histogram_every": o.histogram_every,
        "versions": versions(),
        **(o.config or {}),
    }
    session = RunSession(
        logdir if logdir is not None else default_logdir(model),
        source="loop",
        config=config,
        dashboard=dashboard,
        compare_with=o.compare_with,
    )
    try:
        session.open()
    except LogdirBusyError:
        here = session.logdir.resolve()
        held = [w for w in list(_OPEN) if w.session.logdir.resolve() == here]
        if not held:
            raise
        raise LogdirBusyError(
            f"a watched loop in this process still holds the logdir {session.logdir} (it "
            f"recorded {held[0].count} steps and was not ended); end it with run.close(), or "
            "watch with `with labkit.watch(...) as run:`, which always ends it"
        ) from None
    live = LoopWatch(model, optimizer, session, o)
    try:
        live.start()
    except BaseException as exc:
        live.close(exc)
        raise
    session.run._live = live
    _OPEN.add(live)
    return session.run


# ---------------------------------------------------------------------- labkit.watch
class Watch:
    """``labkit.watch``: labkit's run record, dashboard and guards for your own training.

        ``labkit.watch(model, optimizer)`` watches a plain loop and returns its
        :class:`~labkit.train.run.Run` (the record ``Lab.fit`` returns), a context manager:
        call ``run.step(loss=loss)`` once per optimizer step (tensors are read lazily, a few
        times a second: no ``.item()`` per step) and ``run.log(val_loss=...)`` for
        evaluations. In a notebook the live dashboard shows it; its Stop makes the next
        ``run.step`` raise ``RunStopped``, which the ``with`` block turns into a ``stopped``
        run. The run ends ``finished``, ``stopped`` or ``failed`` (the error named), and its
        record is in ``logdir``: ``events.jsonl``, ``run.json``, ``tensorboard/``.

        ``labkit.watch.lightning(...)`` is a ``lightning.Callback`` for your own ``Trainer``;
        ``labkit.watch.transformers(...)`` a ``transformers.TrainerCallback`` for a Hugging Face
        ``Trainer``: the same record, dashboard, guards and sampling.

        Args:
            model: The ``nn.Module`` trained (a DDP-wrapped one too).
            optimizer: Its optimizer: the guard checks gradients before each
                ``optimizer.step()`` (the weights not yet updated), and the run records the
                learning rate its param groups had at the first step.
            logdir: The run's folder (default ``labkit_runs/<model class>``); one run at a
                time (the logdir lock).
            dashboard: Show the live dashboard (None: in a notebook).
            **options: :class:`WatchOptions`:
    {options}

        Returns:
            The :class:`~labkit.train.run.Run`, live until its block ends.

        Raises:
            LogdirBusyError: another run holds the logdir.
            RuntimeError: a process of several (torchrun) without a process group.
            NonFiniteError: (from ``optimizer.step()`` or ``run.step``) the first NaN/Inf.

        Example:
            >>> with labkit.watch(model, opt, logdir="runs/mine") as run:  # doctest: +SKIP
            ...     for x, y in loader:
            ...         opt.zero_grad(); loss = F.cross_entropy(model(x), y)
            ...         loss.backward(); opt.step()
            ...         run.step(loss=loss)
            >>> trainer = lightning.Trainer(callbacks=[labkit.watch.lightning()])  # doctest: +SKIP
    """

    def __call__(
        self,
        model: torch.nn.Module,
        optimizer: torch.optim.Optimizer | None = None,
        logdir: str | os.PathLike[str] | None = None,
        dashboard: bool | None = None,
        **options: Any,
    ) -> Run:
        return watch_loop(model, optimizer, logdir, dashboard, **options)

    def lightning(
        self,
        logdir: str | os.PathLike[str] | None = None,
        dashboard: bool | None = None,
        **options: Any,
    ) -> Any:
        """A ``lightning.Callback`` recording your own ``lightning.Trainer``'s fit.

        Args:
            logdir: The run's folder (default ``labkit_runs/<LightningModule class>``).
            dashboard: Show the live dashboard (None: in a notebook).
            **options: :class:`WatchOptions`.

        Returns:
            A :class:`~labkit.train.watch_lightning.WatchCallback`; after the fit its
            ``run`` is the :class:`~labkit.train.run.Run`.
        """
        from labkit.train.watch_lightning import WatchCallback

        return WatchCallback(logdir=logdir, dashboard=dashboard, **options)

    def transformers(
        self,
        logdir: str | os.PathLike[str] | None = None,
        dashboard: bool | None = None,
        **options: Any,
    ) -> Any:
        """A ``transformers.TrainerCallback`` recording a Hugging Face ``Trainer``'s training.

        Args:
            logdir: The run's folder (default ``labkit_runs/<model class>``).
            dashboard: Show the live dashboard (None: in a notebook).
            **options: :class:`WatchOptions`.

        Returns:
            A :class:`~labkit.train.watch_transformers.WatchTrainerCallback`; after training
            its ``run`` is the :class:`~labkit.train.run.Run`.
        """
        from labkit.train.watch_transformers import WatchTrainerCallback

        return WatchTrainerCallback(logdir=logdir, dashboard=dashboard, **options)

    def __repr__(self) -> str:
        return "labkit.watch"


Watch.__doc__ = (Watch.__doc__ or "").replace("{options}", args_doc(WatchOptions, " " * 12))
watch = Watch()
