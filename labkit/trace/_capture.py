"""What full mode adds to module hooks: op capture, FLOP counting, saved-tensor bytes.

These are thin adapters: each forwards what it sees to the recorder's ``_on_*``
methods, which own all bookkeeping.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry

if TYPE_CHECKING:
    from labkit.trace.recorder import Recorder

# Tensor methods and functions that read metadata or convert: never graph nodes.
_SKIP_NAMES = frozenset(
    [
        "__set__",
        "size",
        "dim",
        "numel",
        "stride",
        "data_ptr",
        "is_contiguous",
        "element_size",
        "__len__",
        "__bool__",
        "item",
        "tolist",
        "__format__",
        "__repr__",
        "__hash__",
        "requires_grad_",
        "__iter__",
        "storage_offset",
        "is_floating_point",
        "get_device",
        "__reduce_ex__",
        "__setstate__",
        "__deepcopy__",
        "untyped_storage",
        "nelement",
        "ndimension",
        "is_complex",
        "__index__",
        "__int__",
        "__float__",
        "__array__",
        "register_hook",
        "retain_grad",
        "backward",
        "__contains__",
        "__dlpack__",
        "is_nonzero",
        "_is_view",
        "__torch_function__",
        "has_names",
        "numpy",
        "__setitem__",
        "__delitem__",
        "__instancecheck__",
    ]
)

# Dispatch-level metadata queries, skipped as FlopCounterMode skips them.
_META_OPS = frozenset(
    {
        torch.ops.aten.sym_is_contiguous.default,
        torch.ops.aten.is_contiguous.default,
        torch.ops.aten.is_contiguous.memory_format,
        torch.ops.aten.is_strides_like_format.default,
        torch.ops.aten.is_non_overlapping_and_dense.default,
        torch.ops.aten.size.default,
        torch.ops.aten.sym_size.default,
        torch.ops.aten.stride.default,
        torch.ops.aten.sym_stride.default,
        torch.ops.aten.storage_offset.default,
        torch.ops.aten.sym_storage_offset.default,
        torch.ops.aten.numel.default,
        torch.ops.aten.sym_numel.default,
        torch.ops.aten.dim.default,
        torch.ops.prim.layout.default,
    }
)

_DUNDER_NAMES = {"matmul": "matmul", "getitem": "getitem", "neg": "neg", "pow": "pow"}


def op_name(func: Any) -> str:
    """Readable name of a torch function: ``Tensor.__add__ -> 'add'``, ``F.relu -> 'relu'``."""
    name = getattr(func, "__name__", None) or str(func)
    if name.startswith("__") and name.endswith("__"):
        core = name[2:-2]
        if core.startswith("i") and core[1:] in ("add", "sub", "mul", "truediv", "and", "or"):
            return core[1:] + "_"
        if core.startswith("r") and core[1:] in ("add", "sub", "mul", "truediv", "matmul", "pow"):
            return core[1:]
        return _DUNDER_NAMES.get(core, core)
    return name


class OpCapture(TorchFunctionMode):
    """Sees every torch-level call (``torch.cat``, ``+``, ``F.relu``) made in forward code."""

    def __init__(self, recorder: Recorder) -> None:
        super().__init__()
        self.rec = recorder

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        kwargs = kwargs or {}
        rec = self.rec
        if not rec.enabled or not rec._stack:
            return func(*args, **kwargs)
        name = getattr(func, "__name__", "")
        if name == "__get__":  # a property such as .T or .data: same producer, no node
            out = func(*args, **kwargs)
            rec._on_alias(args[0] if args else None, out)
            return out
        if name in _SKIP_NAMES:
            return func(*args, **kwargs)
        rec._op_flops = 0
        t0 = time.perf_counter()
        out = func(*args, **kwargs)
        elapsed = time.perf_counter() - t0
        with torch._C.DisableTorchFunction():
            rec._on_op(op_name(func), args, kwargs, out, elapsed)
        return out


class FlopCapture(TorchDispatchMode):
    """Counts FLOPs per aten op with ``torch.utils.flop_counter``'s formulas.

    Mirrors ``FlopCounterMode``: ops without a formula are decomposed when they can
    be, so the per-module sums equal its total for the same step.
    """

    def __init__(self, recorder: Recorder) -> None:
        super().__init__()
        self.rec = recorder

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        kwargs = kwargs or {}
        try:
            formula, decomposable = _PER_OP[func]
        except KeyError:
            formula, decomposable = _PER_OP[func] = _classify(func)
        if decomposable:
            with self:
                r = func.decompose(*args, **kwargs)
                if r is not NotImplemented:
                    return r
        out = func(*args, **kwargs)
        rec = self.rec
        if formula is not None and rec.enabled:
            rec._on_flops(int(formula(*args, **kwargs, out_val=out)))
        memory = rec._memory
        if memory is not None and memory.active:
            memory.observe(func, out)
        return out


# per aten overload: (FLOP formula or None, may decompose): looked up once per op
_PER_OP: dict[Any, tuple[Any, bool]] = {}


def _classify(func: Any) -> tuple[Any, bool]:
    if func in _META_OPS:
        return None, False
    formula = flop_registry.get(func._overloadpacket)
    decomposable = (
        formula is None and func is not torch.ops.prim.device.default and func._can_decompose()
    )
    return formula, decomposable
