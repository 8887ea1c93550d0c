"""The user's own modules and tensors stand for their fake copies while a plan's step runs.

A loss (or a forward) often reaches the model from outside the step: an L2 penalty
``1e-4 * sum(p.pow(2).sum() for p in model.parameters())``, a term on ``model.fc.weight``,
an auxiliary loss read from ``model.moe.aux_loss`` that the forward set, the real model
called again on a second view of the batch, or a weight of another module the user holds.
Against a separate fake copy all of these reach the real model instead: the gradient of a
captured parameter landed on the real parameter and was not counted (the plan said 272 B
where the step takes 288 B), and an attribute the forward set was not there to read.

While the step runs, :class:`StandIn` gives each of the user's modules the state of its
fake copy (the copy's ``__dict__``: fake parameters and buffers, copied attributes, hooks),
with the user's modules as children again, so the step runs on the user's own module
objects and whatever reaches them sees the fake step; the user's dicts are never written
to and are put back in ``finally`` (on error and KeyboardInterrupt too). :class:`ToFake`, a
torch-function mode, maps any real tensor that still reaches an op (a parameter list the
loss captured before the call, a module only a global names) to its fake above autograd,
so autograd sees the fake leaf and the gradient lands there, counted as in the real step.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Iterable
from types import TracebackType
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.overrides import TorchFunctionMode

from labkit.plan._values import MAX_NUMEL, IndexValues
from labkit.plan.errors import PlanError

_INTERNALS = frozenset(vars(torch.nn.Module()))  # nn.Module's own tables and hook dicts
_REAL = (torch.Tensor, torch.nn.Parameter)
_SCAN = 1024  # elements of a list/dict attribute looked at (a picture, not a walk of data)


def _held(v: object) -> Iterable[object]:
    """What an attribute holds one level deep: itself, or a container's elements."""
    if isinstance(v, dict):
        return itertools.islice(v.values(), _SCAN)
    if isinstance(v, (list, tuple, set, frozenset)):
        return itertools.islice(v, _SCAN)
    return (v,)


def held_state(
    model: torch.nn.Module,
) -> tuple[list[torch.nn.Module], list[tuple[str, torch.Tensor]]]:
    """What the model's modules hold outside their tables, one level into containers:
    modules that are not submodules (``self.others = [emb]``: a weight shared with a module
    the user keeps apart), with their submodules, and tensors with a ``grad_fn`` (a loss
    kept from an earlier forward, which ``copy.deepcopy`` refuses to copy), each named by
    where it is held (``"module 'moe' .aux_loss"``)."""
    inside = {id(m) for m in model.modules()}
    foreign: dict[int, torch.nn.Module] = {}
    graphs: dict[int, tuple[str, torch.Tensor]] = {}
    todo = [(f"module '{p}'" if p else "the root module", m) for p, m in model.named_modules()]
    while todo:
        where, m = todo.pop()
        for k, v in vars(m).items():
            if k in _INTERNALS:
                continue
            for x in _held(v):
                if isinstance(x, torch.nn.Module) and not isinstance(x, torch.jit.ScriptModule):
                    for sub in x.modules():  # (TorchScript holds its own state: left as is)
                        if id(sub) not in inside and id(sub) not in foreign:
                            foreign[id(sub)] = sub
                            todo.append((f"a {type(sub).__name__} held apart", sub))
                elif isinstance(x, torch.Tensor) and x.grad_fn is not None:
                    graphs.setdefault(id(x), (f"{where} .{k}", x))
    return list(foreign.values()), list(graphs.values())


class StandIn:
    """While entered, each real module holds its fake copy's state (``__dict__``), whose
    children are the real modules again; on exit (error and KeyboardInterrupt too) each
    gets its own dict back, untouched.

    Args:
        pairs: ``(real module, its fake copy)``, the copy made by ``copy.deepcopy`` and of
            the same class (a copy of another class, as a class's own ``__deepcopy__`` may
            make, stays the copy: the step runs on it where it is a child, on the copy of the
            root where it is the root).

    Example:
        >>> real = torch.nn.Linear(2, 2)
        >>> copy_ = torch.nn.Linear(2, 2)
        >>> with StandIn([(real, copy_)]):
        ...     real.weight is copy_.weight
        True
        >>> real.weight is copy_.weight
        False
    """

    def __init__(self, pairs: Iterable[tuple[torch.nn.Module, torch.nn.Module]]) -> None:
        once: dict[int, tuple[torch.nn.Module, torch.nn.Module]] = {}
        for r, f in pairs:  # a module at two paths: once
            if r is not f:
                once.setdefault(id(r), (r, f))
        self.pairs = list(once.values())
        self._saved: list[tuple[torch.nn.Module, dict[str, Any]]] = []

    def __repr__(self) -> str:
        return f"StandIn(modules={len(self.pairs)}, entered={bool(self._saved)})"

    def covers(self, module: torch.nn.Module) -> bool:
        """Whether ``module`` holds its copy's state while entered."""
        return any(r is module for r, _ in self.pairs)

    def __enter__(self) -> StandIn:
        real_of = {id(f): r for r, f in self.pairs}
        try:
            for _, f in self.pairs:  # the copies' children become the real modules
                children = vars(f).get("_modules")
                if children:
                    for name, c in list(children.items()):
                        if c is not None and id(c) in real_of:
                            children[name] = real_of[id(c)]
            for r, f in self.pairs:
                self._saved.append((r, vars(r)))
                object.__setattr__(r, "__dict__", vars(f))
        except BaseException:
            self.restore()
            raise
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        err: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.restore()

    def restore(self) -> None:
        """Give every module its own dict back (safe to call more than once)."""
        saved, self._saved = self._saved, []
        for r, d in reversed(saved):
            object.__setattr__(r, "__dict__", d)


class ToFake(TorchFunctionMode):
    """A torch-function mode that hands every op the fake of a real tensor instead: the
    model's parameters and buffers and the batch's tensors (``table``: ``id(real) ->
    fake``), and any other real tensor met for the first time (a parameter of a module only
    a global names, a frozen teacher's weight or running statistics, a captured mask),
    which gets a fake of its own, kept for its next use. So no op of the step, in-place ones
    included, reaches a tensor of the user's; an integer or boolean one's values are given
    to ``values`` (:class:`~labkit.plan._values.IndexValues`) as a copy.

    A real leaf that requires grad gets a fake leaf on the planned device (its gradient
    lands there). A real tensor with a ``grad_fn`` (a graph built before the call) stops the
    plan with a :class:`~labkit.plan.PlanError`: a backward through it would reach real
    parameters.

    Args:
        table: ``id(real tensor) -> its fake``.
        keep: The real tensors of ``table`` (kept alive so their ids stay theirs).
        mode: The plan's fake-tensor mode.
        device: The planned device.
        values: Where integer and boolean tensors' values go (``None``: nowhere).
        stale: ``id(detached copy) -> (where, grad_fn's name, the copy)`` of tensors with a
            ``grad_fn`` a module held, copied detached: the step may overwrite them (a loss
            the forward sets again); one that reaches an op as it is is refused, naming
            where it is.
    """

    def __init__(
        self,
        table: dict[int, torch.Tensor],
        keep: list[torch.Tensor],
        mode: FakeTensorMode,
        device: torch.device,
        values: IndexValues | None = None,
        stale: dict[int, tuple[str, str, torch.Tensor]] | None = None,
    ) -> None:
        super().__init__()
        self.table, self.keep, self.mode, self.device = table, keep, mode, device
        self.values = values
        self.stale = stale or {}
        self.met: list[torch.Tensor] = []  # real tensors given a fake here, in order

    def __repr__(self) -> str:
        return f"ToFake(tensors={len(self.table)}, met={len(self.met)})"

    def __torch_function__(
        self,
        func: Callable[..., object],
        types: Collection[type],
        args: tuple[object, ...] = (),
        kwargs: dict[str, object] | None = None,
    ) -> object:
        args = self._args(args)
        if kwargs:
            kwargs = {k: self._one(v) for k, v in kwargs.items()}
        return func(*args, **(kwargs or {}))

    def _args(self, args: tuple[object, ...]) -> tuple[object, ...]:
        for a in args:  # the common case: nothing real in them, no new tuple
            kind = type(a)
            if kind is torch.Tensor or kind is torch.nn.Parameter or kind is list or kind is tuple:
                return tuple(self._one(a) for a in args)
        return args

    def _one(self, x: object) -> object:
        kind = type(x)
        if kind is torch.Tensor or kind is torch.nn.Parameter:
            assert isinstance(x, torch.Tensor)  # for mypy: the exact types just checked
            return self._fake_of(x)
        if kind is list or kind is tuple:
            assert isinstance(x, (list, tuple))
            if any(type(i) in _REAL for i in x):
                return kind(self._one(i) for i in x)
        return x

    def _fake_of(self, t: torch.Tensor) -> torch.Tensor:
        f = self.table.get(id(t))
        if f is not None:
            return f
        kept = self.stale.get(id(t))
        if kept is not None and kept[2] is t:
            where, graph, _ = kept
            raise PlanError(
                f"labkit.plan cannot predict this step: {where} holds a tensor computed "
                f"before the call (its grad_fn is {graph}), and the step uses it as it is, "
                "so its backward would reach the real parameters of an earlier graph (a "
                "weight tied as a transposed view made in __init__, a loss kept from an "
                "earlier forward). Compute it in forward, or keep it detached if it is a "
                "constant"
            )
        if t.requires_grad and t.grad_fn is not None:
            raise PlanError(
                f"labkit.plan cannot predict this step: the loss or the forward uses a real "
                f"tensor of shape {tuple(t.shape)} computed before the call (its grad_fn is "
                f"{type(t.grad_fn).__name__}), so its backward would reach the real "
                "parameters of an earlier graph. Compute it inside the step (in forward or "
                "in the loss), or .detach() it if it is a constant"
            )
        if t.requires_grad:
            f = _fake_leaf(t, self.mode, self.device)
        else:  # a constant (its own device, as the fake mode would convert it)
            indexlike = not (t.is_floating_point() or t.is_complex() or t.is_meta)
            indexlike = indexlike and t.numel() <= MAX_NUMEL  # (a data set's ids: not copied)
            f = self.mode.from_tensor(t)  # (a conversion: no op the observers see)
            with torch._C._DisableTorchDispatch():  # a real copy, not an op of the step
                copied = t.detach().clone() if indexlike and self.values is not None else None
            if self.values is not None and copied is not None:  # for value-dependent ops
                self.values.know(f, copied)
        self.table[id(t)] = f
        self.keep.append(t)
        self.met.append(t)
        return f


def _fake_leaf(t: torch.Tensor, mode: FakeTensorMode, device: torch.device) -> torch.Tensor:
    """A fake leaf with ``t``'s shape, strides and dtype on ``device`` that requires grad,
    made without an op (no allocation the plan's memory tracker would count: the real one
    existed before the step)."""
    with torch._C._DisableTorchDispatch():
        meta = torch.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype, device="meta")
        f = FakeTensor(mode, meta, device)
    return f.requires_grad_(True)
