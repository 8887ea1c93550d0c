"""Guards around training: a one-batch dry run before it starts, a NaN/Inf stop while it runs.

- :func:`dry_run` runs one batch through the model and the loss (eval mode, no grad, the
  random state put back) and turns a shape error into :class:`ShapeCheckError` naming the
  first module that failed and the shapes it was called with. A loss that silently
  broadcasts (MSE between an output ``[N, 1]`` and a target ``[N]``, which torch only
  warns about) is refused too, naming both shapes and the fix.
- :func:`check_loaders` refuses an empty train or val loader (even without a dry run),
  naming which one.
- :class:`NonFiniteGuard` checks the loss and the gradients before each optimizer step;
  at the first non-finite value it re-runs that batch with hooks to find the first module
  whose output (or the gradient flowing into it) went non-finite, and stops training with
  :class:`NonFiniteError` naming the step and the module. A user's own LightningModule
  (no ``step``/``loss`` given) is located by a replay of its ``training_step`` on that
  batch (``labkit.train._step_guard.replay_locate``).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import lightning.pytorch as pl
import torch

from labkit._tensors import named_tensors
from labkit.trace.errors import LossError, TraceError, scalar_loss
from labkit.trace.recorder import Recorder
from labkit.train._step_guard import NonFiniteError, replay_locate

__all__ = [
    "NonFiniteError",
    "NonFiniteGuard",
    "ShapeCheckError",
    "check_loaders",
    "dry_run",
    "locate_nonfinite",
]


class ShapeCheckError(ValueError):
    """The one-batch dry run failed; the message names the module and the shapes."""


def _shape(x: Any) -> str:
    if isinstance(x, torch.Tensor):
        return f"{str(x.dtype).replace('torch.', '')}{list(x.shape)}"
    if isinstance(x, tuple | list):
        return "(" + ", ".join(_shape(v) for v in x) + ")"
    return type(x).__name__


def dry_run(
    model: torch.nn.Module,
    batch: Any,
    *,
    step: Callable[[torch.nn.Module, Any], tuple[Any, Any]],
    loss: Callable[[Any, Any], torch.Tensor],
    stage: str = "train",
) -> None:
    """Run one batch through ``model`` and ``loss`` and report a mismatch before training.

    Args:
        model: The model (left as it was: eval mode and no grad are used, then restored).
        batch: One batch from the loader.
        step: ``step(model, batch) -> (output, target)``.
        loss: ``loss(output, target)``.
        stage: ``"train"`` or ``"val"``, for the message.

    Raises:
        ShapeCheckError: naming the first module that failed, its input shapes, or the loss
            with the output and target shapes.
    """
    modes = [(m, m.training) for m in model.modules()]  # each module's own flag comes back
    model.eval()
    try:
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            try:
                with Recorder(model, mode="timing"):
                    out, target = step(model, batch)
            except TraceError as exc:
                raise ShapeCheckError(
                    f"dry run on one {stage} batch {_shape(batch)} failed before training: {exc}"
                ) from exc.__cause__
            try:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    value = loss(out, target)
            except Exception as exc:
                name = getattr(loss, "__name__", type(loss).__name__)
                raise ShapeCheckError(
                    f"dry run on one {stage} batch failed in the loss {name}(output, target) with "
                    f"output {_shape(out)} and target {_shape(target)}: {type(exc).__name__}: {exc}"
                ) from exc
            _check_broadcast(loss, out, target, value, caught, stage)
            try:
                scalar_loss(value)
            except LossError as exc:
                raise ShapeCheckError(
                    f"the loss must return a scalar tensor; on one {stage} batch it returned "
                    f"{_shape(value)} for output {_shape(out)} and target {_shape(target)}"
                ) from exc
    finally:
        for m, mode in modes:
            m.training = mode


_TORCH_SIZE_WARNING = "is different to the input size"  # F.mse_loss, l1_loss, huber, ...


def _check_broadcast(
    loss: Callable[[Any, Any], Any],
    out: Any,
    target: Any,
    value: Any,
    caught: list[warnings.WarningMessage],
    stage: str,
) -> None:
    """Refuse a loss that broadcast output against target; re-emit the other warnings."""
    size_warned = False
    for w in caught:
        if _TORCH_SIZE_WARNING in str(w.message):
            size_warned = True
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if not (isinstance(out, torch.Tensor) and isinstance(target, torch.Tensor)):
        return
    if out.shape == target.shape or not target.is_floating_point():
        return  # class indices ([N, C] vs [N]) are not a broadcast
    try:
        joint = torch.broadcast_shapes(out.shape, target.shape)
    except RuntimeError:
        return
    if not size_warned:
        # a loss of the user's own: does it change when the trailing 1 is squeezed away?
        extra = out if out.dim() == target.dim() + 1 else target
        if (
            extra.dim() == 0
            or extra.shape[-1] != 1
            or extra.shape[:-1] != (target.shape if extra is out else out.shape)
        ):
            return
        try:
            a, b = (out.squeeze(-1), target) if extra is out else (out, target.squeeze(-1))
            alt = loss(a, b)
        except Exception:
            return
        if not isinstance(alt, torch.Tensor) or not isinstance(value, torch.Tensor):
            return
        if alt.shape == value.shape and torch.allclose(alt.float(), value.float()):
            return  # the loss lines them up itself
    name = getattr(loss, "__name__", type(loss).__name__)
    if out.dim() == target.dim() + 1 and out.shape[-1] == 1:
        fix = (
            f"use loss=lambda out, y: {name}(out.squeeze(-1), y)"
            if name.isidentifier()
            else "apply out.squeeze(-1) to the output inside the loss"
        )
        fix += " (or end the model with .squeeze(-1))"
    elif target.dim() == out.dim() + 1 and target.shape[-1] == 1:
        fix = f"squeeze the target's last dimension (target.squeeze(-1)) so both are {_shape(out)}"
    else:
        fix = "make the output and target the same shape"
    raise ShapeCheckError(
        f"dry run on one {stage} batch: the loss {name}(output, target) got output "
        f"{_shape(out)} and target {_shape(target)}, which broadcast to {list(joint)}: every "
        f"output would be compared with every target, and training would fit the wrong "
        f"thing without an error; {fix}"
    )


def check_loaders(dm: Any) -> None:
    """Refuse an empty train or val loader of a labkit DataModule, naming which one.

    A user's own ``LightningDataModule`` (no ``train`` attribute) is left to Lightning:
    its loaders may need ``setup()`` first.

    Raises:
        ValueError: ``the train loader is empty ...``, with the dataset size and batch size.
    """
    if not hasattr(dm, "train"):
        return
    for stage in ("train", "val"):
        loader = getattr(dm, stage, None)
        if loader is None:
            continue
        try:
            batches = len(loader)
        except TypeError:
            continue  # an iterable dataset: its length is known only by running it
        if batches:
            continue
        dataset = getattr(loader, "dataset", None)
        try:
            size = f"{len(dataset)} samples" if dataset is not None else "no dataset"
        except TypeError:
            size = "unknown size"
        bs = getattr(loader, "batch_size", None)
        drop = " and drop_last=True" if getattr(loader, "drop_last", False) else ""
        kind = type(dataset).__name__ if dataset is not None else type(loader).__name__
        raise ValueError(
            f"the {stage} loader is empty: its {kind} has {size} (batch_size={bs}{drop}), so "
            f"no {stage} step would run; give the {stage} data at least one batch"
            + (" or pass only train data" if stage == "val" else "")
        )


def locate_nonfinite(
    model: torch.nn.Module,
    batch: Any,
    *,
    step: Callable[[torch.nn.Module, Any], tuple[Any, Any]],
    loss: Callable[[Any, Any], torch.Tensor],
) -> tuple[str | None, str, str]:
    """Re-run ``batch`` with hooks; return ``(module path, "output"|"gradient", detail)``.

    Forward hooks see outputs in completion order, so the first non-finite output is the
    innermost module where the value first broke. Failing that, gradient hooks on each
    module's output see gradients in backward order. Parameter ``.grad``s are restored.
    """
    paths = {id(m): p for p, m in model.named_modules()}
    bad_out: list[tuple[str, str]] = []
    bad_grad: list[tuple[str, str]] = []
    handles = []

    def post(module: torch.nn.Module, args: Any, output: Any) -> None:
        path = paths.get(id(module), "?")
        for _, t in named_tensors(output):
            if t.is_floating_point() and not bool(torch.isfinite(t).all()):
                bad_out.append((path, f"{type(module).__name__} output {_shape(t)}"))
            if t.requires_grad:

                def on_grad(g: torch.Tensor, path: str = path, m: Any = module) -> None:
                    if not bool(torch.isfinite(g).all()):
                        bad_grad.append((path, f"{type(m).__name__} output gradient {_shape(g)}"))

                t.register_hook(on_grad)

    saved = [p.grad for p in model.parameters()]
    for m in model.modules():
        handles.append(m.register_forward_hook(post))
    try:
        with torch.random.fork_rng(devices=[]), torch.enable_grad():
            out, target = step(model, batch)
            value = loss(out, target)
            if value.requires_grad and not bad_out:
                value.backward()
    finally:
        for h in handles:
            h.remove()
        for p, g in zip(model.parameters(), saved, strict=True):
            p.grad = g
    if bad_out:
        return bad_out[0][0], "output", bad_out[0][1]
    if bad_grad:
        return bad_grad[0][0], "gradient", bad_grad[0][1]
    return None, "loss", "no module output or gradient was non-finite on a re-run"


class NonFiniteGuard(pl.Callback):
    """Stop at the first non-finite loss or gradient and name the step and module.

    Args:
        every: Check every ``every`` optimizer steps (1: every step).
        check_grads: Also check gradients (off for ``16-mixed``: its GradScaler skips
            steps with Inf gradients on purpose).
        step: ``step(net, batch) -> (output, target)`` used for the diagnosis re-run.
        loss: The loss, for the diagnosis re-run.

    Example:
        >>> Trainer(callbacks=[NonFiniteGuard(every=1)])  # doctest: +SKIP
    """

    def __init__(
        self,
        *,
        every: int = 1,
        check_grads: bool = True,
        step: Callable[[torch.nn.Module, Any], tuple[Any, Any]] | None = None,
        loss: Callable[[Any, Any], torch.Tensor] | None = None,
    ) -> None:
        self.every = max(1, int(every))
        self.check_grads = check_grads
        self.step = step
        self.loss = loss
        self._batch: Any = None
        self._index = 0
        self._params: list[torch.nn.Parameter] | None = None

    def on_train_start(self, trainer: pl.Trainer, pl_module: Any) -> None:
        # looked up once: walking the module tree every step costs more than the check
        self._params = [p for p in pl_module.parameters() if p.requires_grad]

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: Any, batch: Any, i: int) -> None:
        self._batch = batch
        self._index = i

    def on_before_optimizer_step(self, trainer: pl.Trainer, pl_module: Any, optimizer: Any) -> None:
        step = trainer.global_step
        if step % self.every:
            return
        loss = getattr(pl_module, "last_loss", None)
        grads = []
        if self.check_grads:
            params = self._params if self._params is not None else pl_module.parameters()
            grads = [p.grad for p in params if p.grad is not None]
        # fast path, one device-side reduction and one host sync per step: the sum of the
        # loss and every gradient's norm is finite when all of them are
        parts = list(torch._foreach_norm(grads)) if grads else []
        if loss is not None:
            parts = [*parts, loss.detach().float().sum()]
        if not parts or bool(torch.isfinite(torch.stack(parts).sum())):
            return
        # exact check (the sum can also overflow with finite, huge gradients)
        if loss is not None and not bool(torch.isfinite(loss).all()):
            self._fail(trainer, pl_module, "loss", float(loss))
        if any(not bool(torch.isfinite(g).all()) for g in grads):
            self._fail(trainer, pl_module, "gradient", math.nan)

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: Any, outputs: Any, batch: Any, i: int
    ) -> None:
        # user LightningModules have no last_loss: check what training_step returned
        if getattr(pl_module, "last_loss", None) is None and isinstance(outputs, dict):
            loss = outputs.get("loss")
            if isinstance(loss, torch.Tensor) and not bool(torch.isfinite(loss).all()):
                self._fail(trainer, pl_module, "loss", float(loss))
        self._batch = None

    def _fail(self, trainer: pl.Trainer, pl_module: Any, what: str, value: float) -> None:
        step = trainer.global_step
        module, where, detail = None, what, ""
        net = getattr(pl_module, "net", pl_module)
        if self.step is not None and self.loss is not None and self._batch is not None:
            try:
                module, where, detail = locate_nonfinite(
                    net, self._batch, step=self.step, loss=self.loss
                )
            except Exception as exc:  # the diagnosis must not hide the report
                detail = f"(could not re-run the batch to locate it: {exc})"
        elif self._batch is not None and callable(getattr(pl_module, "training_step", None)):
            module, where, detail = self._replay_step(pl_module)
        head = f"non-finite {what}" + (f" ({value})" if what == "loss" else "")
        where_txt = (
            f"; first non-finite {where} in module '{module or '<root>'}': {detail}"
            if module is not None
            else (f"; {detail}" if detail else "")
        )
        raise NonFiniteError(
            f"{head} at step {step} (epoch {trainer.current_epoch}){where_txt}. Training stopped; "
            "lower the learning rate, check the inputs of that module, or use a mixed-precision "
            "recipe with a GradScaler",
            step=step,
            module=module,
            where=where,
        )

    def _replay_step(self, pl_module: Any) -> tuple[str | None, str, str]:
        """The first non-finite module output on a replay of the user's ``training_step``."""
        from labkit.train.lab import _no_logging

        batch, i = self._batch, self._index
        try:
            with _no_logging(pl_module):
                found = replay_locate(pl_module, lambda: pl_module.training_step(batch, i))
        except Exception as exc:  # the diagnosis must not hide the report
            return None, "loss", f"(could not replay training_step to locate it: {exc})"
        if found is None:
            return None, "loss", ""
        return found[0], "output", found[1]

    def __repr__(self) -> str:
        return f"NonFiniteGuard(every={self.every}, check_grads={self.check_grads})"
