"""LabModule: a LightningModule made from a plain ``nn.Module``, a loss, an optimizer and metrics.

A batch becomes ``(output, target)`` by the ``step`` function: by default ``(x, y)`` pairs
give ``net(x), y`` and objects with a ``.y`` (PyG ``Data``/``Batch``) give ``net(batch),
batch.y``. The loss is ``loss(output, target)``; each metric is ``metric(output, target)``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import lightning.pytorch as pl
import torch

from labkit.train._epoch_means import EpochMeans, as_scalar

OPTIMIZERS = {"adam": "Adam", "adamw": "AdamW", "sgd": "SGD", "rmsprop": "RMSprop"}

StepFn = Callable[[torch.nn.Module, Any], tuple[Any, Any]]

OptimizerArg = (
    str | torch.optim.Optimizer | type[torch.optim.Optimizer] | Callable[..., torch.optim.Optimizer]
)
"""What ``Lab(optimizer=...)`` takes: a name (``"adam"``), a ``torch.optim`` class, an
optimizer of the model, or a factory ``params -> optimizer``."""


#: keys a dict batch's target may have, in the order they are looked for
TARGET_KEYS = ("y", "target", "targets", "label", "labels")


def default_step(net: torch.nn.Module, batch: object) -> tuple[Any, Any]:
    """``(x, y) -> (net(x), y)``; a PyG batch (has ``.y``) -> ``(net(batch), batch.y)``; a
    dict batch -> ``(net(batch["x"]), target)`` or, without ``"x"``, ``net(**the rest)``
    (Hugging Face style: ``input_ids``, ``attention_mask``), the target being the first of
    :data:`TARGET_KEYS` it has."""
    if isinstance(batch, tuple | list) and len(batch) == 2:
        x, y = batch
        return net(x), y
    if hasattr(batch, "y"):
        return net(batch), batch.y
    if isinstance(batch, Mapping):
        key = next((k for k in TARGET_KEYS if k in batch), None)
        if key is not None:
            if "x" in batch:
                return net(batch["x"]), batch[key]
            return net(**{k: v for k, v in batch.items() if k != key}), batch[key]
        raise TypeError(
            f"Lab cannot find the target in a dict batch with keys {sorted(batch)}: name it "
            f"one of {', '.join(TARGET_KEYS)}, or pass step=lambda net, batch: "
            "(net(...), target) to Lab"
        )
    raise TypeError(
        f"Lab cannot split a batch of type {type(batch).__name__} into inputs and targets; "
        "give (x, y) pairs, or pass step=lambda net, batch: (net(...), target) to Lab"
    )


def model_step(net: torch.nn.Module, batch: object) -> tuple[Any, Any]:
    """The step of ``Lab(..., loss="model")``: the model computes its own loss, so the whole
    batch goes in: a dict as keywords (``net(**batch)``, Hugging Face style, labels
    included), a tuple or list as positional inputs (``net(x, y)``, nanoGPT style), anything
    else as one input. The target handed to metrics is the dict's first
    :data:`TARGET_KEYS` entry, the last element of a tuple, or ``batch.y``."""
    if isinstance(batch, Mapping):
        key = next((k for k in TARGET_KEYS if k in batch), None)
        return net(**batch), batch[key] if key is not None else None
    if isinstance(batch, tuple | list):
        return net(*batch), batch[-1] if len(batch) > 1 else None
    return net(batch), getattr(batch, "y", None)


def dict_batch_note(
    batch: object, step: StepFn | None, loss: Callable[[Any, Any], Any] | None
) -> str | None:
    """How a dict batch given without ``step=`` was used: which keys went to the model, which
    one is the target, which were left out (a sentence for the run's notes), or None when
    ``batch`` is not a dict or a ``step`` of the user's decides.

    Example:
        >>> import torch.nn.functional as F
        >>> note = dict_batch_note({"x": 1, "y": 2, "mask": 3}, None, F.mse_loss)
        >>> print(note)  # doctest: +NORMALIZE_WHITESPACE
        the batch is a dict with keys x, y, mask: batch['x'] went to the model as its input
        and batch['y'] to the loss mse_loss(output, target) as the target; not used: mask
        (pass step=lambda net, batch: (net(...), target) to Lab to use them)
    """
    if not isinstance(batch, Mapping) or step not in (None, default_step, model_step):
        return None
    keys = [str(k) for k in batch]
    head = f"the batch is a dict with keys {', '.join(keys)}: "
    target = next((k for k in TARGET_KEYS if k in batch), None)
    if step is model_step:
        metrics = f"; batch[{target!r}] is the target metrics get" if target is not None else ""
        return (
            head + f"all of them went to the model as keyword arguments "
            f"(model(**batch)); the loss is the one the model returned{metrics}"
        )
    if target is None:
        return None  # default_step refuses it, naming the keys
    name = getattr(loss, "__name__", type(loss).__name__)
    to_loss = f"batch[{target!r}] to the loss {name}(output, target) as the target"
    if "x" in batch:
        unused = [k for k in keys if k not in ("x", target)]
        note = head + f"batch['x'] went to the model as its input and {to_loss}"
        if unused:
            note += (
                f"; not used: {', '.join(unused)} (pass step=lambda net, batch: "
                "(net(...), target) to Lab to use them)"
            )
        return note
    rest = [k for k in keys if k != target]
    return head + f"{', '.join(rest)} went to the model as keyword arguments and {to_loss}"


def output_loss(out: object, target: object = None) -> torch.Tensor:
    """The loss the model returned (``Lab(..., loss="model")``), and only a loss.

    A loss is ``out.loss`` (a Hugging Face ``ModelOutput``), ``out["loss"]``, the second
    element of a ``(logits, loss)`` pair (nanoGPT) when it is a 0-dim tensor, or ``out``
    itself when it is a 0-dim tensor. While gradients are on (a training step) it must
    require grad. A prediction is never taken for a loss, whatever its size: a
    ``(pred, None)`` output (nanoGPT's ``GPT(x)`` without targets) or a ``loss=None`` is
    refused, naming the ``None`` and how to pass the targets.

    Raises:
        TypeError: naming what the model returned and how to give it its targets.
    """
    where, found = _find_loss(out)
    if found is None:
        raise TypeError(
            f'Lab(loss="model") takes the loss the model returns, but the model returned '
            f"{_describe_output(out)}, and {where} is None: the model computed no loss, "
            f"as it does when given no targets. {_HOW_TO_PASS_TARGETS}"
        )
    if not isinstance(found, torch.Tensor) or (where == _ITSELF and found.dim() != 0):
        raise TypeError(
            f'Lab(loss="model") takes the loss the model returns, but the model returned '
            f"{_describe_output(out)}, with no loss in it (no .loss, no 'loss' key, no "
            f"(logits, loss) pair with a 0-dim loss, not a 0-dim tensor itself; a prediction "
            f"is never taken for a loss). {_HOW_TO_PASS_TARGETS}"
        )
    if found.numel() != 1:
        raise TypeError(
            f'Lab(loss="model"): the loss the model returned ({where}) is '
            f"{_shape(found)}, not one number; reduce it in the model (.mean()), or pass "
            "loss=fn(output, target) instead"
        )
    if torch.is_grad_enabled() and not found.requires_grad:
        raise TypeError(
            f'Lab(loss="model"): the loss the model returned ({where}, {_shape(found)}) does '
            "not require grad, so training cannot follow it back to the weights: compute it "
            "from the model's output outside torch.no_grad(), without .detach() or .item()"
        )
    return found.reshape(())


_HOW_TO_PASS_TARGETS = (
    "Pass the targets in each batch: (x, y) batches call model(x, y) (nanoGPT's "
    "forward(idx, targets)), a dict batch is passed as keywords (labels=... for a Hugging "
    "Face model); or pass loss=fn(output, target) for a model that returns predictions"
)


def _find_loss(out: object) -> tuple[str, object]:
    """``(where the loss was found, what is there)``; ``(where, None)`` names a None loss."""
    if isinstance(out, torch.Tensor):
        return _ITSELF, out
    if hasattr(out, "loss"):  # a Hugging Face ModelOutput (a Mapping too), a namedtuple
        return "its .loss", out.loss
    if isinstance(out, Mapping):
        return ("its 'loss'", out["loss"]) if "loss" in out else (_ITSELF, out)
    if isinstance(out, tuple | list) and len(out) == 2:
        second = out[1]
        if second is None or (isinstance(second, torch.Tensor) and second.dim() == 0):
            return "its second element (the loss of a (logits, loss) pair)", second
    return _ITSELF, out


_ITSELF = "the output itself"


def _describe_output(out: object) -> str:
    """What the model returned, in a message: ``(Tensor [1, 1] float32, None)``."""
    if out is None:
        return "None"
    if isinstance(out, torch.Tensor):
        return f"a tensor {_shape(out)}"
    if isinstance(out, tuple | list) and len(out) <= 6:
        inner = ", ".join(
            f"Tensor {_shape(v)}"
            if isinstance(v, torch.Tensor)
            else ("None" if v is None else type(v).__name__)
            for v in out
        )
        return f"({inner})" if isinstance(out, tuple) else f"[{inner}]"
    if isinstance(out, Mapping):
        return f"a {type(out).__name__} with keys {sorted(map(str, out))}"
    return f"a {type(out).__name__}"


def batch_size_of(batch: object) -> int:
    """Samples in a batch: ``num_graphs`` for PyG batches, else the first tensor's first dim."""
    n = getattr(batch, "num_graphs", None)
    if isinstance(n, int):
        return n
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.dim() else 1
    if isinstance(batch, tuple | list) and batch:
        return batch_size_of(batch[0])
    if isinstance(batch, Mapping) and batch:
        return batch_size_of(next(iter(batch.values())))
    return 1


def make_optimizer(
    optimizer: OptimizerArg,
    params: Iterable[torch.nn.Parameter],
    lr: float,
    kwargs: Mapping[str, Any] | None,
) -> torch.optim.Optimizer:
    """Build the optimizer from a class, a name (``"adam"``) or ``params -> optimizer``.

    An optimizer instance is returned as it is (it already holds its parameters).
    """
    if isinstance(optimizer, torch.optim.Optimizer):
        return optimizer
    kwargs = dict(kwargs or {})
    if isinstance(optimizer, str):
        name = OPTIMIZERS.get(optimizer.lower())
        if name is None:
            raise ValueError(
                f"unknown optimizer {optimizer!r}; one of {sorted(OPTIMIZERS)}, "
                "a torch.optim class or a callable params -> optimizer"
            )
        optimizer = getattr(torch.optim, name)
    if isinstance(optimizer, type):
        return optimizer(params, lr=lr, **kwargs)
    if not callable(optimizer):
        raise TypeError(
            "optimizer must be a name, a torch.optim class, an optimizer or a callable "
            f"params -> optimizer, got {type(optimizer).__name__}"
        )
    built = optimizer(params)
    if not isinstance(built, torch.optim.Optimizer):
        name = getattr(optimizer, "__name__", type(optimizer).__name__)
        raise TypeError(
            f"the optimizer factory {name} returned {type(built).__name__}, not a "
            "torch.optim.Optimizer"
        )
    return built


class MetricError(RuntimeError):
    """A metric function raised; names the metric, the stage, the batch and the shapes."""


def _shape(value: object) -> str:
    if isinstance(value, torch.Tensor):
        return f"{list(value.shape)} {str(value.dtype).removeprefix('torch.')}"
    return type(value).__name__


_PLAIN_ATTRS = frozenset({"_current_fx_name", "last_loss", "last_batch_size", "_logged_step"})


class LabModule(pl.LightningModule):
    """The LightningModule ``Lab`` trains when given a plain ``nn.Module``.

    Args:
        net: The model (already optimized by ``labkit.optimize.apply``).
        loss: ``loss(output, target) -> scalar tensor``.
        optimizer: A ``torch.optim`` class, a name (``"adam"``, ``"adamw"``, ``"sgd"``,
            ``"rmsprop"``), ``params -> optimizer`` or an optimizer instance. A factory or
            instance that holds ``original``'s parameters is mapped onto ``net``'s.
        lr: Learning rate (read by ``lab.lr_find``; used when ``optimizer`` is a class/name).
        optimizer_kwargs: Extra arguments of the optimizer class.
        metrics: ``{name: metric(output, target)}``, each returning one number per batch.
            With the loss, they are written per step as ``train_<name>`` (to the loggers)
            and per epoch as ``train_<name>_epoch`` and ``val_<name>``: means weighted by
            batch size, over every process.
        step: ``step(net, batch) -> (output, target)``; see :func:`default_step`.
        recipe: The Recipe as a dict, stored in every checkpoint.
        original: The user's model when ``net`` is a copy of it (a Recipe applied): the
            parameters of it that the optimizer holds are mapped onto ``net``'s.

    Example:
        >>> from torch import nn
        >>> import torch.nn.functional as F
        >>> m = LabModule(nn.Linear(4, 2), loss=F.cross_entropy, optimizer="sgd", lr=0.1)
        >>> m
        LabModule(net=Linear, loss=cross_entropy, optimizer='sgd', lr=0.1, metrics=[])
    """

    def __init__(
        self,
        net: torch.nn.Module,
        *,
        loss: Callable[[Any, Any], torch.Tensor],
        optimizer: OptimizerArg = "adam",
        lr: float = 1e-3,
        optimizer_kwargs: Mapping[str, Any] | None = None,
        metrics: Mapping[str, Callable[[Any, Any], Any]] | None = None,
        step: StepFn | None = None,
        recipe: Mapping[str, Any] | None = None,
        original: torch.nn.Module | None = None,
    ) -> None:
        super().__init__()
        self.net = net
        # a plain tuple: the user's model must not become a submodule of this one
        self._original = (original,) if original is not None and original is not net else ()
        self.loss_fn = loss
        self.optimizer = optimizer
        self.lr = lr
        self.optimizer_kwargs = dict(optimizer_kwargs or {})
        self.metrics = dict(metrics or {})
        self.step_fn = step or default_step
        self.recipe = dict(recipe or {})
        self.last_loss: torch.Tensor | None = None
        self.last_batch_size = 0
        self._means = {"train": EpochMeans(), "val": EpochMeans()}
        self._closed: set[str] = set()
        self._resumed_epoch: int | None = None
        self._logged_step = -1
        self._prepared: torch.optim.Optimizer | None = None
        self.lr_override: float | None = None  # set by a resume with on_change="apply"

    def __setattr__(self, name: str, value: Any) -> None:
        # Lightning sets ``_current_fx_name`` twice around every hook it calls (~45 times a
        # step) and this module keeps per-step state; none of these is a parameter, buffer
        # or submodule, so nn.Module's bookkeeping (~2 us a call) is skipped for them
        if name in _PLAIN_ATTRS:
            object.__setattr__(self, name, value)
        else:
            super().__setattr__(name, value)

    def forward(self, *args: object, **kwargs: object) -> object:
        return self.net(*args, **kwargs)

    def _evaluate(self, batch: object, stage: str, batch_idx: int = 0) -> torch.Tensor:
        out, target = self.step_fn(self.net, batch)
        loss = self.loss_fn(out, target)
        bs = batch_size_of(batch)
        values = {"loss": loss}
        if self.metrics:
            with torch.no_grad():
                for name, fn in self.metrics.items():
                    try:
                        value = fn(out, target)
                    except Exception as exc:
                        raise MetricError(
                            f"the metric {name!r} raised {type(exc).__name__}: {exc} on "
                            f"{stage} batch {batch_idx} of epoch {self.current_epoch} "
                            f"(output {_shape(out)}, target {_shape(target)}); fix "
                            f"metrics[{name!r}] or remove it"
                        ) from exc
                    values[name] = as_scalar(name, value, loss.device)
        self._means[stage].add(values, bs)
        if stage == "train":
            self.last_loss = loss.detach()
            self.last_batch_size = bs
        return loss

    def training_step(self, batch: object, batch_idx: int) -> torch.Tensor:
        return self._evaluate(batch, "train", batch_idx)

    def validation_step(self, batch: object, batch_idx: int) -> torch.Tensor:
        return self._evaluate(batch, "val", batch_idx)

    # Logging. Per step, ``train_<name>`` goes to the loggers on the steps Lightning writes
    # step metrics (every ``log_every_n_steps``, and the last step before a stop); per
    # epoch, ``train_<name>_epoch`` and ``val_<name>`` are this module's own weighted means
    # (one collective per epoch with several processes), logged with ``self.log``.
    # ``self.log`` is not called per step: see ``_epoch_means`` for why.
    def on_train_epoch_start(self) -> None:
        # a run resumed mid-epoch (a Stop checkpoint) continues that epoch's sums
        if self._resumed_epoch != self.trainer.current_epoch:
            self._means["train"].reset()
        self._resumed_epoch = None
        self._closed.discard("train")

    def on_validation_epoch_start(self) -> None:
        self._means["val"].reset()
        self._closed.discard("val")

    def on_train_batch_end(self, outputs: object, batch: object, batch_idx: int) -> None:
        """Write ``train_<name>`` to the loggers on Lightning's logging steps.

        The same steps and step index as Lightning's own step logging: after every
        ``log_every_n_steps``-th optimizer step and before a stop, at ``global_step - 1``.
        Written straight to ``self.loggers`` (not through ``self.log``, see
        ``_epoch_means``): per-step values are not in ``trainer.callback_metrics``; the
        epoch means (``train_<name>_epoch``, ``val_<name>``) are.
        """
        trainer, step, means = self.trainer, self.global_step, self._means["train"]
        every = trainer.log_every_n_steps  # type: ignore[attr-defined]  # set by Lightning at run time, undeclared
        if means.last is None or not self.loggers or not every or step == self._logged_step:
            return
        if step % every and not trainer.should_stop:
            return
        self._logged_step = step  # once per optimizer step (gradient accumulation)
        metrics: dict[str, float] = dict(
            zip([f"train_{n}" for n in means.names], means.last.tolist(), strict=True)
        )
        metrics["epoch"] = self.current_epoch
        for logger in self.loggers:
            logger.log_metrics(metrics, step=step - 1)
            logger.save()

    def close_epoch(self, stage: str) -> None:
        """Log the epoch's means of ``stage`` (``"train"`` or ``"val"``), once per epoch.

        Lightning calls callbacks' ``on_train_epoch_end`` before the module's, so a callback
        that reports the epoch (LabCallback) calls this first; the module's own hook then
        does nothing. Every process must call it (the means are reduced over processes).
        """
        if stage in self._closed:
            return
        self._closed.add(stage)
        reduce = None
        several = self.trainer.world_size > 1
        if several:
            strategy = self.trainer.strategy
            reduce = lambda t: strategy.reduce(t, reduce_op="sum")  # noqa: E731
        suffix = "_epoch" if stage == "train" else ""
        for name, value in self._means[stage].means(reduce).items():
            # after the reduction every process holds the same value; sync_dist with "max"
            # keeps it exactly (Lightning warns about epoch values logged without a sync)
            self.log(
                f"{stage}_{name}{suffix}",
                value,
                on_step=False,
                on_epoch=True,
                batch_size=1,
                sync_dist=several,
                reduce_fx="max" if several else "mean",
            )

    def on_train_epoch_end(self) -> None:
        self.close_epoch("train")

    def on_validation_epoch_end(self) -> None:
        self.close_epoch("val")

    def prepare_optimizer(self) -> torch.optim.Optimizer:
        """Build and check the optimizer now (before Lightning starts); the next
        :meth:`configure_optimizers` returns it instead of building another."""
        self._prepared = self.configure_optimizers()
        return self._prepared

    def configure_optimizers(self) -> torch.optim.Optimizer:
        """The optimizer, bound to ``net`` and holding all its trainable parameters.

        Raises:
            labkit.train._optimizer.OptimizerCoverageError: it misses trainable parameters
                of the model (named) or holds parameters that are not the model's.
        """
        from labkit.train._optimizer import bind, check_covers

        if self._prepared is not None:
            opt, self._prepared = self._prepared, None
            return opt

        opt = make_optimizer(self.optimizer, self.net.parameters(), self.lr, self.optimizer_kwargs)
        if self._original:
            opt = bind(opt, self._original[0], self.net)
        check_covers(opt, self.net, where=f"the optimizer ({_describe(self.optimizer)})")
        return opt

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        from labkit.train._resume import optimizer_record

        checkpoint["labkit"] = {
            "recipe": self.recipe,
            "format": 1,
            "train_means": {"epoch": self.current_epoch, **self._means["train"].state_dict()},
        }
        trainer = self._trainer
        if trainer is not None and trainer.optimizers:
            checkpoint["labkit"]["optimizer"] = optimizer_record(trainer.optimizers[0])

    def on_train_start(self) -> None:
        # Lightning restored the optimizer's state (its lr too) before this hook
        if self.lr_override is not None:
            for opt in self.trainer.optimizers:
                for group in opt.param_groups:
                    group["lr"] = self.lr_override

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        state = checkpoint.get("labkit", {}).get("train_means")
        if state is not None:
            self._means["train"].load_state_dict(state)
            self._resumed_epoch = int(state["epoch"])

    def __repr__(self) -> str:
        opt = _describe(self.optimizer)
        loss = getattr(self.loss_fn, "__name__", type(self.loss_fn).__name__)
        return (
            f"LabModule(net={type(self.net).__name__}, loss={loss}, optimizer={opt}, "
            f"lr={self.lr}, metrics={sorted(self.metrics)})"
        )


def _describe(optimizer: object) -> str:
    """How an optimizer argument is named in messages and reprs."""
    if isinstance(optimizer, str):
        return repr(optimizer)
    if isinstance(optimizer, torch.optim.Optimizer):
        return f"{type(optimizer).__name__} instance"
    return repr(getattr(optimizer, "__name__", type(optimizer).__name__))
