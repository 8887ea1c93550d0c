"""GraphObserver: the dataflow of a recorded run (inputs, outputs, edges, tensor shapes).

An observer of :class:`~labkit.trace.instrument.Instrumentation`: it describes the
tensors each module call and op received and produced, links each consumer to the node
that produced its tensor, and counts the bytes each call saved for backward.
"""

from __future__ import annotations

import inspect
import weakref
from typing import Any

import torch

from labkit._tensors import call_tensors, flat_tensors, named_args, named_tensors, plain_tensors
from labkit.trace._raw import Producers, RawNode, buffers_of, parameters_of, raw_meta
from labkit.trace.instrument import Instrumentation, Observer


class GraphObserver(Observer):
    """Inputs, outputs and edges of the graph that ran.

    Args:
        ops: Link op nodes too (the layer must record ops); else edges join module calls.
        saved: Count bytes saved for backward per module call (``Node.saved_bytes``).
    """

    def __init__(self, *, ops: bool = False, saved: bool = False) -> None:
        self.needs_functions = ops
        self.needs_saved = saved
        self._reset()

    def __repr__(self) -> str:
        return f"GraphObserver(ops={self.needs_functions}, saved={self.needs_saved})"

    def _reset(self) -> None:
        self.edges: list[tuple[int, int, Any, Any]] = []
        self._producer = Producers()
        self._io_counts: dict[str, int] = {}
        # storages already counted, by object (fake and meta storages have no data
        # pointer); a weak reference tells a recycled id from the storage that died
        self._seen: dict[int, tuple[weakref.ref[Any], bool]] = {}
        self._inst: Instrumentation | None = None

    def start(self, inst: Instrumentation) -> None:
        self._reset()
        self._inst = inst
        if self.needs_saved:
            for p in (*parameters_of(inst.model), *buffers_of(inst.model)):
                for t in plain_tensors(p):  # a quantized weight's real tensors
                    try:
                        self._mark(t.untyped_storage(), param=True)
                    except (RuntimeError, NotImplementedError):
                        continue

    def stop(self, inst: Instrumentation) -> None:
        self._producer = Producers()  # no weak references outlive the recording
        self._seen = {}

    # ------------------------------------------------------------ module calls
    def top_call(self, module: Any, args: Any, kwargs: Any) -> None:
        self._top_inputs(module, args, kwargs)

    def call(self, node: RawNode, module: Any, args: Any, kwargs: Any) -> None:
        named = named_args(args, kwargs)
        node.inputs = tuple([(t.shape, t.dtype, t.device, n) for n, t in named])
        producer = self._producer
        node.pending = [
            (p, tuple(t.shape), t.dtype) for _, t in named if (p := producer.get(t)) is not None
        ]

    def ret(self, node: RawNode, module: Any, output: Any) -> None:
        named = [("", output)] if isinstance(output, torch.Tensor) else list(named_tensors(output))
        node.outputs = tuple([(t.shape, t.dtype, t.device, n) for n, t in named])
        if node.leaf:  # nothing finer recorded inside: the call itself is the graph node
            self.edges.extend((p, node.id, s, d) for p, s, d in node.pending)
            for _, t in named:
                self._producer.set(t, node.id)
        node.pending = []
        if node.parent is None:
            self._top_outputs(node, named)

    def _unique_key(self, base: str) -> str:
        k = self._io_counts.get(base, 0)
        self._io_counts[base] = k + 1
        return base if k == 0 else f"{base}#{k}"

    def _top_inputs(
        self, module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        assert self._inst is not None
        for name, value in bind(module, args, kwargs):
            for tname, t in named_tensors(value, name):
                if t in self._producer:
                    continue
                node = self._inst.new_node("input", tname, "Tensor", None)
                node.key = self._unique_key(f"input:{tname}")
                node.outputs = (raw_meta(t, tname),)
                self._producer.set(t, node.id)

    def _top_outputs(self, call: RawNode, named: list[tuple[str, torch.Tensor]]) -> None:
        assert self._inst is not None
        for name, t in named:
            tname = "output" + name
            node = self._inst.new_node("output", tname, "Tensor", None)
            node.key = self._unique_key(f"output:{tname}")
            node.inputs = (raw_meta(t, tname),)
            p = self._producer.get(t)
            if p is not None:
                self.edges.append((p, node.id, tuple(t.shape), t.dtype))

    # ------------------------------------------------------------ ops
    def function(self, node: RawNode, func: Any, args: Any, kwargs: Any, out: Any) -> None:
        ins = call_tensors(args, kwargs)
        node.inputs = tuple([(t.shape, t.dtype, t.device, "") for t in ins])
        producer = self._producer
        for t in ins:
            p = producer.get(t)
            if p is not None:
                self.edges.append((p, node.id, tuple(t.shape), t.dtype))
        outs = flat_tensors(out)
        node.outputs = tuple([(t.shape, t.dtype, t.device, "") for t in outs])
        for t in outs:
            producer.set(t, node.id)

    def alias(self, src: Any, out: Any) -> None:
        if isinstance(src, torch.Tensor) and isinstance(out, torch.Tensor):
            p = self._producer.get(src)
            if p is not None:
                self._producer.set(out, p)

    # ------------------------------------------------------------ saved for backward
    def saved(self, t: torch.Tensor) -> None:
        inst = self._inst
        if inst is None or not inst.stack:
            return
        try:
            st = t.untyped_storage()
        except (RuntimeError, NotImplementedError):
            return
        if self._mark(st):
            inst.stack[-1].saved_bytes += st.nbytes()

    def _mark(self, st: Any, *, param: bool = False) -> bool:
        """Remember storage ``st``; whether it is new and not a parameter's."""
        key = id(st)
        entry = self._seen.get(key)
        if entry is not None and entry[0]() is st:
            return False
        self._seen[key] = (weakref.ref(st), param)
        return not param


_SIGNATURES: dict[type, inspect.Signature | None] = {}


def bind(
    module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> list[tuple[str, Any]]:
    """Argument names for a top-level call, from ``forward``'s signature when it binds."""
    cls = type(module)
    if cls not in _SIGNATURES:
        try:
            _SIGNATURES[cls] = inspect.signature(module.forward)
        except (TypeError, ValueError):
            _SIGNATURES[cls] = None
    sig = _SIGNATURES[cls]
    if sig is not None:
        try:
            return list(sig.bind(*args, **kwargs).arguments.items())
        except TypeError:
            pass
    return [(f"args[{i}]", a) for i, a in enumerate(args)] + list(kwargs.items())
