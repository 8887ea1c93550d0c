"""Index values alongside fake tensors, so value-dependent shapes can be planned.

A graph network's step selects edges with masks (``edge_index[:, mask]``) and sizes
scatters with ``index.max() + 1``: the output shape depends on the values of integer
and boolean tensors, which fake tensors do not have. :class:`IndexValues` keeps a real
copy of every integer or boolean tensor whose inputs are all known (the batch's index
tensors, integer buffers, ``arange``...), computes the same op on the copies, and so
answers ``nonzero``, boolean-mask indexing and ``.item()`` with the true shapes and
numbers. Floating-point tensors stay fake; an op that needs their values still stops
the plan (the caller names it).
"""

from __future__ import annotations

import weakref

import torch
from torch._ops import OpOverload
from torch._subclasses import fake_tensor as _fake_tensor
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensor,
    FakeTensorMode,
    is_fake,
    unset_fake_temporarily,
)
from torch.utils._pytree import tree_flatten, tree_map

from labkit.plan._ctc import CTC_OPS, ctc_outputs
from labkit.plan._grouped_mm import GROUPED_MM_OPS, grouped_mm_outputs
from labkit.plan._kernels import keeps_a_buffer, real_layout
from labkit.trace.instrument import Observer

MAX_NUMEL = 1 << 22  # real copies above this many elements are not kept (memory)
_DEVICE = torch.ops.prim.device.default
# what FakeTensorMode answers a fake tensor's device query with (its fake device, or meta
# inside a kernel), asked of it directly: autograd asks ~30 times a Linear call, and each
# query dispatched goes through every Python mode on the stack
_device_of_fake = getattr(_fake_tensor, "_device_handler", None)
_VALUE_ERRORS = (DataDependentOutputException, DynamicOutputShapeException)
_aten = torch.ops.aten
# ops taking a list of index tensors, where a boolean mask's shape depends on its values
_INDEX_OPS = frozenset(
    {
        _aten.index.Tensor,
        _aten.index_put.default,
        _aten.index_put_.default,
        _aten._index_put_impl_.default,
    }
)


def _indexlike(t: object) -> bool:
    return isinstance(t, torch.Tensor) and not (t.is_floating_point() or t.is_complex())


class IndexValues(Observer):
    """Real copies of integer/boolean fake tensors, computed op by op: an observer of the
    recording that runs its aten ops (``runs_ops``), inside the fake mode.

    Args:
        fake: The fake-tensor mode the step runs under.
    """

    runs_ops = True

    def __init__(self, fake: FakeTensorMode) -> None:
        self.fake = fake
        self._values: dict[int, tuple[weakref.ref[torch.Tensor], torch.Tensor]] = {}
        self.computed = 0  # ops computed on real copies
        self.notes: list[str] = []  # what the plan could not count (the kernels' rules)

    def __repr__(self) -> str:
        return f"IndexValues(known={len(self._values)}, computed={self.computed})"

    def know(self, fake_t: torch.Tensor, real: torch.Tensor) -> None:
        """Record ``real`` as the value of ``fake_t`` (an integer or boolean tensor)."""
        if _indexlike(fake_t) and real.numel() <= MAX_NUMEL:
            key = id(fake_t)

            def forget(_ref: weakref.ref[torch.Tensor], k: int = key) -> None:
                self._drop(k)

            self._values[key] = (weakref.ref(fake_t, forget), real)

    def _drop(self, key: int) -> None:
        self._values.pop(key, None)

    def value(self, t: object) -> torch.Tensor | None:
        """The real value of ``t``: a real tensor is its own (one the loss or the model
        captured, such as a boolean train mask); a fake one's recorded copy, or ``None``."""
        if type(t) is not FakeTensor and (  # the common case first: no is_fake call
            isinstance(t, torch.Tensor) and not is_fake(t) and t.device.type != "meta"
        ):
            return t
        entry = self._values.get(id(t))
        if entry is not None and entry[0]() is t:
            return entry[1]
        return None

    def run_op(
        self, func: OpOverload, args: tuple[object, ...], kwargs: dict[str, object]
    ) -> object:
        if func is _DEVICE:  # a fake tensor's device (autograd asks it of every gradient)
            return _device(args, kwargs)
        if args and type(args[0]) is FakeTensor and id(args[0]) not in self._values:
            # the common case on a plan: the first input is a fake without a known value, so
            # the output has none either; only an op that writes its inputs or takes masks
            # (looked up once per overload) needs the rest
            try:
                plain = _PLAIN[func]
            except KeyError:
                plain = _PLAIN[func] = func not in _SPECIAL and not _mutable(func)
            if plain:
                out = func(*args, **kwargs)
                if keeps_a_buffer(func):
                    return real_layout(func, args, kwargs, out, self.notes)
                return out
        if func in _SPECIAL:
            args, made = self._special(func, args, kwargs)
            if made is not None:
                return made
        tensors = _tensors(args, kwargs)
        value = self.value
        known = all(value(t) is not None for t in tensors)
        if not known and _mutable(func):
            for t in tensors:  # written from unknown values: its copy would be stale
                self._drop(id(t))
        try:
            out = func(*args, **kwargs)
        except _VALUE_ERRORS:
            if not known:
                raise
            real = self._real(func, args, kwargs)
            if not isinstance(real, torch.Tensor):
                return real  # .item() of a known tensor
            out = self.fake.from_tensor(real)
            self.know(out, real)
            return out
        if not known:  # the common case on a plan: a float tensor among the inputs
            return out
        outs = [o for o in tree_flatten(out)[0] if isinstance(o, torch.Tensor)]
        if outs and all(_indexlike(o) and o.numel() <= MAX_NUMEL for o in outs):
            real = self._real(func, args, kwargs)
            self._pair(out, real)
        return out

    def _special(
        self, func: OpOverload, args: tuple[object, ...], kwargs: dict[str, object]
    ) -> tuple[tuple[object, ...], object]:
        """``(args, None)``, boolean masks among an index op's indices made indices; or
        ``(args, outputs)`` of a CTC op made from its lengths' values (where known), or of
        a grouped matmul on float CPU tensors (the meta kernel checks for CUDA's bfloat16)."""
        if func in _INDEX_OPS:
            return self._masks_as_indices(args), None
        if func in GROUPED_MM_OPS:
            return args, grouped_mm_outputs(func, args, kwargs)
        return args, ctc_outputs(func, args, kwargs, self.value)

    def _masks_as_indices(self, args: tuple[object, ...]) -> tuple[object, ...]:
        """``x[mask]`` with a known boolean mask becomes ``x[i, j, ...]`` with the mask's
        nonzero positions: the same result, and a shape fake tensors can compute."""
        indices = args[1] if len(args) >= 2 else None
        if not isinstance(indices, (list, tuple)):
            return args
        new: list[object] = []
        changed = False
        for ix in indices:
            real = self.value(ix) if isinstance(ix, torch.Tensor) else None
            if real is None or real.dtype not in (torch.bool, torch.uint8):
                new.append(ix)
                continue
            changed = True
            with unset_fake_temporarily():
                cols = real.nonzero().unbind(1)
            for col in cols:
                f = self.fake.from_tensor(col)
                self.know(f, col)
                new.append(f)
        return (args[0], new, *args[2:]) if changed else args

    def _real(
        self, func: OpOverload, args: tuple[object, ...], kwargs: dict[str, object]
    ) -> object:
        self.computed += 1

        def unwrap(a: object) -> object:
            return self.value(a) if isinstance(a, torch.Tensor) else a

        with unset_fake_temporarily():
            return func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs))

    def _pair(self, out: object, real: object) -> None:
        outs, _ = tree_flatten(out)
        reals, _ = tree_flatten(real)
        for o, r in zip(outs, reals, strict=False):
            if isinstance(o, torch.Tensor) and isinstance(r, torch.Tensor):
                self.know(o, r)


def _device(args: tuple[object, ...], kwargs: dict[str, object]) -> object:
    """``prim.device`` of a fake tensor, answered directly where torch allows it."""
    if _device_of_fake is not None and len(args) == 1 and type(args[0]) is FakeTensor:
        return _device_of_fake(args)
    return _DEVICE(*args, **kwargs)


# ops whose arguments or outputs IndexValues makes itself
_SPECIAL = _INDEX_OPS | CTC_OPS | GROUPED_MM_OPS
_MUTABLE: dict[OpOverload, bool] = {}
_PLAIN: dict[OpOverload, bool] = {}  # neither writes an input nor takes a list of masks


def _mutable(func: OpOverload) -> bool:
    """Whether an aten overload writes one of its inputs (looked up once per overload)."""
    hit = _MUTABLE.get(func)
    if hit is None:
        hit = _MUTABLE[func] = bool(func._schema.is_mutable)
    return hit


def _tensors(args: tuple[object, ...], kwargs: dict[str, object]) -> list[torch.Tensor]:
    """The tensors among an aten op's arguments (a tensor, or a list of them: ``Tensor[]``,
    ``Tensor?[]``), as ``tree_flatten`` finds them, without its cost per op."""
    out: list[torch.Tensor] = []
    for a in (*args, *kwargs.values()):
        if isinstance(a, torch.Tensor):
            out.append(a)
        elif isinstance(a, (list, tuple, dict)):
            out.extend(t for t in tree_flatten(a)[0] if isinstance(t, torch.Tensor))
    return out


def seed_values(values: IndexValues, fake: object, real: object) -> None:
    """Record the real integer/boolean tensors of a batch for their fakes (same structure)."""
    if isinstance(real, torch.Tensor):
        if isinstance(fake, torch.Tensor) and real.device.type != "meta":
            values.know(fake, real.detach().clone())
    elif isinstance(real, dict) and isinstance(fake, dict):
        for k, v in real.items():
            seed_values(values, fake.get(k), v)
    elif isinstance(real, (list, tuple)) and isinstance(fake, (list, tuple)):
        for a, b in zip(fake, real, strict=False):
            seed_values(values, a, b)
    elif hasattr(real, "to_dict") and hasattr(fake, "to_dict"):  # PyG Data
        seed_values(values, fake.to_dict(), real.to_dict())
