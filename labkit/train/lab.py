"""Lab: the notebook hub. It holds a model, its data, a Recipe, traces and runs, and delegates.

``Lab.fit`` runs a real ``lightning.Trainer`` with the Recipe applied (by
``labkit.optimize.apply``, the one place a Recipe is applied), on one process, on several
forked CPU/GPU processes from a notebook, or under ``torchrun``; the live dashboard, the
TensorBoard logs, the checkpoints and the ``Run`` record are all fed by the same events.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import logging
import os
import signal
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import torch

from labkit.train import _launch
from labkit.train._events import EVENTS_FILE, STOP_FILE, EventLog, EventTail
from labkit.train._exploration import exploration
from labkit.train.fit_options import FitOptions
from labkit.train.run import Run

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


@contextlib.contextmanager
def _no_logging(module: Any) -> Iterator[None]:
    """``module.log``/``log_dict`` as no-ops for a while: a ``training_step`` run outside a
    fit (Lab.trace) would raise in them (no Trainer, or a finished one's loop)."""
    saved = {k: module.__dict__[k] for k in ("log", "log_dict") if k in module.__dict__}
    module.__dict__["log"] = module.__dict__["log_dict"] = lambda *a, **k: None
    try:
        yield
    finally:
        for k in ("log", "log_dict"):
            module.__dict__.pop(k, None)
        module.__dict__.update(saved)


def _step_loss(out: Any) -> Any:
    """The loss a LightningModule's ``training_step`` returned (a tensor or ``{"loss": ...}``)."""
    if isinstance(out, Mapping):
        out = out.get("loss")
    if not isinstance(out, torch.Tensor):
        raise TypeError(
            f"training_step returned {type(out).__name__}, not a loss tensor or a dict with "
            "'loss': Lab.trace traces the step that trains"
        )
    return out


class Lab:
    """The notebook hub: a model, its data, a Recipe, the last traces and runs.

    Args:
        model: A plain ``nn.Module`` (wrapped into a LightningModule with ``loss``,
            ``optimizer`` and ``metrics``) or your own ``LightningModule`` (used as is).
        data: A pair ``(train, val)`` of DataLoaders or Datasets, one DataLoader/Dataset,
            a ``LightningDataModule`` or a PyG dataset.
        loss: ``loss(output, target) -> scalar`` (required for a plain ``nn.Module``), or
            ``"model"`` when the model computes its own loss (a Hugging Face model given
            its labels, a nanoGPT ``forward(idx, targets) -> (logits, loss)``): the whole
            batch goes in (a dict as keywords, a tuple as positional inputs) and the loss
            is taken from the output (see :func:`labkit.train.module.output_loss`).
        optimizer: A ``torch.optim`` class, a name (``"adam"``, ``"adamw"``, ``"sgd"``,
            ``"rmsprop"``) or ``params -> optimizer``.
        lr: Learning rate (``lab.lr_find()`` can set it).
        optimizer_kwargs: Extra optimizer arguments (``momentum=0.9``, ...).
        metrics: ``{name: fn(output, target)}`` logged for training and validation.
        recipe: A ``labkit.Recipe`` (or its dict); the default changes nothing.
        step: ``step(model, batch) -> (output, target)`` for batches that are not
            ``(x, y)`` pairs.
        batch_size: Batch size when ``data`` holds Datasets.
        num_workers: Loader workers when ``data`` holds Datasets.
        logdir: Where runs write checkpoints, TensorBoard logs and events
            (default ``./labkit_runs/<model class>``).

    Returns:
        A Lab; ``lab.fit(...)`` returns a :class:`~labkit.train.Run`.

    Example:
        >>> lab = labkit.Lab(model, (train_ds, val_ds), loss=F.cross_entropy,
        ...                  optimizer="adam", lr=1e-3, metrics={"acc": accuracy})  # doctest: +SKIP
        >>> run = lab.fit(max_epochs=3)               # one process  # doctest: +SKIP
        >>> run = lab.fit(max_epochs=3, devices=2)    # DDP, 2 CPU processes  # doctest: +SKIP
        >>> run = lab.fit(max_epochs=6, resume=True)  # from the last checkpoint  # doctest: +SKIP
    """

    def __init__(
        self,
        model: torch.nn.Module,
        data: Any = None,
        *,
        loss: Callable[[Any, Any], torch.Tensor] | str | None = None,
        optimizer: Any = "adam",
        lr: float = 1e-3,
        optimizer_kwargs: Mapping[str, Any] | None = None,
        metrics: Mapping[str, Callable[[Any, Any], Any]] | None = None,
        recipe: Any = None,
        step: Callable[[torch.nn.Module, Any], tuple[Any, Any]] | None = None,
        batch_size: int = 32,
        num_workers: int = 0,
        logdir: str | os.PathLike[str] | None = None,
    ) -> None:
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"Lab needs a torch.nn.Module, got {type(model).__name__}")
        data_notes: list[str] = []
        if type(data).__module__.startswith("torch_geometric."):
            from labkit.gnn.data import for_lab  # one graph with masks: node classification

            data_notes = _check_masks(data)
            data = for_lab(data)
        if step is None:
            step = getattr(data, "lab_step", None)  # data that knows its batches' step
        if isinstance(loss, str):
            if loss != "model":
                raise ValueError(
                    f'Lab(loss={loss!r}): a loss is fn(output, target), or "model" when the '
                    "model returns its own loss"
                )
            from labkit.train.module import model_step, output_loss

            loss, step = output_loss, step or model_step
        self.model = model
        self.data = data
        self._data_notes = data_notes  # sentences for every Run (a graph without val_mask)
        self.loss = loss
        self.optimizer = optimizer
        self.lr = lr
        self.optimizer_kwargs = dict(optimizer_kwargs or {})
        self.metrics = dict(metrics or {})
        self.recipe = recipe
        self.step = step
        self.batch_size = batch_size
        self.num_workers = num_workers
        self.logdir = Path(logdir) if logdir else Path("labkit_runs") / type(model).__name__
        self.traces: list[Any] = []
        self.runs: list[Run] = []
        self.dashboard: Any = None
        self._views: list[Any] = []
        self._stop = threading.Event()
        if not self._is_lightning() and loss is None:
            raise TypeError(
                f"Lab({type(model).__name__}, ...) needs loss=fn(output, target) for a plain "
                'nn.Module, loss="model" when the model returns its own loss (a Hugging Face '
                "model given labels), or your own LightningModule"
            )

    # ------------------------------------------------------------------ state
    @property
    def recipe(self) -> Any:
        """The Recipe applied by ``fit`` (a ``labkit.optimize.Recipe``)."""
        return self._recipe

    @recipe.setter
    def recipe(self, value: Any) -> None:
        from labkit.optimize.recipe import Recipe

        if value is None:
            value = Recipe()
        elif isinstance(value, Mapping):
            value = Recipe.from_dict(dict(value))
        elif not isinstance(value, Recipe):
            raise TypeError(f"recipe must be a labkit.Recipe or a dict, got {type(value).__name__}")
        self._recipe = value

    @property
    def last_run(self) -> Run | None:
        """The most recent run, or None."""
        return self.runs[-1] if self.runs else None

    def _is_lightning(self) -> bool:
        return any(c.__name__ == "LightningModule" and c.__module__.startswith("lightning")
                   for c in type(self.model).__mro__)  # fmt: skip

    def __getstate__(self) -> dict[str, Any]:
        # pickled for the subprocess launch: no widgets, threads or run history
        state = dict(self.__dict__)
        state.update(dashboard=None, _views=[], _stop=None, runs=[], traces=[])
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._stop = threading.Event()

    # ------------------------------------------------------------------ pieces
    def module(self, *, copy: bool = True) -> Any:
        """The LightningModule ``fit`` trains.

        Args:
            copy: Train a copy of the model (the Recipe applied to it). With ``False`` and a
                Recipe that changes nothing, the model itself is trained (what ``fit``
                does, so an optimizer that refers to the model trains it); a Recipe always
                applies to a copy, and the optimizer's parameters are mapped onto it.
        """
        from labkit.optimize import apply
        from labkit.train.module import LabModule

        net = self.model if not copy and self.recipe.is_default else apply(self.model, self.recipe)
        if self._is_lightning():
            return net
        return LabModule(
            net, loss=self._plain_loss(), optimizer=self.optimizer, lr=self.lr,
            optimizer_kwargs=self.optimizer_kwargs, metrics=self.metrics, step=self.step,
            recipe=self.recipe.to_dict(), original=self.model,
        )  # fmt: skip

    def datamodule(self, seed: int = 0) -> Any:
        """The data as a ``LightningDataModule`` (see :func:`labkit.train.data.as_datamodule`)."""
        from labkit.train.data import as_datamodule

        if self.data is None:
            raise ValueError("this Lab has no data: Lab(model, (train, val), loss=...)")
        return as_datamodule(self.data, batch_size=self.batch_size, num_workers=self.num_workers,
                             seed=seed)  # fmt: skip

    def _plain_loss(self) -> Callable[[Any, Any], torch.Tensor]:
        """The loss of a plain ``nn.Module`` (``__init__`` requires one for it)."""
        if self.loss is None:
            raise ValueError("this Lab has no loss: Lab(model, data, loss=...)")
        return self.loss

    @exploration
    def check(self, dm: Any = None) -> None:
        """One-batch dry run (train and val batch) that names the module and shapes on a mismatch.

        Raises:
            labkit.train.ShapeCheckError: on a shape mismatch in the model or the loss.
        """
        if self._is_lightning():
            return  # a user LightningModule's step is its own; Lightning's sanity check runs
        from labkit.train.data import first_batch
        from labkit.train.guards import dry_run
        from labkit.train.module import default_step, dict_batch_note

        dm = dm if dm is not None else self.datamodule()
        with torch.random.fork_rng(devices=[]):
            train = first_batch(dm.train_dataloader())
        loss = self._plain_loss()
        dry_run(self.model, train, step=self.step or default_step, loss=loss, stage="train")
        note = dict_batch_note(train, self.step, loss)  # a dict batch: which keys went where
        if note is not None and self.last_run is not None and not self.last_run.done:
            self.last_run.notes.append(note)  # named in the notes of the fit running this check
        val_loader = getattr(dm, "val", None) if hasattr(dm, "train") else None
        if val_loader is None and not hasattr(dm, "train"):
            val_loader = dm.val_dataloader() if _overrides(dm, "val_dataloader") else None
        if val_loader is not None and not (isinstance(val_loader, list) and not val_loader):
            with torch.random.fork_rng(devices=[]):
                val = first_batch(val_loader)
            dry_run(self.model, val, step=self.step or default_step, loss=loss, stage="val")

    @exploration
    def trace(self, *, mode: str = "full", warmup: int = 1, repeat: int = 5) -> Any:
        """Trace one training step (forward, loss, backward) on the first batch.

        As :func:`labkit.trace`: one recording for the graph, FLOPs and memory, then
        ``warmup`` + ``repeat`` timing-only passes whose medians are the times shown. The
        model is restored afterwards; the trace is kept in ``lab.traces``.
        """
        from labkit.trace.api import check_not_meta
        from labkit.trace.step import Step, record_step
        from labkit.train.data import first_batch
        from labkit.train.module import default_step

        dm = self.datamodule()
        with torch.random.fork_rng(devices=[]):  # setup's random_split draws none of the user's
            if self._is_lightning() and hasattr(dm, "setup"):
                dm.setup("fit")  # a user's LightningDataModule builds its datasets here
            batch = first_batch(dm.train_dataloader())
        check_not_meta("Lab.trace", self.model, (batch,), {})  # nothing to time on meta
        if self._is_lightning():  # the user's own training_step is the step
            module: Any = self.model  # a LightningModule
            user_step = Step(module, (batch,), forward=lambda b: module.training_step(b, 0),
                             loss=_step_loss)  # fmt: skip
            with _no_logging(module):  # self.log() outside a fit: nothing to log to
                trace = record_step(user_step, mode=mode, warmup=warmup, repeat=repeat)
        else:
            step = self.step or default_step
            loss = self._plain_loss()
            user_step = Step(self.model, (batch,), forward=lambda b: step(self.model, b),
                             loss=lambda out: loss(*out))  # fmt: skip
            trace = record_step(user_step, mode=mode, warmup=warmup, repeat=repeat)
        self.traces.append(trace)
        return trace

    # ------------------------------------------------------------------ fit
    def fit(self, options: FitOptions | None = None, /, **overrides: Any) -> Run:
        """Train with a real ``lightning.Trainer`` and the Recipe applied.

        The same call works in a notebook, in a script and under ``torchrun``:

        - one process (``devices=1``): trains in this process;
        - several processes (``devices=2``, CPU or GPU): forked from this process (DDP over
          gloo on CPU, NCCL on GPU), or, when CUDA is already initialised here, run in a
          fresh subprocess. Rank 0's metrics stream back to this process's dashboard;
        - under ``torchrun --nproc-per-node=N script.py`` (or SLURM): the script calls
          ``lab.fit(devices=N, num_nodes=M, strategy="ddp", ...)`` (or
          :func:`labkit.train.fit_from_args`) and Lightning joins the processes torchrun
          made; ``devices * num_nodes`` must equal torchrun's world size.

        Determinism contract: ``seed`` seeds everything at the start and ``seed + epoch``
        right before the first step of every epoch (after its loader yielded the first
        batch), and shuffling uses ``seed + epoch``; so on one process a
        fit equals a hand-written loop that does the same (bitwise in fp32), and a run
        resumed from an end-of-epoch checkpoint repeats an uninterrupted run's losses.

        Files in ``logdir``: ``checkpoints/last.ckpt`` (after every epoch, written
        atomically, holds the Recipe, loads with ``weights_only=True``), ``tensorboard/``,
        ``events.jsonl`` (the event stream), ``run.json`` (the Run record), ``traces/``.

        Args:
            options: A :class:`~labkit.train.fit_options.FitOptions` (default: its
                defaults); the keywords below override it. They are its fields:
            {fit_options}

        Returns:
            The :class:`~labkit.train.Run` record (also in ``lab.runs``).

        Raises:
            FitOptionError: an option of the wrong type or value (before anything runs).
            LogdirBusyError: another fit holds the logdir (named by pid and host).
            CheckpointError: the checkpoint resumed from cannot be read, or does not fit
                the model, the optimizer or (``on_change="refuse"``) the Lab's lr/Recipe.
            OptimizerCoverageError: the optimizer misses trainable parameters (named).
            ShapeCheckError: the dry run found a mismatch (before training starts).
            NonFiniteError: a loss or gradient went NaN/Inf.
            DDPWorkerError: a training process died or raised; names its rank.

        Example:
            >>> run = lab.fit(max_epochs=2, devices=2, seed=0)  # doctest: +SKIP
            >>> run.losses[-1], run.last_checkpoint              # doctest: +SKIP
        """
        o = FitOptions.build(options, overrides)
        self._refuse_while_running()
        logdir = Path(o.logdir) if o.logdir else self.logdir
        from labkit.train._lock import LogdirLock
        from labkit.train._preflight import check_logdir
        from labkit.train.checkpoint import CHECKPOINTS, LAST

        check_logdir(  # created, writable, room for the first checkpoint: before any work
            logdir, self.model, optimizer=None if self._is_lightning() else self.optimizer,
            optimizer_kwargs=self.optimizer_kwargs)  # fmt: skip
        plan = _launch.plan(
            devices=o.devices, strategy=o.strategy, num_nodes=o.num_nodes, launch=o.launch
        )
        last = logdir / CHECKPOINTS / LAST
        # ckpt_path="last" is labkit's own last checkpoint (Lightning's "last" looks for
        # its ModelCheckpoint, which Lab does not use): the same as resume=True
        resume = o.resume or _is_last(o)
        ckpt: str | None = str(o.ckpt_path) if o.ckpt_path and not _is_last(o) else None
        if ckpt is None and resume and last.exists():
            ckpt = str(last)
        lock = LogdirLock.acquire(logdir)  # one fit per logdir, from here to the end
        try:
            module, notes = self._preflight(plan, o, ckpt)
            run, dash, tail = self._start_run(o, plan, logdir, ckpt, resume, [*lock.notes, *notes])
        except BaseException:
            lock.release()
            raise

        def body() -> None:
            exc: BaseException | None = None
            try:
                tail.start()
                if plan.mode == "subprocess":
                    self._fit_subprocess(o, ckpt, logdir)
                else:
                    self._fit_here(plan, o, ckpt=ckpt, logdir=logdir, module=module)
            except BaseException as e:
                exc = self._translate(e)
            finally:
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
            if exc is not None:
                raise exc

        if o.background:

            def bg() -> None:
                with contextlib.suppress(BaseException):
                    body()

            try:
                threading.Thread(target=bg, name="labkit-fit", daemon=True).start()
            except BaseException:
                lock.release()
                run._finish(None)
                raise
            return run
        body()
        return run

    def _start_run(self, o: FitOptions, plan: _launch.Plan, logdir: Path, ckpt: str | None,
                   resume: bool, notes: list[str]) -> tuple[Run, Any, EventTail]:  # fmt: skip
        """The Run record, the dashboard and the events tail of a fit about to start."""
        from labkit.train.checkpoint import CHECKPOINTS, LAST

        last = logdir / CHECKPOINTS / LAST
        config = {
            "max_epochs": o.max_epochs, "max_steps": o.max_steps, "devices": o.devices,
            "accelerator": o.accelerator, "strategy": o.strategy if isinstance(o.strategy, str)
            else type(o.strategy).__name__, "num_nodes": o.num_nodes, "seed": o.seed,
            "resume": resume,
            "ckpt_path": ckpt, "launch": plan.mode, "processes": plan.processes,
            "recipe": self.recipe.to_dict(), "lr": self.lr, "source": "lab",
            "batch_size": self.batch_size, "optimizer": _optimizer_name(self.optimizer),
            "versions": _versions(),
        }  # fmt: skip
        run = Run(logdir=str(logdir), config=config,
                  notes=[plan.reason, *self._data_notes, *notes])  # fmt: skip
        from labkit.optimize.recipe_record import record_recipe

        record_recipe(self.recipe, source="Lab.fit")  # read by `labkit promote`; no-op outside
        if resume and ckpt is None:
            how = "resume=True" if o.resume else "ckpt_path='last'"
            run.notes.append(f"{how} but {last} does not exist yet: starting fresh")
        self.runs.append(run)
        self._stop.clear()
        (logdir / STOP_FILE).unlink(missing_ok=True)

        try:
            dash = self._dashboard(o.dashboard, run)
            handler = self._handler(run, dash)
            events = logdir / EVENTS_FILE
            offset = events.stat().st_size if events.exists() else 0
        except BaseException as exc:  # the run never started: it does not block the next fit
            run.status, run.error = "failed", f"{type(exc).__name__}: {exc}"
            run._finish(exc)
            raise
        return run, dash, EventTail(events, handler, offset=offset)

    def _refuse_while_running(self) -> None:
        running = self.last_run
        if running is not None and not running.done:
            raise RuntimeError(
                f"this Lab is still fitting ({running!r}); a second fit would share its model "
                "and logdir: wait for it (run.wait()) or stop it (lab.stop()) first")  # fmt: skip

    def _preflight(
        self, plan: _launch.Plan, o: FitOptions, ckpt: str | None
    ) -> tuple[Any, list[str]]:
        """The module to train, its optimizer checked, and the checkpoint checked against both.

        Runs before any file is written. Returns the module (``None`` for a subprocess
        launch, which builds its own) and notes for the Run.
        """
        from labkit.train import _resume

        if plan.mode == "subprocess":
            module = None
            if ckpt is not None:  # the weights, at least, are checked here
                _resume.load_for_resume(ckpt)
            return module, []
        module = self.module(copy=False)
        optimizer = module.prepare_optimizer() if hasattr(module, "prepare_optimizer") else None
        if ckpt is None:
            return module, []
        ck = _resume.load_for_resume(ckpt)
        path = Path(ckpt)
        _resume.check_weights(ck, module.state_dict(), path, strict_names=self.recipe.is_default)
        if optimizer is None:
            return module, []
        _resume.check_optimizer(ck, optimizer, path)
        diff = _resume.changes(ck, lr=self.lr if _builds_lr(self.optimizer) else None,
                               recipe=self.recipe.to_dict())  # fmt: skip
        return module, _resume.apply_rule(diff, o.on_change, path, module)

    def _translate(self, exc: BaseException) -> BaseException:
        err = _launch.worker_error(exc)
        if err is not None:
            err.__cause__ = exc
            return err
        return exc

    def _fit_subprocess(self, o: FitOptions, ckpt: str | None, logdir: Path) -> None:
        fit_kwargs = o.replace(
            ckpt_path=ckpt, resume=False, logdir=str(logdir), dashboard=False, background=False
        ).to_kwargs()
        proc = _launch.run_in_subprocess(self, fit_kwargs, logdir)
        try:
            state = _launch.subprocess_result(proc, logdir)
        finally:
            if proc.poll() is None:
                proc.kill()
        self.model.load_state_dict(state)

    def _fit_here(
        self, plan: _launch.Plan, o: FitOptions, *, ckpt: str | None, logdir: Path, module: Any
    ) -> None:
        import lightning.pytorch as pl
        from lightning.pytorch.loggers import TensorBoardLogger

        from labkit.train._callback import EpochSeed, LabCallback, LabCheckpoint, seed_all
        from labkit.train._callback_group import CallbackGroup
        from labkit.train._progress import RankProgress
        from labkit.train._tensorboard import TB_DIR, hparams_of
        from labkit.train.checkpoint import CHECKPOINTS, AtomicCheckpointIO
        from labkit.train.guards import NonFiniteGuard, check_loaders

        seed_all(o.seed)
        dm = self.datamodule(o.seed)
        check_loaders(dm)  # an empty train/val loader is named, with or without a dry run
        if o.dry_run:
            self.check(dm)
        sink = EventLog(logdir / EVENTS_FILE)
        lab_cb = LabCallback(
            sink, stop_event=self._stop, stop_file=logdir / STOP_FILE,
            stop_every=1 if plan.processes <= 1 else 10, trace_every=o.trace_every,
            histogram_every=o.histogram_every, logdir=logdir, resumed_from=ckpt,
            hparams=hparams_of(self.recipe.to_dict(), {"seed": o.seed, "lr": self.lr,
                                                        "max_epochs": o.max_epochs}),
        )  # fmt: skip
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
            callbacks.append(NonFiniteGuard(
                check_grads=self.recipe.precision != "16-mixed",
                step=getattr(module, "step_fn", None),
                loss=getattr(module, "loss_fn", None)))  # fmt: skip
        group = CallbackGroup(callbacks)  # Lightning dispatches each hook once for all four
        n_batches = _len_or_none(dm)
        kw: dict[str, Any] = {
            "max_epochs": o.max_epochs, "max_steps": o.max_steps, "accelerator": o.accelerator,
            "devices": o.devices, "num_nodes": o.num_nodes,
            "strategy": _launch.ddp_strategy(plan, o.strategy, o.ddp_timeout),
            "precision": _PRECISION[self.recipe.precision],
            "logger": TensorBoardLogger(save_dir=str(logdir), name=TB_DIR,
                                        default_hp_metric=False),
            "callbacks": [group], "plugins": [AtomicCheckpointIO()],
            "enable_model_summary": False, "enable_checkpointing": False,
            "enable_progress_bar": not _launch.in_notebook(),
            "num_sanity_val_steps": 0,
            "log_every_n_steps": max(1, min(o.log_every, n_batches or o.log_every)),
            "default_root_dir": str(logdir),
        }  # fmt: skip
        if o.limit_train_batches is not None:
            kw["limit_train_batches"] = o.limit_train_batches
        if o.limit_val_batches is not None:
            kw["limit_val_batches"] = o.limit_val_batches
        trainer_kwargs = dict(o.trainer_kwargs or {})
        extra = trainer_kwargs.pop("callbacks", [])  # added to labkit's, not instead
        kw["callbacks"] += [extra] if isinstance(extra, pl.Callback) else list(extra)
        kw.update(trainer_kwargs)
        sigint = signal.getsignal(signal.SIGINT)
        modes = [(m, m.training) for m in self.model.modules()]  # trained in place: kept
        try:
            with _quiet_lightning(), _launch.rendezvous_env(plan):
                trainer = pl.Trainer(**kw)
                trainer.fit(module, datamodule=dm, ckpt_path=ckpt)
        except Exception as exc:
            if progress is not None:
                progress.attach(exc)  # where each rank was, for _launch.worker_error
            raise
        except SystemExit:
            # Lightning turns Ctrl-C / "interrupt kernel" into sys.exit(1) after a graceful
            # shutdown; in a notebook that would look like a crash: report it as stopped
            sink(
                {
                    "type": "end",
                    "status": "stopped",
                    "t": time.time(),
                    "error": "interrupted (KeyboardInterrupt); the last epoch checkpoint is kept",
                }
            )
        finally:
            if threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGINT, sigint)  # Lightning leaves SIGINT ignored
            sink.close()
            for m, mode in modes:
                m.training = mode
        self._take_weights(module)

    def _take_weights(self, module: Any) -> None:
        net = getattr(module, "net", module) if not self._is_lightning() else module
        self.trained_model = net
        if net is self.model:  # trained in place
            return
        try:
            self.model.load_state_dict(net.state_dict())
        except Exception as exc:  # e.g. a quantized model's state_dict: keep the trained copy
            warnings.warn(
                f"the trained weights could not be copied back into lab.model ({exc}); the "
                "trained model is lab.trained_model", stacklevel=3)  # fmt: skip

    # ------------------------------------------------------------------ live views
    def _dashboard(self, want: bool | None, run: Run) -> Any:
        if want is None:
            want = _launch.in_notebook()
        if not want:
            return None
        from labkit import _display
        from labkit.train.run_table import earlier_runs

        # the live view is labkit.views' Dashboard, found through the display registry.
        # Stop posts to the server extension, which creates the stop file every rank polls;
        # the latest runs beside this one are overlaid faintly
        dashboard = _display.view("train.dashboard")
        dash = dashboard(on_stop=self.stop, stop_file=Path(run.logdir) / STOP_FILE,
                         earlier=earlier_runs(run.logdir))  # fmt: skip
        self.dashboard = dash
        if _launch.in_notebook():
            from IPython.display import display

            display(dash)
        return dash

    def _handler(self, run: Run, dash: Any) -> Callable[[dict[str, Any]], None]:
        views = list(self._views)

        def handle(event: dict[str, Any]) -> None:
            run.add_event(event)
            if dash is not None:
                dash.push(event)
            if event.get("type") == "trace" and views:
                from labkit.trace import Trace

                trace = Trace.load(event["path"])
                self.traces.append(trace)
                for v in views:
                    v.update(trace)

        return handle

    @exploration
    def link(self, view: Any) -> Any:
        """Re-colour ``view`` (a GraphView/ProfileView) with each trace sampled while fitting.

        Sampling is set with ``fit(trace_every=N)``. Returns ``view``.
        """
        self._views.append(view)
        return view

    def stop(self) -> None:
        """Stop a running fit after the current step, on every rank, keeping a checkpoint."""
        self._stop.set()
        run = self.last_run
        if run is not None and run.logdir:
            with contextlib.suppress(OSError):
                (Path(run.logdir) / STOP_FILE).touch()

    # ------------------------------------------------------------------ tools
    @exploration(unless="apply")
    def lr_find(self, *, min_lr: float = 1e-6, max_lr: float = 1.0, num_training: int = 100,
                seed: int = 0, apply: bool = False, **kwargs: Any) -> Any:  # fmt: skip
        """Lightning's learning-rate finder (``Tuner.lr_find``) on this Lab's model and data.

        The model is left as it was. ``result.plot(suggest=True)`` draws loss against
        learning rate; ``result.suggestion()`` is Lightning's pick.

        Args:
            min_lr: Smallest learning rate tried.
            max_lr: Largest learning rate tried.
            num_training: Steps in the sweep.
            seed: Seed of the sweep.
            apply: Set ``lab.lr`` to the suggestion.
            **kwargs: More ``Tuner.lr_find`` arguments (``mode``, ``early_stop_threshold``).

        Returns:
            Lightning's ``_LRFinder`` (``results``, ``suggestion()``, ``plot()``).
        """
        import lightning.pytorch as pl
        from lightning.pytorch.tuner.tuning import Tuner

        from labkit.train._callback import seed_all

        module = self.module()
        if not hasattr(module, "lr"):
            raise TypeError("lr_find needs a module with an `lr` attribute; for your own "
                            "LightningModule add self.lr and use it in "
                            "configure_optimizers")  # fmt: skip
        seed_all(seed)
        tmp = self.logdir / "lr_find"
        with _quiet_lightning():
            # the sweep's Trainer needs no logger, checkpoint or progress bar; the tuner
            # stops it after num_training steps (max_epochs=-1: no epoch limit)
            trainer = pl.Trainer(accelerator="auto", devices=1, logger=False, max_epochs=-1,
                                 enable_checkpointing=False, enable_progress_bar=False,
                                 enable_model_summary=False, default_root_dir=str(tmp),
                                 precision=_PRECISION[self.recipe.precision])  # fmt: skip
            finder = Tuner(trainer).lr_find(module, datamodule=self.datamodule(seed), min_lr=min_lr,
                                            max_lr=max_lr, num_training=num_training,
                                            update_attr=False, **kwargs)  # fmt: skip
        suggested = finder.suggestion() if finder is not None else None
        if apply and suggested is not None:
            self.lr = float(suggested)
        return finder

    @exploration
    def scaling(self, *, devices: Any = (1, 2), steps: int = 30, **kwargs: Any) -> Any:
        """Short fits at each process count in ``devices``: throughput, efficiency, comm share.

        See :func:`labkit.train.scaling.scaling` (``accelerator``, ``logdir``, ``threads``
        and ``Lab.fit`` options go in ``kwargs``). ``lab.model`` is left as it was.

        Returns:
            A :class:`~labkit.train.scaling.Scaling`; ``print(result.summary())``.
        """
        from labkit.train.scaling import scaling

        return scaling(self, devices=devices, steps=steps, **kwargs)

    @exploration
    def tensorboard(self) -> str:
        """Where the TensorBoard logs are and how to open them (printed and returned)."""
        from labkit.train._tensorboard import how_to_open

        text = how_to_open(self.last_run.logdir if self.last_run else self.logdir)
        print(text)
        return text

    def load(self, path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
        """Load a checkpoint's weights into ``lab.model`` (default: the last one); returns it."""
        from labkit.train.checkpoint import CHECKPOINTS, LAST, load_checkpoint

        p = Path(path) if path else self.logdir / CHECKPOINTS / LAST
        ckpt = load_checkpoint(p)
        state = ckpt["state_dict"]
        if not self._is_lightning():
            state = {k.removeprefix("net."): v for k, v in state.items()}
        self.model.load_state_dict(state)
        return ckpt

    def __repr__(self) -> str:
        loss = getattr(self.loss, "__name__", type(self.loss).__name__) if self.loss else None
        opt = self.optimizer if isinstance(self.optimizer, str) else getattr(
            self.optimizer, "__name__", type(self.optimizer).__name__)  # fmt: skip
        return (
            f"Lab(model={type(self.model).__name__}, loss={loss}, optimizer={opt!r}, lr={self.lr}, "
            f"recipe={self.recipe!r}, runs={len(self.runs)}, traces={len(self.traces)}, "
            f"logdir={str(self.logdir)!r})"
        )


def _optimizer_name(optimizer: Any) -> str:
    if isinstance(optimizer, str):
        return optimizer
    if isinstance(optimizer, torch.optim.Optimizer):
        return type(optimizer).__name__
    return str(getattr(optimizer, "__name__", type(optimizer).__name__))


def _versions() -> dict[str, str]:
    """labkit, torch and lightning versions, for the run record."""
    import importlib.metadata

    import labkit

    out = {"labkit": labkit.__version__, "torch": torch.__version__}
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        out["lightning"] = importlib.metadata.version("lightning")
    return out


def _check_masks(data: Any) -> list[str]:
    """One PyG graph (a ``Data``, or a dataset of one graph) must say which nodes train;
    returns a note when it has no ``val_mask`` (no validation runs)."""
    from torch_geometric.data.data import BaseData  # data is PyG's: it is imported

    graph = data
    if not isinstance(graph, BaseData):  # a dataset (its attributes reach its graphs)
        try:
            graph = data[0] if len(data) == 1 else None
        except (TypeError, IndexError, KeyError):
            graph = None
    if graph is None or not hasattr(graph, "edge_index"):
        return []  # many graphs: graph-level batches, not node classification
    missing = [m for m in ("train_mask", "val_mask") if getattr(graph, m, None) is None]
    if "train_mask" in missing:
        nodes = getattr(graph, "num_nodes", "?")
        raise ValueError(
            f"this graph ({nodes} nodes) has no {' and no '.join(missing)}: Lab trains node "
            "classification on the nodes of data.train_mask (and validates on data.val_mask). "
            "Add boolean masks of length num_nodes (e.g. torch_geometric.transforms."
            "RandomNodeSplit()(data)), or pass a DataLoader of graphs")  # fmt: skip
    if missing:
        return ["the graph has no val_mask: no validation runs (val_* curves stay empty); add "
                "one to see val_loss"]  # fmt: skip
    return []


def _builds_lr(optimizer: Any) -> bool:
    """Whether ``lab.lr`` reaches the optimizer (a name or class; not a factory/instance)."""
    return isinstance(optimizer, str | type)


def _is_last(o: FitOptions) -> bool:
    return o.ckpt_path is not None and str(o.ckpt_path) == "last"


# Lab.fit's keywords and their docs are FitOptions' fields (written once, in fit_options.py)
Lab.fit.__signature__ = FitOptions.signature(  # type: ignore[attr-defined]  # inspect reads it
    [
        inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY),
        inspect.Parameter("options", inspect.Parameter.POSITIONAL_ONLY, default=None),
    ]
)
Lab.fit.__doc__ = (Lab.fit.__doc__ or "").replace(
    " " * 12 + "{fit_options}", FitOptions.args_doc(" " * 12)
)


def _overrides(dm: Any, name: str) -> bool:
    import lightning.pytorch as pl

    return getattr(type(dm), name) is not getattr(pl.LightningDataModule, name)


def _len_or_none(dm: Any) -> int | None:
    loader = getattr(dm, "train", None)
    try:
        return len(loader) if loader is not None else None
    except TypeError:
        return None


def fit_from_args(
    lab: Lab,
    argv: list[str] | None = None,
    *,
    description: str | None = None,
    script_options: argparse.ArgumentParser | None = None,
    **fit_kwargs: Any,
) -> Run:
    """Train ``lab`` with ``fit_kwargs`` overridden by the command line: promoted scripts' entry.

    The command line is generated from :class:`~labkit.train.fit_options.FitOptions`
    (``--max-epochs``, ``--devices``, ``--ckpt-path last``, ...) plus ``--precision`` (the
    Recipe's) and ``--limit-batches``. Works as ``python train.py --max-epochs 3`` and under
    ``torchrun --nproc-per-node 2 train.py --devices 2 --strategy ddp``. A script shows no
    dashboard and does not return before training ends.

    Args:
        lab: The Lab to fit.
        argv: Arguments (default ``sys.argv[1:]``).
        description: The ``--help`` header (a script passes its docstring).
        script_options: The script's own options (its ``parameters`` cell's values, read
            by the script when it starts): accepted and listed in ``--help`` beside the
            fit options.
        **fit_kwargs: The script's own fit options (the notebook's training call).

    Returns:
        The Run.

    Example:
        >>> fit_from_args(lab, ["--max-epochs", "2"], seed=1)  # doctest: +SKIP
    """
    from labkit.train.fit_options import parse_fit_args

    FitOptions.build(None, fit_kwargs, where="fit_from_args")  # unknown names fail here
    parents = [script_options] if script_options is not None else []
    overrides, script = parse_fit_args(
        argv, defaults=fit_kwargs, description=description, parents=parents
    )
    if script.get("precision") is not None:
        lab.recipe = lab.recipe.replace(precision=str(script["precision"]))
    options = {**fit_kwargs, **overrides, "dashboard": False, "background": False}
    return lab.fit(**options)
