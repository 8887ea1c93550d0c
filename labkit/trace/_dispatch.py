"""The private adapters of the instrumentation layer: one torch-function mode, one dispatch
mode, saved-tensor hooks and the global hooks (optimizer steps, gradient accumulation).

Each forwards what it sees to the :class:`~labkit.trace.instrument.Instrumentation`,
which passes it on to its observers.
"""

from __future__ import annotations

import importlib
import math
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Collection
from contextlib import AbstractContextManager, suppress
from typing import TYPE_CHECKING, Protocol

import torch
from torch._ops import OpOverload, OpOverloadPacket
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map
from torch.utils.flop_counter import (
    flop_registry,
    get_shape,
    sdpa_backward_flop_count,
    sdpa_flop_count,
    shape_wrapper,
)
from torch.utils.hooks import RemovableHandle

from labkit._tensors import flat_tensors
from labkit.trace._raw import parameters_of

if TYPE_CHECKING:
    from labkit.trace.instrument import Instrumentation

_perf = time.perf_counter

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

# queries every observer ignores (no FLOPs, no tensor made): passed straight through. A
# fake tensor's device is one (autograd asks it of every gradient: ~17 times a Linear call)
_QUERIES = _META_OPS | {torch.ops.prim.device.default}
# the same, by ``id``: an ``OpOverload``'s ``__hash__`` is Python code (~0.5 us a lookup, a
# few per op); overloads live as long as the process, so their ids stay theirs
_QUERY_IDS = frozenset(id(f) for f in _QUERIES)
_set_eval_frame = torch._C._dynamo.eval_frame.set_eval_frame
_no_torch_function = torch._C.DisableTorchFunction

_DUNDER_NAMES = {"matmul": "matmul", "getitem": "getitem", "neg": "neg", "pow": "pow"}


def op_name(func: Callable[..., object]) -> str:
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


def _sdpa_cpu_flop(
    query_shape: torch.Size,
    key_shape: torch.Size,
    value_shape: torch.Size,
    *args: object,
    out_shape: torch.Size | None = None,
    **kwargs: object,
) -> int:
    """CPU flash attention: torch's SDPA formula (its two matmuls), as for the CUDA kernels."""
    return int(sdpa_flop_count(query_shape, key_shape, value_shape))


def _sdpa_cpu_backward_flop(
    grad_out_shape: torch.Size,
    query_shape: torch.Size,
    key_shape: torch.Size,
    value_shape: torch.Size,
    *args: object,
    out_shape: torch.Size | None = None,
    **kwargs: object,
) -> int:
    """Its backward: torch's SDPA backward formula (the gradients' matmuls and the scores'
    recomputation), as for the CUDA kernels."""
    return int(sdpa_backward_flop_count(grad_out_shape, query_shape, key_shape, value_shape))


def _grouped_mm_flop(
    a_shape: torch.Size,
    b_shape: torch.Size,
    *args: object,
    out_shape: torch.Size | None = None,
    **kwargs: object,
) -> int:
    """A grouped matmul (mixture-of-experts layers): each output element is one dot product
    of the contracted size, so ``2 * out.numel() * K``; with both inputs 2-D the groups
    split K and the output stacks them (G x M x N), so ``2 * M * N * K`` once."""
    if len(a_shape) == 2 and len(b_shape) == 2:
        return 2 * a_shape[0] * b_shape[1] * a_shape[1]
    assert out_shape is not None
    return 2 * math.prod(out_shape) * a_shape[-1]


#: FLOP formulas ``torch.utils.flop_counter`` lacks, by aten op, in the form
#: ``FlopCounterMode(custom_mapping=...)`` takes (a reference counting as labkit does).
FlopFormula = Callable[..., int]  # FlopCounterMode's form: shapes and arguments -> FLOPs
EXTRA_FLOP_FORMULAS: dict[OpOverloadPacket, FlopFormula] = {
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: _sdpa_cpu_flop,
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward: _sdpa_cpu_backward_flop,
    torch.ops.aten._grouped_mm: _grouped_mm_flop,
}
_EXTRA = {op: shape_wrapper(f) for op, f in EXTRA_FLOP_FORMULAS.items()}

# aten ops whose work is mostly multiply-adds, by name: one without a formula is worth a
# caveat (an elementwise op without one is not: FlopCounterMode counts no elementwise work)
_COMPUTE = re.compile(
    r"attention|conv|matmul|linear|einsum|(^|_)[a-z0-9]*mm($|_)|lstm|gru|rnn|fused|mkldnn|"
    r"cudnn|miopen|fft|embedding_bag|quantized|int4|int8|fp8"
)
# namespaces of ops that are not computation (profiling, collectives, compiler plumbing)
_NOT_COMPUTE_NS = frozenset(
    {
        "profiler",
        "c10d",
        "_c10d_functional",
        "_c10d_functional_autograd",
        "_dtensor",
        "inductor",
        "prim",
        "prims",
        "debugprims",
    }
)
_UNCOUNTED: dict[OpOverload, bool] = {}


def uncounted(func: OpOverload) -> bool:
    """Whether an aten overload that ran without a FLOP formula computes enough that its
    missing FLOPs deserve a caveat: a custom op (not ``aten``), or an aten op named for
    matrix or attention work (``_weight_int8pack_mm``, ...)."""
    hit = _UNCOUNTED.get(func)
    if hit is None:
        ns = getattr(func, "namespace", "aten")
        name = func.name().split("::")[-1] if hasattr(func, "name") else str(func)
        hit = (ns not in _NOT_COMPUTE_NS and ns != "aten") or (
            ns == "aten" and bool(_COMPUTE.search(name))
        )
        _UNCOUNTED[func] = hit
    return hit


def flop_formula(func: OpOverload) -> FlopFormula | None:
    """The FLOP formula for an aten overload (``torch.utils.flop_counter``'s, or labkit's
    where torch has none: CPU attention), or ``None``."""
    return per_op(func)[0]


# per aten overload, by id (the overload kept alive by the entry): (FLOP formula or None,
# may decompose, the overload): worked out once per overload, then one dict lookup per op
_PER_OP: dict[int, tuple[FlopFormula | None, bool, OpOverload]] = {}


def per_op(func: OpOverload) -> tuple[FlopFormula | None, bool, OpOverload]:
    """``(FLOP formula or None, may decompose, func)`` for an aten overload, cached by id."""
    hit = _PER_OP.get(id(func))
    if hit is None:
        formula, decomposable = _classify(func)
        hit = _PER_OP[id(func)] = (formula, decomposable, func)
    return hit


def _classify(func: OpOverload) -> tuple[FlopFormula | None, bool]:
    if func in _META_OPS:
        return None, False
    formula = flop_registry.get(func._overloadpacket) or _EXTRA.get(func._overloadpacket)
    decomposable = (
        formula is None and func is not torch.ops.prim.device.default and func._can_decompose()
    )
    return (_fast(formula) if formula is not None else None), decomposable


_WRAPPED_CODE = shape_wrapper(lambda: 0).__code__  # torch's shapes-instead-of-tensors wrapper


def _fast(formula: FlopFormula) -> FlopFormula:
    """``formula`` with torch's ``shape_wrapper`` done without ``tree_map``: the same
    function of the same shapes (a tensor becomes its ``.shape`` inside tuples, lists and
    dicts), at a fraction of the cost per op. Formulas registered raw are kept as they are."""
    inner = getattr(formula, "__wrapped__", None)
    if inner is None or getattr(formula, "__code__", None) is not _WRAPPED_CODE:
        return formula

    known: dict[object, int] = {}  # the same shapes and arguments: the same FLOPs

    def nf(*args: object, out_val: object = None, **kwargs: object) -> int:
        try:
            # the positional arguments' keys in one loop (a tensor's is its shape: most are)
            key: object = (
                tuple([a.shape if isinstance(a, _Tensor) else _sig(a) for a in args]),
                out_val.shape if isinstance(out_val, _Tensor) else _sig(out_val),
                _sig(kwargs) if kwargs else None,
            )
            hit = known.get(key)
        except TypeError:  # an argument without a plain value to key on
            key, hit = None, None
        if hit is not None:
            return hit
        shapes = [_shape(a) for a in args]
        named = {k: _shape(v) for k, v in kwargs.items()}
        n = int(inner(*shapes, out_shape=_shape(out_val), **named))
        if key is not None:
            if len(known) >= _KNOWN_MAX:
                known.clear()
            known[key] = n
        return n

    return nf


_KNOWN_MAX = 4096
_Tensor = torch.Tensor
_PLAIN = (int, float, bool, str, torch.dtype, torch.device, torch.memory_format, torch.layout)


def _sig(x: object) -> object:
    """What a FLOP formula sees of ``x`` (tensors as shapes, types kept), hashable;
    a ``TypeError`` for anything else (not cached). A tensor's key is its ``torch.Size``
    (a tuple of ints); every other key is ``None`` or starts with a type, so a shape and a
    tuple of ints differ."""
    if isinstance(x, torch.Tensor):
        return x.shape
    if x is None:
        return None
    kind = type(x)
    if kind is tuple or kind is list:
        return (kind, *[_sig(i) for i in x])  # type: ignore[attr-defined]
    if kind is dict:
        return (dict, *[(k, _sig(v)) for k, v in x.items()])  # type: ignore[attr-defined]
    if kind in _PLAIN:
        return (kind, x)
    raise TypeError(f"no FLOP cache key for {kind.__name__}")


def _shape(x: object) -> object:
    """``torch.utils.flop_counter.get_shape`` mapped over ``x`` as ``tree_map`` maps it."""
    if isinstance(x, torch.Tensor):
        return x.shape
    kind = type(x)
    if kind is tuple:
        return tuple([_shape(i) for i in x])  # type: ignore[attr-defined]
    if kind is list:
        return [_shape(i) for i in x]  # type: ignore[attr-defined]
    if kind is dict:
        return {k: _shape(v) for k, v in x.items()}  # type: ignore[attr-defined]
    if isinstance(x, (tuple, list, dict)):  # a named tuple, ...: as torch maps it
        return tree_map(get_shape, x)
    return x


class _FunctionMode(TorchFunctionMode):
    """Sees every torch-level call (``torch.cat``, ``+``, ``F.relu``) made in forward code."""

    def __init__(self, inst: Instrumentation) -> None:
        super().__init__()
        self.inst = inst

    def __torch_function__(
        self,
        func: Callable[..., object],
        types: Collection[type],
        args: tuple[object, ...] = (),
        kwargs: dict[str, object] | None = None,
    ) -> object:
        kwargs = kwargs or {}
        inst = self.inst
        if not inst.enabled or not inst.stack or inst.op is not None:
            return func(*args, **kwargs)
        name = getattr(func, "__name__", "")
        if name == "__get__":  # a property such as .T or .data: same producer, no node
            out = func(*args, **kwargs)
            for o in inst._fn_obs:
                o.alias(args[0] if args else None, out)
            return out
        if name in _SKIP_NAMES:
            return func(*args, **kwargs)
        if not inst.clock:  # nothing is timed: no clock reads per op
            node = inst.begin_op(op_name(func))
            try:
                out = func(*args, **kwargs)
            except BaseException:
                inst.op = None
                raise
            with torch._C.DisableTorchFunction():
                inst.end_op(node, func, args, kwargs, out, 0.0, bool(flat_tensors(out)))
            return out
        t_in = _perf()
        node = inst.begin_op(op_name(func))
        lost = inst.lost
        t0 = _perf()
        try:
            out = func(*args, **kwargs)
        except BaseException:
            inst.op = None
            raise
        t1 = _perf()
        elapsed = (t1 - t0) - (inst.lost - lost)
        with torch._C.DisableTorchFunction():
            inst.end_op(node, func, args, kwargs, out, elapsed, bool(flat_tensors(out)))
        inst.lost += (_perf() - t1) + (t0 - t_in)
        return out


class _DispatchMode(TorchDispatchMode):
    """Passes every aten op to the observers that want them; decomposes ops without a FLOP
    formula when an observer asks (``FlopCounterMode``'s rule), so per-module sums equal
    its total for the same step.

    ``TorchDispatchMode`` wraps a subclass's ``__torch_dispatch__`` in ``torch._dynamo``'s
    ``disable`` (three Python frames and four ``set_eval_frame`` calls an op, ~2 us: ~30 us
    a ``Linear`` call forward and backward). This class opts out of that wrapper and keeps
    what it is for, Dynamo never tracing the handler (a ``torch.compile``'d function called
    inside the model while the mode is on): the handler's code is marked for Dynamo to
    skip (:func:`_skip_handler`, once per recording) and it turns Dynamo off for what it
    calls with one ``set_eval_frame(None)``, put back after."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # the handler turns Dynamo off itself (see the class docstring)

    def __init__(self, inst: Instrumentation) -> None:
        super().__init__()
        self.inst = inst
        self.obs = tuple(o for o in inst.observers if o.needs_dispatch)
        self.decompose = any(o.decompose for o in self.obs)
        self.calls = tuple(o.dispatch for o in self.obs)  # bound once, not per op
        runners = [o for o in inst.observers if o.runs_ops]
        if len(runners) > 1:
            names = ", ".join(type(o).__name__ for o in runners)
            raise ValueError(f"one observer of a recording may run the ops, got {names}")
        self.run = runners[0].run_op if runners else None

    def __torch_dispatch__(
        self,
        func: OpOverload,
        types: Collection[type],
        args: tuple[object, ...] = (),
        kwargs: dict[str, object] | None = None,
    ) -> object:
        prior = _set_eval_frame(None)  # Dynamo never compiles this handler
        try:
            return self._dispatch(func, args, kwargs or {})
        finally:
            _set_eval_frame(prior)

    def _dispatch(
        self, func: OpOverload, args: tuple[object, ...], kwargs: dict[str, object]
    ) -> object:
        run = self.run
        if id(func) in _QUERY_IDS:  # a device or shape query: nothing to count, nothing made
            return func._op(*args, **kwargs) if run is None else run(func, args, kwargs)
        if self.decompose:
            hit = _PER_OP.get(id(func))
            if (hit or per_op(func))[1]:
                with self:
                    r = func.decompose(*args, **kwargs)
                    if r is not NotImplemented:
                        return r
        out = func._op(*args, **kwargs) if run is None else run(func, args, kwargs)
        inst = self.inst
        if inst.enabled:
            # the observers read tensors (``t.untyped_storage()``, ``t.shape``): not as calls
            # of the model's through the function mode (~12 a Linear call's backward)
            t_in = _perf() if inst.clock else 0.0
            with _no_torch_function():
                for see in self.calls:
                    see(func, args, kwargs, out)
            if inst.clock:
                inst.lost += _perf() - t_in
        return out


class _SavedHooks(torch.autograd.graph.saved_tensors_hooks):
    def __init__(self, inst: Instrumentation) -> None:
        obs = tuple(o for o in inst.observers if o.needs_saved)

        def pack(t: torch.Tensor) -> torch.Tensor:
            if inst.enabled:
                t_in = _perf()
                for o in obs:
                    o.saved(t)
                inst.lost += _perf() - t_in
            return t

        super().__init__(pack, _unpack)


def _unpack(t: torch.Tensor) -> torch.Tensor:
    return t


STACK_BYTES = 112 << 20
"""The C stack a recording may use (the soft ``RLIMIT_STACK`` raised to it, then put back).

Autograd frees a graph's nodes iteratively, unless Python wrappers of them were made (the
backward segment hooks are registered on them): then freeing the output of a chain of N
calls recurses N deep in C++, and 100,000 ``Linear`` calls in a loop overflowed Linux's
default 8 MiB (a segmentation fault where the step drops its output). 64 MiB held
100,000; 112 MiB stays under the 128 MiB the kernel keeps free below the main thread's
stack whatever the limit was at start."""


class _BigStack:
    """Raise the soft stack limit of the process to :data:`STACK_BYTES` while entered (on
    the main thread of a platform with ``resource``; elsewhere nothing)."""

    def __init__(self) -> None:
        self.old: tuple[int, int] | None = None

    def __enter__(self) -> None:
        try:
            import resource
        except ImportError:  # Windows
            return
        if threading.current_thread() is not threading.main_thread():
            return  # a thread's stack is fixed when it starts
        soft, hard = resource.getrlimit(resource.RLIMIT_STACK)
        want = STACK_BYTES if hard == resource.RLIM_INFINITY else min(hard, STACK_BYTES)
        if soft != resource.RLIM_INFINITY and soft < want:
            try:
                resource.setrlimit(resource.RLIMIT_STACK, (want, hard))
            except (ValueError, OSError):
                return
            self.old = (soft, hard)

    def __exit__(self, *exc: object) -> None:
        old, self.old = self.old, None
        if old is not None:
            import resource

            with suppress(ValueError, OSError):
                resource.setrlimit(resource.RLIMIT_STACK, old)


def _skip_handler() -> None:
    """Mark the dispatch handler's code for Dynamo to skip (a flag on the code object that
    Dynamo's frame evaluation reads; set again each recording, as ``torch._dynamo.reset()``
    may clear it). A torch without ``skip_code`` gets torch's own wrapper back."""
    import torch._dynamo.eval_frame as eval_frame

    handler = _DispatchMode.__dict__["__torch_dispatch__"]
    skip = getattr(eval_frame, "skip_code", None)
    if skip is not None:
        skip(handler.__code__)
    elif not getattr(handler, "_torchdynamo_disable", False):
        wrapped = torch._disable_dynamo(handler, recursive=True)  # type: ignore[attr-defined]
        _DispatchMode.__torch_dispatch__ = wrapped  # type: ignore[method-assign]


def contexts(inst: Instrumentation) -> list[AbstractContextManager[object]]:
    """The modes and hooks one recording enters, outermost first."""
    out: list[AbstractContextManager[object]] = [_BigStack()]
    obs = inst.observers
    if inst.ops:
        out.append(_FunctionMode(inst))
    if any(o.needs_saved for o in obs):
        out.append(_SavedHooks(inst))
    if any(o.needs_dispatch or o.runs_ops for o in obs):
        importlib.import_module("torch._dynamo")  # a dispatch mode's first op imports it (~2 s)
        _skip_handler()
        out.append(_DispatchMode(inst))
    return out


def global_handles(inst: Instrumentation) -> list[Removable]:
    """Optimizer step hooks (always: the phase must be right) and gradient hooks (when asked)."""
    from torch.optim.optimizer import (
        register_optimizer_step_post_hook,
        register_optimizer_step_pre_hook,
    )

    handles: list[Removable] = [
        register_optimizer_step_pre_hook(inst._opt_pre),
        register_optimizer_step_post_hook(inst._opt_post),
    ]
    if any(o.needs_grads for o in inst.observers):
        grads = _GradHooks(inst._grad)
        handles.append(grads.handle)
        try:  # not through the function mode entered already (6x the cost of a hook)
            with torch._C.DisableTorchFunction():
                for p in parameters_of(inst.model):
                    if p.requires_grad:
                        grads.add(p)
        except BaseException:
            for h in handles:
                h.remove()
            raise
    return handles


class Removable(Protocol):
    """What a recording takes out at its end: a ``RemovableHandle`` or one of labkit's."""

    def remove(self) -> None: ...


class _GradHooks:
    """One post-accumulate-grad hook on many parameters, put into each parameter's hook
    table as ``register_post_accumulate_grad_hook`` puts it (under one id for all, drawn
    from ``RemovableHandle``'s counter), without a ``RemovableHandle`` each (~5 us a
    parameter: 0.1 s for 20,000). :attr:`handle` takes every one out. A parameter whose
    table is not a dict (a subclass, another torch) gets the public call."""

    def __init__(self, hook: Callable[[torch.Tensor], object]) -> None:
        self.hook = hook
        self.id = RemovableHandle.next_id
        RemovableHandle.next_id += 1
        self.tables: list[dict[int, object]] = []
        self.handles: list[RemovableHandle] = []
        self.handle = _Remove(self.remove)

    def add(self, p: torch.Tensor) -> None:
        """Hook the leaf tensor ``p`` (after the hooks it has)."""
        if type(p) is torch.nn.Parameter or type(p) is torch.Tensor:
            table = p._post_accumulate_grad_hooks
            if table is None:
                p._post_accumulate_grad_hooks = table = OrderedDict()
            if isinstance(table, dict) and p.grad_fn is None:
                table[self.id] = self.hook
                self.tables.append(table)
                return
        self.handles.append(p.register_post_accumulate_grad_hook(self.hook))

    def remove(self) -> None:
        """Take every hook out (each once, however often called)."""
        tables, self.tables = self.tables, []
        handles, self.handles = self.handles, []
        for table in tables:
            table.pop(self.id, None)
        for h in handles:
            h.remove()


class _Remove:
    """A handle whose :meth:`remove` calls ``remove`` (as a ``RemovableHandle``'s does)."""

    def __init__(self, remove: Callable[[], None]) -> None:
        self.remove = remove
