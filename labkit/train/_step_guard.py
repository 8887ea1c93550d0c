"""StepGuard: the first NaN/Inf in a user's own loop, caught before the weights change.

For a loop labkit does not run (a plain loop, a Hugging Face ``Trainer``) the guard sits
on the user's optimizer (``register_step_pre_hook``): before every ``optimizer.step()``,
with the gradients there and the weights not yet updated, it checks

- every step, the gradient of the smallest parameter (its sum, read on the CPU as a list
  of floats, no torch op): a non-finite loss or forward output makes every gradient
  non-finite through backward;
- all gradients (one ``_foreach_norm``), as often as a budget of ``budget`` (0.25%) of the
  training time allows (counted in steps, each full check at twice its own time:
  :meth:`StepGuard.check_gradients`), so a gradient that breaks in backward only is
  found within some steps at that cost (on the step it broke when a full check falls
  there; else a plain loop's next step, whose forward the updated weights break).

A non-finite loss is also caught when the steps' losses are read (``check_losses``,
exact step). On a failure the guard replays the step's forward inputs, kept by one
forward pre-hook on the model (references only, the batch the loop already holds), with
output hooks on every module, under ``no_grad``, the RNG and the buffers put back: the
first module whose output was non-finite is named (:func:`replay_locate`). Forward hooks
see outputs in completion order, so that is the innermost module where the value broke.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from typing import Any

import torch

from labkit._tensors import named_tensors

MAX_KEPT = 64  # forward inputs kept per optimizer step (gradient accumulation)
FULL_CHECK_WEIGHT = 2.0
"""How many times its own time a full gradient check costs the training: measured in a
watched loop (a 3.5 ms MLP step, 2 cores), full checks every 8 steps cost the loop about
twice what they took themselves (the steps around them run slower: every gradient went
through the caches), so the budget counts each one twice."""
FULL_CHECK_BUDGET = 0.0025
"""The share of the training time full gradient checks may take (counted as above):
about one step in 30 on a 3 ms MLP step. It was 0.5% (one step in 16); halved so that
the whole watch (records, the every-step check, the input kept for a replay and these)
stays clearly under 1% of such a step: a full check only makes a backward-only break
named on its own step rather than the next one."""


class NonFiniteError(FloatingPointError):
    """Training met a NaN or Inf; ``step``, ``module`` and ``where`` say where.

    Args:
        message: The full report.
        step: The optimizer step (``trainer.global_step`` in a fit; ``run.step``'s count,
            from 1, in a watched loop).
        module: Path of the first module that went non-finite ("" for the root), or None.
        where: ``"loss"``, ``"output"`` or ``"gradient"``.
    """

    def __init__(self, message: str, *, step: int, module: str | None, where: str) -> None:
        super().__init__(message)
        self.step = step
        self.module = module
        self.where = where

    def __reduce__(self) -> tuple[Any, ...]:  # picklable across DDP processes
        return (_rebuild, (str(self), self.step, self.module, self.where))


def _rebuild(message: str, step: int, module: str | None, where: str) -> NonFiniteError:
    return NonFiniteError(message, step=step, module=module, where=where)


def shape_of(x: object) -> str:
    """``float32[4, 8]`` for a tensor, ``(a, b)`` for a tuple, else the type name."""
    if isinstance(x, torch.Tensor):
        return f"{str(x.dtype).replace('torch.', '')}{list(x.shape)}"
    if isinstance(x, tuple | list):
        return "(" + ", ".join(shape_of(v) for v in x) + ")"
    return type(x).__name__


def replay_locate(model: torch.nn.Module, forward: Callable[[], Any]) -> tuple[str, str] | None:
    """Run ``forward()`` with output hooks on ``model``'s modules; the first non-finite one.

    Runs under ``no_grad`` with the RNG forked; every buffer (BatchNorm's running stats)
    and training flag is as before afterwards.

    Returns:
        ``(module path, "Linear output float32[4, 8]")`` or None when no output was
        non-finite.
    """
    paths = {id(m): p for p, m in model.named_modules()}
    bad: list[tuple[str, str]] = []

    def post(module: torch.nn.Module, args: tuple[object, ...], output: object) -> None:
        if bad:
            return
        for _, t in named_tensors(output):
            if t.is_floating_point() and not bool(torch.isfinite(t).all()):
                path = paths.get(id(module), "?")
                bad.append((path, f"{type(module).__name__} output {shape_of(t)}"))
                return

    buffers = [(b, b.detach().clone()) for b in model.buffers()]
    modes = [(m, m.training) for m in model.modules()]
    handles = [m.register_forward_hook(post) for m in model.modules()]
    devices = sorted(
        {b.device.index or 0 for b, _ in buffers if b.is_cuda}
        | {p.device.index or 0 for p in model.parameters() if p.is_cuda}
    )
    try:
        with torch.random.fork_rng(devices=devices), torch.no_grad():
            forward()
    finally:
        for h in handles:
            h.remove()
        with torch.no_grad():
            for b, saved in buffers:
                b.copy_(saved)
        for m, mode in modes:
            m.training = mode
    return bad[0] if bad else None


MAX_RAW = 128
"""Most elements summed in Python as a list of floats (a small gradient); above it,
torch's own sum (one op, a few microseconds) is the quicker one."""


def host_sum(t: torch.Tensor) -> float:
    """The sum of ``t``'s elements as a float, NaN/Inf if any element is.

    A small floating point CPU tensor is read as a list of floats (``tolist``: no torch
    operation, whose allocation and dispatch cost more than the sum of a few numbers);
    any other tensor through ``float(t.sum())`` (a device sync).

    Example:
        >>> host_sum(torch.tensor([1.0, 2.0])), host_sum(torch.tensor([1.0, float("inf")]))
        (3.0, inf)
    """
    if t.is_cpu and t.layout == torch.strided and t.is_floating_point() and t.numel() <= MAX_RAW:
        return float(sum(t.reshape(-1).tolist()))
    return float(t.sum())


class StepGuard:
    """Checks a user's loop for the first non-finite loss or gradient (module docstring).

    Args:
        model: The model trained (its forward inputs are kept for the replay).
        budget: Most share of the training time spent checking all gradients.
        check_grads: Check gradients at all (a GradScaler'd loop skips Inf steps itself:
            the guard sees only the steps it takes).

    Example:
        >>> guard = StepGuard(torch.nn.Linear(2, 1))
        >>> guard.check_losses([{"step": 1, "loss": 0.5}])
        >>> guard.last_good
        (1, 0.5)
        >>> guard
        StepGuard(budget=0.0025, check_grads=True)
    """

    def __init__(
        self,
        model: torch.nn.Module,
        *,
        budget: float = FULL_CHECK_BUDGET,
        check_grads: bool = True,
    ) -> None:
        self.model = model
        self.budget = budget
        self.check_grads = check_grads
        self.last_good: tuple[int, float] | None = None
        self.full_checks = 0
        self._inputs: list[tuple[tuple[object, ...], dict[str, object]]] = []
        self._params = [p for p in model.parameters() if p.requires_grad]
        # the parameter whose gradient is checked every step: the smallest, read at once
        self._small = min(self._params, key=lambda p: p.numel(), default=None)
        small = self._small
        # a small 1-D floating point CPU gradient (a bias) is read as a list: one call,
        # measured cheaper in a running loop (everything out of the caches) than a view
        # of its memory through ctypes; any other one through host_sum
        self._small_list = (
            small is not None
            and small.is_cpu
            and small.dim() == 1
            and small.is_floating_point()
            and small.numel() <= MAX_RAW
        )
        self._handles: list[Any] = []
        self._skip = 0  # steps before the next full check: the first step checks at once
        self._gap = 1  # steps from the last full check to the next one
        self._last = time.perf_counter()  # when the last full check began
        self.step = 1  # the optimizer step being taken (1-based, as run.step counts)

    # ------------------------------------------------------------------ hooks
    def attach(self, optimizer: torch.optim.Optimizer | None = None) -> StepGuard:
        """Keep the model's forward inputs; check gradients before ``optimizer.step()``."""
        self._handles.append(self.model.register_forward_pre_hook(self._keep, with_kwargs=True))
        if optimizer is not None and self.check_grads:
            # the check itself is the hook (a call less, once a step)
            self._handles.append(optimizer.register_step_pre_hook(self.check_gradients))
        return self

    def detach(self) -> None:
        """Remove the hooks and let go of the kept inputs (idempotent)."""
        for h in self._handles:
            h.remove()
        self._handles = []
        self._inputs = []

    def _keep(
        self, module: torch.nn.Module, args: tuple[object, ...], kwargs: dict[str, object]
    ) -> None:
        if len(self._inputs) < MAX_KEPT:
            self._inputs.append((args, kwargs))

    def stepped(self, step: int) -> None:
        """The loop recorded optimizer step ``step``: the next one is ``step + 1``."""
        self.step = step + 1
        if self._inputs:
            self._inputs = []

    # ------------------------------------------------------------------ checks
    def check_gradients(self, *hook_args: object) -> None:
        """The cheap check every step; all gradients within the time budget.

        ``hook_args``: what an optimizer step pre-hook is given (not used).

        The budget: a full check runs once the steps since the last one took ``cost /
        budget`` (its cost: :data:`FULL_CHECK_WEIGHT` times the time the last full check
        took), so full checks cost ``budget`` of the training time. The clock is read at
        a full check only: the steps to the next one are the cost over ``budget`` times
        the mean step since the last one (a pause in training makes that mean long, so
        the next step checks in full: time away from training earns one check, no more).
        """
        small = self._small.grad if self._small is not None else None
        if small is not None:
            try:  # a list of a few floats (a NaN or Inf among them makes the sum one)
                total = sum(small.tolist()) if self._small_list else host_sum(small)
            except RuntimeError:  # a gradient without plain memory (sparse): torch's sum
                total = float(small.sum())
            if not math.isfinite(total) and not bool(torch.isfinite(small).all()):
                self.fail("gradient")  # a non-finite loss makes every gradient non-finite
        if self._skip:
            self._skip -= 1
            return
        now = time.perf_counter()
        step_time = (now - self._last) / self._gap
        grads = [p.grad for p in self._params if p.grad is not None]
        if grads:
            total = float(torch.stack(torch._foreach_norm(grads)).sum())
            self.full_checks += 1
            if not math.isfinite(total) and any(not bool(torch.isfinite(g).all()) for g in grads):
                self.fail("gradient")
        cost = FULL_CHECK_WEIGHT * (time.perf_counter() - now)
        earned = self.budget * step_time  # budget earned by a step
        self._gap = max(1, math.ceil(cost / earned)) if earned > 0 else 1 << 62
        self._skip, self._last = self._gap - 1, now

    def check_loss(self, loss: torch.Tensor | float) -> None:
        """An immediate check of a loss on the CPU (a float or a CPU tensor)."""
        if isinstance(loss, torch.Tensor):
            if loss.device.type != "cpu":
                return  # read with the others at the next flush: no sync per step
            value = float(loss)
        else:
            value = float(loss)
        if not math.isfinite(value):
            self.fail("loss", value)

    def check_losses(self, steps: list[dict[str, Any]]) -> None:
        """Flushed steps (read together): the first non-finite loss fails, naming its step."""
        for s in steps:
            loss = s["loss"]
            if not math.isfinite(loss):
                self.fail("loss", loss, step=s["step"])
            self.last_good = (s["step"], loss)

    def fail(self, what: str, value: float | None = None, *, step: int | None = None) -> None:
        """Locate the module by a replay of the kept inputs and raise NonFiniteError."""
        step = self.step if step is None else step
        found, note = None, ""
        replayable = step == self.step and self._inputs
        if replayable:
            try:
                for args, kwargs in list(self._inputs):
                    found = replay_locate(
                        self.model, functools.partial(self.model, *args, **kwargs)
                    )
                    if found is not None:
                        break
            except Exception as exc:  # the diagnosis must not hide the report
                note = f" (the replay of its forward failed: {type(exc).__name__}: {exc})"
        if found is None and what == "gradient":
            bad = [
                n
                for n, p in self.model.named_parameters()
                if p.grad is not None and not bool(torch.isfinite(p.grad).all())
            ]
            if bad:
                note = (
                    f"; no forward output was non-finite on a replay, the first parameter "
                    f"gradient that was (in backward order) is {bad[-1]!r}" + note
                )
        head = f"non-finite {what}" + (f" ({value})" if value is not None else "")
        where = what
        module = None
        if found is not None:
            module, detail = found
            where = "output"
            went = f"{what} {value}" if value is not None else what
            where_ = module or "<root>"
            head = (
                f"non-finite forward output at step {step} (its {went} was non-finite): "
                f"first in module '{where_}', {detail}"
            )
        else:
            head += f" at step {step}{note}"
        prev = step - 1  # every step before it passed the checks
        if self.last_good is not None and self.last_good[0] == prev:
            good = f"the last good step was {prev} (loss {self.last_good[1]:.6g})"
        else:
            good = f"the last good step was {prev}" if prev >= 1 else "it was the first step"
        when = (
            "the weights are as before this step's update (stopped before optimizer.step)"
            if what == "gradient"
            else ""
        )
        raise NonFiniteError(
            f"{head}. Training stopped: {good}" + (f"; {when}" if when else "") + ". Lower "
            "the learning rate, check the inputs of that module, or use a mixed-precision "
            "recipe with a GradScaler",
            step=step,
            module=module,
            where=where,
        )

    def __repr__(self) -> str:
        return f"StepGuard(budget={self.budget}, check_grads={self.check_grads})"
