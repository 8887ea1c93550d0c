"""What a step reaches outside the model, saved on first sight and put back afterwards.

A loss or a forward may call modules the model does not hold as submodules (a module in a
plain list attribute, one only a closure names, a GAN's discriminator or a frozen teacher
the loss calls) or use a foreign module's parameters directly (a list of them captured
before the call). :class:`StepState` saves only the model's own state, so while the step
is recorded a global module forward-pre-hook saves each foreign module the first time it
is called or set to train or eval (its parameters, buffers, ``.grad``, attributes and
``training`` flags, as :class:`StepState` saves the model's), and a torch-function mode
saves each foreign leaf tensor that requires grad (or a foreign ``Parameter``) the first
time an op reaches it: its values, ``requires_grad`` and ``.grad`` (an existing ``.grad``
keeps its identity and its values: backward accumulates into it in place). Both save before
the step changes anything of theirs: a module's forward has not run yet, backward comes
after the op.

The saves run with every mode disabled, so the recording never sees their copies (the
memory figures are the step's own). Only the recording is watched: the timing passes run
the same step, which reaches the same things.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import _disable_current_modes

from labkit.trace._raw import parameters_of
from labkit.trace.state import StepState, _has_values, _Saved

__all__ = ["ForeignState"]

_Tensor = torch.Tensor
_Parameter = torch.nn.Parameter
_no_torch_function = torch._C.DisableTorchFunction


class _Leaf:
    """A foreign leaf tensor: its values, ``requires_grad`` and ``.grad`` (identity and
    values)."""

    __slots__ = ("grad", "grad_copy", "requires_grad", "t", "values")

    def __init__(self, t: torch.Tensor) -> None:
        self.t, self.requires_grad, self.grad = t, t.requires_grad, t.grad
        self.values = _Saved(t) if _has_values(t) else None
        g = self.grad
        self.grad_copy = _Saved(g) if g is not None and _has_values(g) else None

    def restore(self) -> None:
        t = self.t
        if self.values is not None:
            self.values.restore()
        if self.grad_copy is not None:
            self.grad_copy.restore()
        if t.grad is not self.grad:
            t.grad = self.grad
        if t.requires_grad != self.requires_grad:
            t.requires_grad_(self.requires_grad)


class ForeignState:
    """What a step reaches outside ``model``, saved while :meth:`watching` and put back by
    :meth:`restore`.

    Args:
        model: The model (its own state is :class:`StepState`'s).
        restored: ``restored(tensor)``: whether the model's snapshot already puts that
            tensor back (an input, an optimizer's state): not saved again here.

    Example:
        >>> import torch
        >>> model, teacher = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
        >>> x = torch.randn(4, 3)
        >>> foreign = ForeignState(model)
        >>> with foreign.watching():
        ...     (model(x) - teacher(x)).pow(2).sum().backward()
        >>> foreign.restore()
        >>> teacher.weight.grad is None, model.weight.grad is not None
        (True, True)
    """

    def __init__(
        self,
        model: torch.nn.Module,
        restored: Callable[[torch.Tensor], bool] = lambda t: False,
    ) -> None:
        self._restored = restored
        self._modules_seen = {id(m) for m in model.modules()}
        self._tensors_seen = {id(p) for p in parameters_of(model)}
        for b in model.buffers():
            self._tensors_seen.add(id(b))
        self.modules: list[torch.nn.Module] = []  # foreign modules, in order of first call
        self.leaves: list[torch.Tensor] = []  # foreign leaf tensors, in order of first use
        self._saved: list[StepState | _Leaf] = []

    def __repr__(self) -> str:
        return f"ForeignState(modules={len(self.modules)}, tensors={len(self.leaves)})"

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        """Save what the step reaches outside the model, on first sight, while entered."""
        handle = torch.nn.modules.module.register_module_forward_pre_hook(self._module_call)
        try:
            with _Reached(self), _saved_before_train(self._module_call):
                yield
        finally:
            handle.remove()

    def _module_call(self, module: torch.nn.Module, args: object) -> None:
        if id(module) in self._modules_seen:
            return
        with _unseen():
            subs = [m for m in module.modules() if id(m) not in self._modules_seen]
            for m in subs:
                self._modules_seen.add(id(m))
            for m in subs:
                for t in (*m.parameters(recurse=False), *m.buffers(recurse=False)):
                    self._tensors_seen.add(id(t))
            self.modules.append(module)
            self._saved.append(_module_state(module))

    def _tensor(self, t: torch.Tensor) -> None:
        """An op reached ``t``, not seen before."""
        if not t.is_leaf or not (t.requires_grad or type(t) is _Parameter):
            return  # a step-made tensor: nothing of the user's
        self._tensors_seen.add(id(t))
        if self._restored(t):
            return
        with _unseen():
            self.leaves.append(t)
            self._saved.append(_Leaf(t))

    def keep(self) -> None:
        """Save again what was reached, as it is now: :meth:`restore` then puts this back
        (``keep_step=True`` keeps one step's changes)."""
        with _unseen():
            self._saved = [_module_state(m) for m in self.modules]
            self._saved += [_Leaf(t) for t in self.leaves]

    def restore(self) -> None:
        """Put back what was saved (the last save of each first: the earliest wins)."""
        with _unseen():
            for s in reversed(self._saved):
                s.restore()


@contextlib.contextmanager
def _saved_before_train(save: Callable[[torch.nn.Module, object], None]) -> Iterator[None]:
    """``Module.train`` (and ``eval``, which calls it) saves a module first: a loss may set
    a foreign teacher to eval before its first call, when no forward hook has seen it yet.
    Class attribute swapped while entered; an override that calls ``super().train`` is
    covered, one that sets ``training`` itself is not."""
    Module = torch.nn.Module
    train = Module.__dict__["train"]

    def saving_train(module: torch.nn.Module, mode: bool = True) -> torch.nn.Module:
        save(module, ())
        return train(module, mode)

    Module.train = saving_train  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        Module.train = train  # type: ignore[method-assign]


def _module_state(module: torch.nn.Module) -> StepState:
    return StepState(module, rng=False)


@contextlib.contextmanager
def _unseen() -> Iterator[None]:
    """No mode sees what runs inside (the recording's modes, this module's own), and no
    graph is built: the saves are not the step's."""
    with _disable_current_modes(), _no_torch_function(), torch.no_grad():
        yield


class _Reached(TorchFunctionMode):
    """Hands each tensor an op reaches, not seen before, to :meth:`ForeignState._tensor`:
    one set lookup per tensor argument."""

    def __init__(self, owner: ForeignState) -> None:
        super().__init__()
        self.owner, self.seen = owner, owner._tensors_seen

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        seen = self.seen
        for a in args:
            if isinstance(a, _Tensor):
                if id(a) not in seen:
                    self.owner._tensor(a)
            elif type(a) is list or type(a) is tuple:  # torch.cat, _foreach_* ops
                for b in a:
                    if isinstance(b, _Tensor) and id(b) not in seen:
                        self.owner._tensor(b)
        if kwargs:
            for a in kwargs.values():
                if isinstance(a, _Tensor) and id(a) not in seen:
                    self.owner._tensor(a)
        return func(*args, **(kwargs or {}))
