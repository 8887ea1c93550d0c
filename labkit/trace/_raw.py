"""Mutable records the recorder fills while the model runs, and their conversion to a Trace."""

from __future__ import annotations

import bisect
import sys
import sysconfig
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from labkit.trace.model import (
    Edge,
    MemoryMeta,
    MemorySample,
    ModuleInfo,
    Node,
    TensorMeta,
    Trace,
    TraceMeta,
)

_DTYPE_NAMES: dict[torch.dtype, str] = {}
_DEVICE_NAMES: dict[torch.device, str] = {}


RawMeta = tuple[torch.Size, torch.dtype, torch.device, str]  # cheap to take in a hook


def raw_meta(t: torch.Tensor, name: str = "") -> RawMeta:
    """What a hook keeps of a tensor; :func:`freeze_meta` turns it into a TensorMeta later."""
    return (t.shape, t.dtype, t.device, name)


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.float32 -> 'float32'`` (cached)."""
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = str(dtype).removeprefix("torch.")
    return name


_FROZEN: dict[RawMeta, TensorMeta] = {}


def freeze_meta(raw: RawMeta) -> TensorMeta:
    """The TensorMeta of a raw description; equal descriptions share one object."""
    meta = _FROZEN.get(raw)
    if meta is None:
        shape, dtype, device, name = raw
        dv = _DEVICE_NAMES.get(device)
        if dv is None:
            dv = _DEVICE_NAMES[device] = str(device)
        meta = TensorMeta(tuple(shape), dtype_name(dtype), dv, name)
        if len(_FROZEN) < 65536:
            _FROZEN[raw] = meta
    return meta


class RawNode:
    """A node while it is being recorded (mutable; becomes a :class:`Node`)."""

    __slots__ = (
        "bwd_self",
        "call",
        "depth",
        "flops_bwd",
        "flops_fwd",
        "fwd_time",
        "id",
        "inputs",
        "key",
        "kind",
        "leaf",
        "lost0",
        "module",
        "name",
        "outputs",
        "parent",
        "pending",
        "saved_bytes",
        "seq0",
        "seq1",
        "t0",
        "type",
    )

    def __init__(self, id: int, kind: str, name: str, type: str, parent: RawNode | None) -> None:
        self.id = id
        self.kind = kind
        self.name = name
        self.type = type
        self.parent = parent
        self.depth: int = 0 if parent is None else parent.depth + 1
        self.module: str | None = None
        self.key = ""
        self.call = 0
        self.inputs: tuple[RawMeta, ...] = ()
        self.outputs: tuple[RawMeta, ...] = ()
        self.fwd_time = 0.0
        self.bwd_self = 0.0
        self.flops_fwd = 0
        self.flops_bwd = 0
        self.saved_bytes = 0
        self.seq0 = 0
        self.seq1 = 0
        self.t0 = 0.0
        self.lost0 = 0.0
        self.leaf = True  # no child nodes recorded (yet)
        self.pending: list[tuple[int, tuple[int, ...], torch.dtype]] = []


class Producers:
    """Which node produced each tensor, without keeping any tensor alive.

    Keyed by ``id``; each entry holds a weak reference so a recycled id is not mistaken
    for the tensor that died (cheaper than ``WeakIdKeyDictionary``, which allocates a
    reference object on every lookup).
    """

    __slots__ = ("_map",)

    def __init__(self) -> None:
        self._map: dict[int, tuple[weakref.ref[Any], int]] = {}

    def get(self, t: torch.Tensor) -> int | None:
        entry = self._map.get(id(t))
        if entry is not None and entry[0]() is t:
            return entry[1]
        return None

    def set(self, t: torch.Tensor, node_id: int) -> None:
        self._map[id(t)] = (weakref.ref(t), node_id)

    def __contains__(self, t: torch.Tensor) -> bool:
        return self.get(t) is not None


class CallIndex:
    """Finds the innermost module call that created an autograd node, by sequence number."""

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._calls: list[RawNode] = []

    def add(self, call: RawNode) -> None:
        self._starts.append(call.seq0)
        self._calls.append(call)

    def find(self, seq: int) -> RawNode | None:
        i = bisect.bisect_right(self._starts, seq) - 1
        if i < 0:
            return None
        call: RawNode | None = self._calls[i]
        while call is not None and not (call.seq0 <= seq < call.seq1):
            call = call.parent
        return call


def module_infos(model: torch.nn.Module, calls: dict[str, int]) -> tuple[ModuleInfo, ...]:
    """Parameters per module, each parameter counted once (at its first owner)."""
    seen: set[int] = set()
    out = []
    for path, mod in model.named_modules():
        params = trainable = nbytes = shared = 0
        for p in _own_parameters(mod):
            if id(p) in seen:
                shared += p.numel()
                continue
            seen.add(id(p))
            params += p.numel()
            nbytes += p.numel() * p.element_size()
            trainable += p.numel() if p.requires_grad else 0
        depth = 0 if not path else path.count(".") + 1
        out.append(
            ModuleInfo(
                path,
                type(mod).__name__,
                depth,
                params,
                nbytes,
                trainable,
                shared,
                calls.get(path, 0),
                library_of(type(mod)),
            )
        )
    return tuple(out)


def _own_parameters(mod: torch.nn.Module) -> list[torch.nn.Parameter]:
    """``mod.parameters(recurse=False)`` read from its table: the same parameters in the
    same order, each once (``parameters()`` walks a generator chain per module)."""
    out: list[torch.nn.Parameter] = []
    ids: set[int] = set()
    for p in mod._parameters.values():
        if p is not None and id(p) not in ids:
            ids.add(id(p))
            out.append(p)
    return out


def parameters_of(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    """``list(model.parameters())``: the same parameters in the same order, each once, read
    from the modules' tables (``parameters()`` nests generators per module and hashes each
    parameter through ``Tensor.__hash__``: ~3 us a module, walked several times a recording).
    A model that overrides ``parameters`` gets its own answer."""
    if type(model).parameters is not torch.nn.Module.parameters:
        return list(model.parameters())
    return _own(model, "_parameters")


def buffers_of(model: torch.nn.Module) -> list[torch.Tensor]:
    """``list(model.buffers())`` read alike (its own answer where ``buffers`` is overridden)."""
    if type(model).buffers is not torch.nn.Module.buffers:
        return list(model.buffers())
    return _own(model, "_buffers")


def _own(model: torch.nn.Module, table: str) -> list[Any]:
    out: list[Any] = []
    seen: set[int] = set()
    for m in model.modules():
        for t in getattr(m, table).values():
            if t is not None and id(t) not in seen:
                seen.add(id(t))
                out.append(t)
    return out


_LIBRARY: dict[type, str] = {}
_STDLIB = sysconfig.get_paths()["stdlib"]


def library_of(cls: type) -> str:
    """``cls.__module__`` when that module is installed library code (it lives in a
    site-packages or dist-packages folder, or the standard library), else ``""``: code in
    ``__main__``, a notebook, or the user's own (editable) package."""
    if cls not in _LIBRARY:
        name = cls.__module__
        path = getattr(sys.modules.get(name), "__file__", None) or ""
        parts = Path(path).parts
        installed = "site-packages" in parts or "dist-packages" in parts
        _LIBRARY[cls] = name if path and (installed or path.startswith(_STDLIB)) else ""
    return _LIBRARY[cls]


def build_trace(
    raw: list[RawNode],
    edges: list[tuple[int, int, Any, Any]],
    *,
    model: torch.nn.Module,
    meta: dict[str, Any],
    memory: Sequence[MemorySample] = (),
    memory_meta: MemoryMeta | None = None,
) -> Trace:
    """Freeze the recorded nodes into a :class:`Trace`."""
    ids = {r.id: i for i, r in enumerate(raw)}
    bwd_total = [r.bwd_self for r in raw]
    for r in reversed(raw):
        if r.parent is not None and r.kind == "module":
            bwd_total[ids[r.parent.id]] += bwd_total[ids[r.id]]
    nodes = tuple(
        Node(
            id=i,
            key=r.key,
            kind=r.kind,
            name=r.name,
            type=r.type,
            parent=None if r.parent is None else ids[r.parent.id],
            module=r.module,
            inputs=tuple(freeze_meta(m) for m in r.inputs),
            outputs=tuple(freeze_meta(m) for m in r.outputs),
            fwd_time=r.fwd_time,
            bwd_time=bwd_total[i] if r.kind == "module" else 0.0,
            bwd_self_time=r.bwd_self,
            flops_fwd=r.flops_fwd,
            flops_bwd=r.flops_bwd,
            saved_bytes=r.saved_bytes,
        )
        for i, r in enumerate(raw)
    )
    frozen_edges = tuple(
        Edge(ids[s], ids[d], tuple(shape), dtype_name(dt))
        for s, d, shape, dt in edges
        if s in ids and d in ids
    )
    calls: dict[str, int] = {}
    for r in raw:
        if r.kind == "module":
            calls[r.module or ""] = calls.get(r.module or "", 0) + 1
    return Trace(
        TraceMeta(**meta),
        module_infos(model, calls),
        nodes,
        frozen_edges,
        memory=tuple(memory),
        memory_meta=memory_meta,
    )
