"""Lab: the notebook hub. It holds a model, its data, a Recipe, traces and runs, and delegates.

``Lab.fit`` runs a real ``lightning.Trainer`` with the Recipe applied (by
``labkit.optimize.apply``, the one place a Recipe is applied), on one process, on several
forked CPU/GPU processes from a notebook, or under ``torchrun``; the live dashboard, the
TensorBoard logs, the checkpoints and the ``Run`` record are all fed by the same events.

The Lab holds the user's choices and delegates each concern to one part (as Lightning's
``Trainer`` delegates to its connectors, ``_CheckpointConnector(trainer)``), each a
small class that reads the Lab and keeps no state of its own:

- data and loaders: :class:`~labkit.train._lab_data.LabData` (``lab._loaders``);
- optimizer and Recipe binding: :class:`~labkit.train._lab_optim.LabBinding`
  (``lab._binding``);
- checkpoint and resume: :class:`~labkit.train._lab_checkpoint.LabCheckpoints`
  (``lab._checkpoints``);
- launch and ranks: :class:`~labkit.train._lab_launch.LabLaunch` (``lab._launcher``);
- run record, events and dashboard: :class:`~labkit.train._lab_events.LabEvents`
  (``lab._events``);
- the looking tools (``trace``, ``lr_find``): :mod:`labkit.train._lab_tools`.
"""

from __future__ import annotations

import argparse
import inspect
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import torch

from labkit.train import _launch
from labkit.train._exploration import exploration
from labkit.train._lab_checkpoint import LabCheckpoints
from labkit.train._lab_data import LabData, prepare
from labkit.train._lab_events import LabEvents
from labkit.train._lab_launch import LabLaunch
from labkit.train._lab_optim import LabBinding, as_recipe, is_lightning, model_loss
from labkit.train._lab_tools import _no_logging as _no_logging  # guards.replay_step
from labkit.train._lab_trainer import _quiet_lightning as _quiet_lightning  # tests, benchmarks
from labkit.train.fit_options import FitOptions
from labkit.train.run import Run

if TYPE_CHECKING:
    import lightning.pytorch as pl
    from lightning.pytorch.tuner.lr_finder import _LRFinder

    from labkit.optimize.recipe import Recipe
    from labkit.trace.model import Trace
    from labkit.train.module import OptimizerArg
    from labkit.train.scaling import Scaling

V = TypeVar("V")  # a view linked to the fit: returned as given


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

    trained_model: torch.nn.Module
    """The model the last fit trained (``lab.model`` itself, or the Recipe's copy)."""

    def __init__(
        self,
        model: torch.nn.Module,
        data: object = None,
        *,
        loss: Callable[[Any, Any], torch.Tensor] | str | None = None,
        optimizer: OptimizerArg = "adam",
        lr: float = 1e-3,
        optimizer_kwargs: Mapping[str, Any] | None = None,
        metrics: Mapping[str, Callable[[Any, Any], Any]] | None = None,
        recipe: Recipe | Mapping[str, Any] | None = None,
        step: Callable[[torch.nn.Module, Any], tuple[Any, Any]] | None = None,
        batch_size: int = 32,
        num_workers: int = 0,
        logdir: str | os.PathLike[str] | None = None,
    ) -> None:
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"Lab needs a torch.nn.Module, got {type(model).__name__}")
        data, step, data_notes = prepare(data, step)
        loss, step = model_loss(loss, step)
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
        self.traces: list[Trace] = []
        self.runs: list[Run] = []
        self.dashboard: Any = None
        self._views: list[Any] = []
        self._stop = threading.Event()
        self._parts()
        if not self._is_lightning() and loss is None:
            raise TypeError(
                f"Lab({type(model).__name__}, ...) needs loss=fn(output, target) for a plain "
                'nn.Module, loss="model" when the model returns its own loss (a Hugging Face '
                "model given labels), or your own LightningModule"
            )

    def _parts(self) -> None:
        """One part per concern (see the module docstring); each reads this Lab."""
        self._loaders = LabData(self)
        self._binding = LabBinding(self)
        self._checkpoints = LabCheckpoints(self)
        self._launcher = LabLaunch(self)
        self._events = LabEvents(self)

    # ------------------------------------------------------------------ state
    @property
    def recipe(self) -> Recipe:
        """The Recipe applied by ``fit`` (a ``labkit.optimize.Recipe``)."""
        return self._recipe

    @recipe.setter
    def recipe(self, value: Recipe | Mapping[str, Any] | None) -> None:
        self._recipe = as_recipe(value)

    @property
    def last_run(self) -> Run | None:
        """The most recent run, or None."""
        return self.runs[-1] if self.runs else None

    def _is_lightning(self) -> bool:
        return is_lightning(self.model)

    def __getstate__(self) -> dict[str, Any]:
        # pickled for the subprocess launch: no widgets, threads, parts or run history
        state = dict(self.__dict__)
        state.update(dashboard=None, _views=[], _stop=None, runs=[], traces=[])
        for part in ("_loaders", "_binding", "_checkpoints", "_launcher", "_events"):
            state.pop(part, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._stop = threading.Event()
        self._parts()

    # ------------------------------------------------------------------ pieces
    def module(self, *, copy: bool = True) -> pl.LightningModule:
        """The LightningModule ``fit`` trains.

        Args:
            copy: Train a copy of the model (the Recipe applied to it). With ``False`` and a
                Recipe that changes nothing, the model itself is trained (what ``fit``
                does, so an optimizer that refers to the model trains it); a Recipe always
                applies to a copy, and the optimizer's parameters are mapped onto it.
        """
        return self._binding.module(copy=copy)

    def datamodule(self, seed: int = 0) -> pl.LightningDataModule:
        """The data as a ``LightningDataModule`` (see :func:`labkit.train.data.as_datamodule`)."""
        return self._loaders.datamodule(seed)

    @exploration
    def check(self, dm: pl.LightningDataModule | None = None) -> None:
        """One-batch dry run (train and val batch) that names the module and shapes on a mismatch.

        Raises:
            labkit.train.ShapeCheckError: on a shape mismatch in the model or the loss.
        """
        self._loaders.check(dm)

    @exploration
    def trace(self, *, mode: str = "full", warmup: int = 1, repeat: int = 5) -> Trace:
        """Trace one training step (forward, loss, backward) on the first batch.

        As :func:`labkit.trace`: one recording for the graph, FLOPs and memory, then
        ``warmup`` + ``repeat`` timing-only passes whose medians are the times shown. The
        model is restored afterwards; the trace is kept in ``lab.traces``.
        """
        from labkit.train._lab_tools import trace_step

        trace = trace_step(self, mode=mode, warmup=warmup, repeat=repeat)
        self.traces.append(trace)
        return trace

    # ------------------------------------------------------------------ fit
    def fit(self, options: FitOptions | None = None, /, **overrides: object) -> Run:
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
        self._events.refuse_while_running()
        logdir = Path(o.logdir) if o.logdir else self.logdir
        from labkit.train._lock import LogdirLock
        from labkit.train._preflight import check_logdir

        check_logdir(  # created, writable, room for the first checkpoint: before any work
            logdir,
            self.model,
            optimizer=None if self._is_lightning() else self.optimizer,
            optimizer_kwargs=self.optimizer_kwargs,
        )
        plan = _launch.plan(
            devices=o.devices, strategy=o.strategy, num_nodes=o.num_nodes, launch=o.launch
        )
        ckpt, resume = self._checkpoints.resolve(o, logdir)
        lock = LogdirLock.acquire(logdir)  # one fit per logdir, from here to the end
        try:
            module, notes = self._checkpoints.preflight(plan, o, ckpt)
            run, dash, tail = self._events.start_run(
                o, plan, logdir, ckpt, resume, [*lock.notes, *notes]
            )
        except BaseException:
            lock.release()
            raise
        return self._launcher.run(
            o,
            plan,
            logdir=logdir,
            ckpt=ckpt,
            module=module,
            run=run,
            dash=dash,
            tail=tail,
            lock=lock,
        )

    # ------------------------------------------------------------------ live views
    @exploration
    def link(self, view: V) -> V:
        """Re-colour ``view`` (a GraphView/ProfileView) with each trace sampled while fitting.

        Sampling is set with ``fit(trace_every=N)``. Returns ``view``.
        """
        self._views.append(view)
        return view

    def stop(self) -> None:
        """Stop a running fit after the current step, on every rank, keeping a checkpoint."""
        self._events.stop()

    # ------------------------------------------------------------------ tools
    @exploration(unless="apply")
    def lr_find(
        self,
        *,
        min_lr: float = 1e-6,
        max_lr: float = 1.0,
        num_training: int = 100,
        seed: int = 0,
        apply: bool = False,
        **kwargs: Any,
    ) -> _LRFinder | None:
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
        from labkit.train._lab_tools import lr_find

        finder = lr_find(
            self, min_lr=min_lr, max_lr=max_lr, num_training=num_training, seed=seed, **kwargs
        )
        suggested = finder.suggestion() if finder is not None else None
        if apply and suggested is not None:
            self.lr = float(suggested)
        return finder

    @exploration
    def scaling(
        self, *, devices: Sequence[int] = (1, 2), steps: int = 30, **kwargs: Any
    ) -> Scaling:
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
        return self._checkpoints.load(path)

    def __repr__(self) -> str:
        loss = getattr(self.loss, "__name__", type(self.loss).__name__) if self.loss else None
        opt = (
            self.optimizer
            if isinstance(self.optimizer, str)
            else getattr(self.optimizer, "__name__", type(self.optimizer).__name__)
        )
        return (
            f"Lab(model={type(self.model).__name__}, loss={loss}, optimizer={opt!r}, lr={self.lr}, "
            f"recipe={self.recipe!r}, runs={len(self.runs)}, traces={len(self.traces)}, "
            f"logdir={str(self.logdir)!r})"
        )


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


def fit_from_args(
    lab: Lab,
    argv: list[str] | None = None,
    *,
    description: str | None = None,
    script_options: argparse.ArgumentParser | None = None,
    **fit_kwargs: object,
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
