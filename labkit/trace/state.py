"""What a step can touch, saved before it and put back after: measuring changes nothing.

A :class:`StepState` holds the model's parameters and buffers (their values, and which
tensor each module slot held, so a reassigned buffer comes back), parameter ``.grad``,
the inputs' values and ``.grad``, the optimizers' state and param groups, a GradScaler's
state, plain attributes of every module (a Python counter, a flag, a cached tensor),
``training`` flags and the random number generators (torch CPU and CUDA, Python's
``random``, NumPy's global one). :meth:`StepState.restore` puts all of it back.

Values are written back through ``.data`` so a tensor's autograd version counter does not
move: a graph built before the call (``loss = model(x)``, then ``labkit.trace(...)``,
then ``loss.backward()``) stays valid. Copies of CUDA tensors are kept on the host.

Lists, dicts, sets and plain Python objects a module holds get their contents back one
level deep (a list appended to, a config attribute set, a counter in a stats object);
what changed further inside them is named by :meth:`StepState.changes`.
"""

from __future__ import annotations

import random
import sys
import types
from collections import deque
from collections.abc import Iterable
from typing import Any

import torch
from torch._subclasses.fake_tensor import is_fake
from torch.multiprocessing.reductions import StorageWeakRef

from labkit._tensors import is_wrapper, named_tensors, plain_tensors
from labkit.trace._generators import SavedGenerators
from labkit.trace._raw import parameters_of

__all__ = ["StepState"]

# nn.Module's own bookkeeping (hooks labkit installs included): never compared or restored
_MODULE_INTERNALS = frozenset(vars(torch.nn.Module())) | {"_compiled_call_impl"}
_OPT_INTERNALS = frozenset({"state", "param_groups", "defaults"})
_SCALARS = (int, float, bool, str, bytes, complex, type(None))


_PLAIN_TYPES = (torch.Tensor, torch.nn.Parameter)
_is_functional = torch._is_functional_tensor
_is_functorch_wrapped = torch._C._functorch.is_functorch_wrapped_tensor


def _has_values(t: torch.Tensor) -> bool:
    """Whether ``t`` holds real memory (not meta, not a fake tensor of a plan)."""
    if t.is_meta or t.is_sparse:
        return False
    if type(t) in _PLAIN_TYPES and not _is_functional(t) and not _is_functorch_wrapped(t):
        return True  # what is_fake answers for these, without its isinstance checks
    return not is_fake(t)


class _Saved:
    """One tensor: where its values lived (to undo a ``.data =``) and a copy of them.

    The storage is held weakly: a step that replaces a tensor through ``.data`` (an EMA
    written as ``p.data = ...``) frees the old storage there and then, as the same step
    outside labkit does, so memory figures count no storage that only labkit kept alive.
    When it is put back, the old storage is reused if something else still holds it
    (a view the user kept), and a new one of the same layout is made if not.

    Made and restored under ``torch.no_grad()``, which :class:`StepState` enters once
    around all of them (entering it per tensor cost more than the copies: ~20 us a
    tensor, 0.4 s for a model of 10,000 ``Linear`` layers)."""

    __slots__ = ("copy", "layout", "nbytes", "ptr", "ref", "t")

    def __init__(self, t: torch.Tensor) -> None:
        self.t = t
        src = t.detach()
        storage = src.untyped_storage()
        self.ref = StorageWeakRef(storage)
        self.ptr = storage.data_ptr()
        self.layout = (src.dtype, src.device, src.shape, src.stride(), src.storage_offset())
        self.nbytes = storage.nbytes()
        once = _each_element_once(src)
        self.copy = once.to("cpu", copy=True) if once.is_cuda else once.clone()

    def restore(self) -> None:
        t = self.t
        dtype, device, shape, stride, offset = self.layout
        moved = (
            t.dtype != dtype
            or t.device != device
            or t.shape != shape
            or t.stride() != stride
            or t.storage_offset() != offset
            or t.untyped_storage().data_ptr() != self.ptr
        )
        if moved:  # reassigned through .data (an EMA written as p.data = ...)
            t.data = self._original()
        # .data: the version counter stays where it was
        _each_element_once(t.data).copy_(self.copy)

    def _original(self) -> torch.Tensor:
        """A tensor of the saved layout on the saved storage, or on a new one of its size
        where nothing holds the old one any more (its values are written next)."""
        dtype, device, shape, stride, offset = self.layout
        storage = torch.UntypedStorage._new_with_weak_ptr(self.ref.cdata)
        if storage is None:  # as big as the old one: a copy of a whole storage fits it
            storage = torch.UntypedStorage(self.nbytes, device=device)
        return torch.empty(0, dtype=dtype, device=device).set_(storage, offset, shape, stride)


def _each_element_once(t: torch.Tensor) -> torch.Tensor:
    """``t``, or where it repeats elements (an ``expand``ed buffer, stride 0) the view of
    the same memory that holds each element once: ``copy_`` refuses to write a tensor whose
    elements share memory, so a model with an expanded buffer could not be put back."""
    if torch._debug_has_internal_overlap(t) != 1:  # 0: none, 2: too hard to tell
        return t
    shape = [1 if st == 0 else n for n, st in zip(t.shape, t.stride(), strict=True)]
    once = t.as_strided(shape, t.stride(), t.storage_offset())
    if torch._debug_has_internal_overlap(once) == 1:  # windows that overlap: the storage
        return t.new_empty(0).set_(t.untyped_storage())
    return once


def _save(t: torch.Tensor, seen: dict[int, _Saved]) -> None:
    """Save ``t`` once; a wrapper subclass (a quantized weight) through its inner tensors."""
    for inner in plain_tensors(t) if is_wrapper(t) else (t,):
        if id(inner) not in seen and _has_values(inner):
            seen[id(inner)] = _Saved(inner)


# what a container or a plain object held: a dict's (or an object's attributes') items, or
# the elements of a list, set or deque
Contents = dict[Any, object] | list[object]


def _items(v: object) -> list[object]:
    """What a watched thing holds (capped: a picture, not a copy of everything)."""
    if isinstance(v, dict):
        return list(v.values())[:256]
    if isinstance(v, (list, set, deque)):
        return list(v)[:256]
    return list(vars(v).values())[:256]


def _fingerprint(v: object) -> tuple[object, ...]:
    """A shallow picture of a container or a plain object: its length and what it holds,
    scalars by value, anything else by identity (an ``int`` counter incremented shows)."""
    if isinstance(v, dict):
        return (len(v), tuple((k, _ident(x)) for k, x in list(v.items())[:256]))
    if isinstance(v, (list, set, deque)):
        return (len(v), tuple(_ident(x) for x in list(v)[:256]))
    return _fingerprint(vars(v))


def _nested(v: object) -> dict[int, tuple[object, ...]]:
    """The pictures of the watched things one level inside ``v``, by identity."""
    return {id(x): _fingerprint(x) for x in _items(v) if _watched(x)}


def _ident(x: object) -> object:
    """A scalar by value (an equal string set again is no change), anything else by id."""
    return x if isinstance(x, _SCALARS) else id(x)


def _watched(v: object) -> bool:
    """A mutable thing whose contents a step may change in place: a list, dict, set or
    deque, or a plain Python object holding state (not a module, tensor, class, function)."""
    if isinstance(v, (list, dict, set, deque)):
        return True
    return (
        hasattr(v, "__dict__")
        and not isinstance(
            v,
            (
                torch.nn.Module,
                torch.Tensor,
                type,
                types.FunctionType,
                types.MethodType,
                types.ModuleType,
            ),
        )
        and not callable(v)
    )


def _contents(v: object) -> Contents:
    """A shallow copy of what ``v`` holds, to put back into ``v`` itself."""
    if isinstance(v, dict):
        return dict(v)
    if isinstance(v, (list, set, deque)):
        return list(v)
    return dict(vars(v))


def _put_back(v: object, items: Contents) -> None:
    if isinstance(v, list):
        v[:] = items
    elif isinstance(v, (set, deque)):
        v.clear()
        (v.update if isinstance(v, set) else v.extend)(items)
    else:
        d = v if isinstance(v, dict) else vars(v)
        assert isinstance(items, dict)  # _contents copied a dict or an object's attributes
        d.clear()
        d.update(items)


class _Attrs:
    """An object's plain attributes: which object each name held, tensors' values, and the
    contents of containers and plain objects one level deep (put back); what changed deeper
    inside them is named by :meth:`changed`, not undone."""

    def __init__(self, obj: object, where: str, skip: frozenset[str]) -> None:
        self.obj, self.where, self.skip = obj, where, skip
        d = vars(obj)
        self.names = {k: v for k, v in d.items() if k not in skip}
        self.tensors = [
            _Saved(v)
            for v in self.names.values()
            if isinstance(v, torch.Tensor)
            and not isinstance(v, torch.nn.Parameter)
            and _has_values(v)
        ]
        watched = [k for k, v in self.names.items() if _watched(v)]
        self.contents = {k: _contents(self.names[k]) for k in watched}
        self.nested = {k: _nested(self.names[k]) for k in watched}

    def changed(self) -> list[str]:
        """Attributes whose contents changed deeper than :meth:`restore` reaches (a list
        inside a dict appended to)."""
        out = []
        for k, before in self.nested.items():
            now = _nested(self.names[k])
            if any(now.get(i, fp) != fp for i, fp in before.items()):
                out.append(k)
        return out

    def restore(self) -> None:
        d = vars(self.obj)
        for k in [k for k in d if k not in self.skip and k not in self.names]:
            del d[k]  # made by the step (a cache): gone, as before
        for k, v in self.names.items():
            if d.get(k, _MISSING) is not v:
                d[k] = v
        for k, items in self.contents.items():
            _put_back(self.names[k], items)
        for s in self.tensors:
            s.restore()


_MISSING = object()


class StepState:
    """Everything one step can touch, saved now so :meth:`restore` can put it back.

    Args:
        model: The model (``None``: only inputs, optimizers and the RNG).
        inputs: The step's inputs: tensors or anything holding them (``(args, kwargs)``).
        optimizers: Optimizers whose state and param groups the step may change.
        scalers: ``torch.amp.GradScaler`` s the step may update.
        rng: Save the random number generators too.

    Example:
        >>> import torch
        >>> model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
        >>> x = torch.randn(4, 3)
        >>> before = model[1].running_mean.clone()
        >>> state = StepState(model, x)
        >>> model(x).sum().backward()
        >>> state.restore()
        >>> torch.equal(model[1].running_mean, before), model[0].weight.grad is None
        (True, True)
    """

    def __init__(
        self,
        model: torch.nn.Module | None,
        inputs: object = None,
        *,
        optimizers: Iterable[torch.optim.Optimizer] = (),
        scalers: Iterable[Any] = (),
        rng: bool = True,
    ) -> None:
        with torch.no_grad():  # once around every tensor saved (see _Saved)
            self._save_all(model, inputs, optimizers, scalers, rng)

    def _save_all(
        self,
        model: torch.nn.Module | None,
        inputs: object,
        optimizers: Iterable[torch.optim.Optimizer],
        scalers: Iterable[Any],
        rng: bool,
    ) -> None:
        self.model = model
        modules = list(model.named_modules(remove_duplicate=True)) if model is not None else []
        self._training = [(m, m.training) for _, m in modules]
        self._slots: list[tuple[dict[str, Any], str, Any]] = []
        seen: dict[int, _Saved] = {}
        for _, m in modules:
            if isinstance(m, torch.jit.ScriptModule):  # TorchScript owns its slots: values only
                for t in (*m.parameters(recurse=False), *m.buffers(recurse=False)):
                    _save(t, seen)
                continue
            for table in (m._parameters, m._buffers):
                for name, t in table.items():
                    self._slots.append((table, name, t))
                    if t is not None:
                        _save(t, seen)
        self._grads: list[tuple[torch.Tensor, torch.Tensor | None, _Saved | None]] = [
            (p, p.grad, _Saved(p.grad) if p.grad is not None and _has_values(p.grad) else None)
            for p in (parameters_of(model) if model is not None else ())
        ]
        # a module's own generator (``self.g = torch.Generator()``), advanced by every pass
        self._generators = SavedGenerators(v for _, m in modules for v in vars(m).values())
        # a step may freeze or unfreeze part of the model (``model.stem.requires_grad_(False)``)
        self._trainable = [(p, p.requires_grad) for p, _, _ in self._grads if p.is_leaf]
        self._attrs = [
            _Attrs(m, path, _MODULE_INTERNALS)
            for path, m in modules
            if not isinstance(m, torch.jit.ScriptModule)
        ]
        for _, t in named_tensors(inputs):
            if id(t) not in seen and _has_values(t):
                _save(t, seen)
                if t.is_leaf and t.requires_grad:
                    g = t.grad
                    self._grads.append((t, g, _Saved(g) if g is not None else None))
        self._opts = [_OptState(o) for o in optimizers]
        self._scalers = [_Attrs(s, type(s).__name__, frozenset()) for s in scalers]
        self._tensors = list(seen.values())
        self._rng = _rng_state() if rng else None
        self._ids: frozenset[int] | None = None

    def __repr__(self) -> str:
        name = type(self.model).__name__ if self.model is not None else None
        return (
            f"StepState(model={name}, tensors={len(self._tensors)}, "
            f"optimizers={len(self._opts)}, rng={self._rng is not None})"
        )

    def restores(self, t: torch.Tensor) -> bool:
        """Whether :meth:`restore` puts ``t``'s values back (a parameter, buffer, gradient,
        input or optimizer state tensor saved here)."""
        if self._ids is None:
            grads = (x for t, g, _ in self._grads for x in (t, g) if x is not None)
            opts = (s.t for o in self._opts for s in (*o.tensors, *o.group_tensors))
            self._ids = frozenset(id(x) for x in (*(s.t for s in self._tensors), *grads, *opts))
        return id(t) in self._ids

    def changes(self) -> list[str]:
        """What the step changed that :meth:`restore` cannot put back, in words: what is
        inside a module's list, dict, set or plain-object attribute, changed in place one
        level further down (``"module 'enc.0' (Memory): .log (a dict)"``)."""
        out = []
        for a in self._attrs:
            for k in a.changed():
                v = a.names[k]
                kind = (
                    f"a {type(v).__name__}"
                    if isinstance(v, (list, dict, set, deque))
                    else f"a {type(v).__name__} object"
                )
                where = f"module '{a.where}'" if a.where else "the root module"
                out.append(f"{where} ({type(a.obj).__name__}): .{k} ({kind})")
        return out

    def restore(self) -> None:
        """Put back everything saved (safe to call more than once)."""
        with torch.no_grad():  # once around every tensor put back (see _Saved)
            self._restore_all()

    def _restore_all(self) -> None:
        for m, flag in self._training:
            m.training = flag
        for table, name, t in self._slots:
            if table.get(name, _MISSING) is not t:
                table[name] = t
        for a in self._attrs:
            a.restore()
        for s in self._tensors:
            s.restore()
        for t, g, saved in self._grads:
            if saved is not None:
                saved.restore()
            if t.grad is not g:
                t.grad = g
        for t, flag in self._trainable:
            if t.requires_grad != flag:
                t.requires_grad_(flag)
        for o in self._opts:
            o.restore()
        for sc in self._scalers:
            sc.restore()
        self._generators.restore()
        if self._rng is not None:
            _set_rng_state(self._rng)


class _OptState:
    """An optimizer's per-parameter state, param groups and plain attributes."""

    def __init__(self, opt: torch.optim.Optimizer) -> None:
        self.opt = opt
        self.groups = list(opt.param_groups)
        self.group_items = [dict(g) for g in opt.param_groups]
        self.state = {p: (s, dict(s)) for p, s in opt.state.items()}
        self.tensors = [
            _Saved(v)
            for _, items in self.state.values()
            for v in items.values()
            if isinstance(v, torch.Tensor) and _has_values(v)
        ]
        self.group_tensors = [
            _Saved(v)
            for g in self.group_items
            for k, v in g.items()
            if k != "params" and isinstance(v, torch.Tensor) and _has_values(v)
        ]
        self.attrs = _Attrs(opt, type(opt).__name__, _OPT_INTERNALS | _hook_names(opt))

    def restore(self) -> None:
        opt = self.opt
        opt.param_groups[:] = self.groups
        for g, items in zip(self.groups, self.group_items, strict=True):
            g.clear()
            g.update(items)
        for p in [p for p in opt.state if p not in self.state]:
            del opt.state[p]
        for p, (s, items) in self.state.items():
            s.clear()
            s.update(items)
            opt.state[p] = s
        for t in (*self.tensors, *self.group_tensors):
            t.restore()
        self.attrs.restore()


def _hook_names(opt: torch.optim.Optimizer) -> frozenset[str]:
    return frozenset(k for k in vars(opt) if "hook" in k)


def _cuda_ready() -> bool:
    return torch.cuda.is_available() and torch.cuda.is_initialized()


def _rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if _cuda_ready():
        state["cuda"] = torch.cuda.get_rng_state_all()
    np = sys.modules.get("numpy")
    if np is not None:
        state["numpy"] = np.random.get_state()
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    if "cuda" in state:
        torch.cuda.set_rng_state_all(state["cuda"])
    if "numpy" in state:
        sys.modules["numpy"].random.set_state(state["numpy"])
