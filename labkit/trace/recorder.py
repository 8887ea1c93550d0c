"""The Recorder: module hooks (plus op/FLOP/saved-tensor capture in full mode) for a ``with`` block.

Everything the recorder attaches is removed on success, on error and on
KeyboardInterrupt; see :meth:`Recorder.__exit__`.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import time
from typing import Any

import torch
from torch._C._autograd import _get_sequence_nr

from labkit._format import fmt_shape
from labkit.trace._capture import FlopCapture, OpCapture
from labkit.trace._raw import CallIndex, Producers, RawNode, build_trace, freeze_meta, raw_meta
from labkit.trace._tree import call_tensors, flat_tensors, named_args, named_tensors
from labkit.trace.errors import TraceError
from labkit.trace.model import Trace

MODES = ("timing", "full")


def check_model(model: Any, what: str = "labkit.trace") -> None:
    """Raise a TypeError naming what was given when ``model`` is not an ``nn.Module``."""
    if isinstance(model, torch.nn.Module):
        return
    given = f"{type(model).__module__}.{type(model).__qualname__}"
    hint = ""
    if isinstance(model, torch.Tensor):
        hint = " (a tensor: pass the model first, then its inputs: labkit.trace(model, x))"
    elif callable(model):
        hint = " (a function: wrap it in an nn.Module so its calls can be hooked)"
    raise TypeError(f"{what} expects a torch.nn.Module, got {given}{hint}")


class Recorder:
    """Records what a model does while it is attached and enabled.

    ``"timing"`` mode installs module hooks only (forward times, backward times via
    autograd-node hooks, shapes). ``"full"`` mode adds op capture (the graph of
    tensor operations), FLOPs per module (``torch.utils.flop_counter`` formulas) and
    bytes saved for backward. A recorder that is attached but not enabled returns
    from its hooks at once.

    Args:
        model: The module to record.
        mode: ``"timing"`` or ``"full"``.

    Example:
        >>> rec = Recorder(model, mode="timing")
        >>> with rec:                      # doctest: +SKIP
        ...     loss = model(x).sum(); loss.backward(); opt.step()
        >>> rec.trace.top(3)               # doctest: +SKIP
    """

    def __init__(self, model: torch.nn.Module, *, mode: str = "full") -> None:
        check_model(model, "Recorder")
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self.model = model
        self.mode = mode
        self.enabled = False
        self.trace: Trace | None = None
        self._handles: list[Any] = []
        self._auto_attached = False
        self._paths: dict[int, str] = {}
        self._reset()

    def __repr__(self) -> str:
        return (
            f"Recorder(model={type(self.model).__name__}, mode={self.mode!r}, "
            f"attached={self.attached}, enabled={self.enabled})"
        )

    # ------------------------------------------------------------ lifecycle
    @property
    def attached(self) -> bool:
        """Whether module hooks are installed."""
        return bool(self._handles)

    def attach(self) -> Recorder:
        """Install module hooks (disabled until :meth:`start`). Returns ``self``."""
        if self.attached:
            return self
        self._paths = {}
        self._param_owner: dict[int, str] = {}
        try:
            for path, mod in self.model.named_modules():
                self._paths[id(mod)] = path
                for p in mod.parameters(recurse=False):
                    self._param_owner.setdefault(id(p), path)
                if isinstance(mod, torch.jit.ScriptModule):
                    continue
                self._handles.append(mod.register_forward_pre_hook(self._pre, with_kwargs=True))
                self._handles.append(mod.register_forward_hook(self._post, with_kwargs=True))
        except BaseException:
            self.detach()
            raise
        return self

    def detach(self) -> None:
        """Remove every module hook."""
        handles, self._handles = self._handles, []
        for h in handles:
            h.remove()

    def start(self) -> None:
        """Begin a recording (attaching first if needed)."""
        if self.enabled:
            raise RuntimeError("this Recorder is already recording; call stop() first")
        if not self.attached:
            self.attach()
        self._reset()
        self._seq_start = _get_sequence_nr()
        self._sync = any(p.is_cuda for p in self.model.parameters())
        self._guard = (
            torch._C.DisableTorchFunction if self.mode == "full" else contextlib.nullcontext
        )
        if self.mode == "full":
            importlib.import_module("torch._dynamo")  # first use inside an op costs ~2 s

            self._param_storages = {
                p.untyped_storage().data_ptr()
                for p in (*self.model.parameters(), *self.model.buffers())
            }
            from labkit.memory.tracker import MemoryTracker

            # one Python dispatch layer, not two: FlopCapture hands each op's result to it
            self._memory = MemoryTracker(self, own_pack_hooks=False, own_mode=False)
            self._contexts = [
                OpCapture(self),
                FlopCapture(self),
                torch.autograd.graph.saved_tensors_hooks(self._pack, _unpack),
                self._memory,
            ]
            entered = []
            try:
                for ctx in self._contexts:
                    ctx.__enter__()
                    entered.append(ctx)
            except BaseException:
                for ctx in reversed(entered):
                    ctx.__exit__(None, None, None)
                self._contexts = []
                raise
        self.enabled = True

    def stop(self) -> Trace:
        """End the recording, remove autograd hooks and return the :class:`Trace`."""
        self.enabled = False
        try:
            for ctx in reversed(self._contexts):
                ctx.__exit__(None, None, None)
        finally:
            self._contexts = []
            handles, self._bwd_handles = self._bwd_handles, []
            for h in handles:
                h.remove()
        self.trace = self._build()
        return self.trace

    def __enter__(self) -> Recorder:
        self._auto_attached = not self.attached
        try:
            self.start()
        except BaseException:
            if self._auto_attached:
                self.detach()
            raise
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool:
        failing = self._stack[-1] if self._stack else None
        try:
            self.stop()
        finally:
            if self._auto_attached:
                self.detach()
                self._auto_attached = False
        if isinstance(exc, Exception) and failing is not None and not isinstance(exc, TraceError):
            raise TraceError(self._failure_message(failing, exc)) from exc
        return False

    # ------------------------------------------------------------ state
    def _reset(self) -> None:
        self._raw: list[RawNode] = []
        self._edges: list[tuple[int, int, Any, Any]] = []
        self._stack: list[RawNode] = []
        self._index = CallIndex()
        self._producer = Producers()
        self._call_counts: dict[str, int] = {}
        self._op_counts: dict[tuple[int, str], int] = {}
        self._io_counts: dict[str, int] = {}
        self._contexts: list[Any] = []
        self._memory: Any = None  # MemoryTracker in full mode
        self._bwd_handles: list[Any] = []
        self._hooked_seq: set[int] = set()
        self._seg_hooks: dict[int, Any] = {}
        self._bwd_task: int | None = None
        self._saved_ptrs: set[int] = set()
        self._bwd_t0: float | None = None
        self._bwd_call = None
        self._bwd_total = 0.0
        self._fwd_total = 0.0
        self._top_calls = 0
        self._op_flops = 0
        self._outside = {"flops_fwd": 0, "flops_bwd": 0, "bwd_time": 0.0}
        self._notes: list[str] = []

    def _new(self, kind: str, name: str, type_: str, parent: RawNode | None) -> RawNode:
        node = RawNode(len(self._raw), kind, name, type_, parent)
        self._raw.append(node)
        if parent is not None:
            parent.leaf = False
        return node

    def _unique_key(self, base: str) -> str:
        k = self._io_counts.get(base, 0)
        self._io_counts[base] = k + 1
        return base if k == 0 else f"{base}#{k}"

    # ------------------------------------------------------------ module hooks
    def _pre(self, module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if not self.enabled:
            return
        with self._guard():
            path = self._paths.get(id(module))
            if path is None:
                return
            if not self._stack:
                self._top_inputs(module, args, kwargs)
            parent = self._stack[-1] if self._stack else None
            node = self._new("module", path, type(module).__name__, parent)
            node.module = path
            node.call = self._call_counts.get(path, 0)
            self._call_counts[path] = node.call + 1
            node.key = f"{path}#{node.call}"
            named = named_args(args, kwargs)
            node.inputs = tuple([(t.shape, t.dtype, t.device, n) for n, t in named])
            producer = self._producer
            node.pending = [
                (p, tuple(t.shape), t.dtype) for _, t in named if (p := producer.get(t)) is not None
            ]
            node.seq0 = _get_sequence_nr()
            self._index.add(node)
            self._stack.append(node)
            if self._sync:
                torch.cuda.synchronize()
            node.t0 = time.perf_counter()

    def _post(self, module: torch.nn.Module, args: Any, kwargs: Any, output: Any) -> None:
        if not self.enabled:
            return
        if self._sync:
            torch.cuda.synchronize()
        t1 = time.perf_counter()
        with self._guard():
            path = self._paths.get(id(module))
            if path is None or not self._stack:
                return
            while len(self._stack) > 1 and self._stack[-1].module != path:
                self._stack.pop()  # a child raised and the error was caught in this module
            node = self._stack.pop()
            node.fwd_time = t1 - node.t0
            node.seq1 = _get_sequence_nr()
            named = (
                [("", output)] if isinstance(output, torch.Tensor) else list(named_tensors(output))
            )
            node.outputs = tuple([(t.shape, t.dtype, t.device, n) for n, t in named])
            if node.leaf:  # nothing finer recorded inside: the call itself is the graph node
                self._edges.extend((p, node.id, s, d) for p, s, d in node.pending)
                for _, t in named:
                    self._producer.set(t, node.id)
            node.pending = []
            if not self._stack:
                self._top_outputs(node, named)

    def _top_inputs(self, module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict) -> None:
        for name, value in _bind(module, args, kwargs):
            for tname, t in named_tensors(value, name):
                if t in self._producer:
                    continue
                node = self._new("input", tname, "Tensor", None)
                node.key = self._unique_key(f"input:{tname}")
                node.outputs = (raw_meta(t, tname),)
                self._producer.set(t, node.id)

    def _top_outputs(self, call: RawNode, named: list[tuple[str, torch.Tensor]]) -> None:
        self._top_calls += 1
        self._fwd_total += call.fwd_time
        for name, t in named:
            tname = "output" + name
            node = self._new("output", tname, "Tensor", None)
            node.key = self._unique_key(f"output:{tname}")
            node.inputs = (raw_meta(t, tname),)
            p = self._producer.get(t)
            if p is not None:
                self._edges.append((p, node.id, tuple(t.shape), t.dtype))
        if torch.is_grad_enabled():
            self._hook_graph([t.grad_fn for _, t in named if t.grad_fn is not None])

    # ------------------------------------------------------------ full-mode callbacks
    def _on_op(self, name: str, args: Any, kwargs: Any, out: Any, elapsed: float) -> None:
        outs = flat_tensors(out)
        if not outs:
            return
        parent = self._stack[-1]
        node = self._new("op", name, name, parent)
        k = self._op_counts.get((parent.id, name), 0)
        self._op_counts[(parent.id, name)] = k + 1
        node.key = f"{parent.key}/{name}#{k}"
        ins = call_tensors(args, kwargs)
        node.inputs = tuple([(t.shape, t.dtype, t.device, "") for t in ins])
        producer = self._producer
        for t in ins:
            p = producer.get(t)
            if p is not None:
                self._edges.append((p, node.id, tuple(t.shape), t.dtype))
        node.outputs = tuple([(t.shape, t.dtype, t.device, "") for t in outs])
        for t in outs:
            producer.set(t, node.id)
        node.fwd_time = elapsed
        node.flops_fwd = self._op_flops

    def _on_alias(self, src: Any, out: Any) -> None:
        if isinstance(src, torch.Tensor) and isinstance(out, torch.Tensor):
            p = self._producer.get(src)
            if p is not None:
                self._producer.set(out, p)

    def _on_flops(self, n: int) -> None:
        if torch._C._current_graph_task_id() != -1:  # inside backward
            call = self._bwd_call
            if call is None:
                self._outside["flops_bwd"] += n
            else:
                call.flops_bwd += n
        else:
            self._op_flops += n
            if self._stack:
                self._stack[-1].flops_fwd += n
            else:
                self._outside["flops_fwd"] += n

    def _pack(self, t: torch.Tensor) -> torch.Tensor:
        if self._memory is not None:
            self._memory.on_saved(t)
        if self.enabled and self._stack:
            ptr = t.untyped_storage().data_ptr()
            if ptr not in self._param_storages and ptr not in self._saved_ptrs:
                self._saved_ptrs.add(ptr)
                self._stack[-1].saved_bytes += t.untyped_storage().nbytes()
        return t.detach()

    # ------------------------------------------------------------ backward
    # On the CPU, autograd runs the nodes of a graph in decreasing sequence number, which
    # is reverse creation order. So the nodes one module call created run as contiguous
    # *segments*, and one pre-hook on the first node of each segment (its highest sequence
    # number) is enough to time every call: a segment lasts until the next one starts or
    # the backward pass ends. AccumulateGrad nodes run inside the segment that fed them.
    _bwd_call: RawNode | None = None

    def _hook_graph(self, roots: list[Any]) -> None:
        """Hook the first node of each call's segment among the nodes below ``roots``."""
        found: list[tuple[int, RawNode | None, Any]] = []
        stack = list(roots)
        while stack:
            fn = stack.pop()
            if fn is None or hasattr(fn, "variable"):  # AccumulateGrad: no segment of its own
                continue
            seq = fn._sequence_nr()
            if seq in self._hooked_seq:
                continue
            self._hooked_seq.add(seq)
            if seq < self._seq_start:  # made before the recording: runs after all of ours
                found.append((seq, None, fn))
                continue
            found.append((seq, self._index.find(seq), fn))
            stack.extend(nf for nf, _ in fn.next_functions)
        found.sort(key=lambda item: -item[0])
        prev: Any = _NO_CALL
        for _, call, fn in found:
            if call is not prev:
                self._bwd_handles.append(fn.register_prehook(self._segment_hook(call)))
                prev = call

    def _segment_hook(self, call: RawNode | None) -> Any:
        key = id(call)
        hook = self._seg_hooks.get(key)
        if hook is None:

            def hook(grad_outputs: Any) -> None:
                now = time.perf_counter()
                self._close_segment(now)
                self._bwd_call = call
                self._bwd_t0 = now
                task = torch._C._current_graph_task_id()
                if task != self._bwd_task:  # first segment of this backward pass
                    self._bwd_task = task
                    torch.autograd.Variable._execution_engine.queue_callback(self._end_backward)

            self._seg_hooks[key] = hook
        return hook

    def _close_segment(self, now: float) -> None:
        if self._bwd_t0 is None:
            return
        dt = now - self._bwd_t0
        self._bwd_total += dt
        if self._bwd_call is None:
            self._outside["bwd_time"] += dt
        else:
            self._bwd_call.bwd_self += dt

    def _end_backward(self) -> None:
        self._close_segment(time.perf_counter())
        self._bwd_t0 = None
        self._bwd_call = None
        self._bwd_task = None

    # ------------------------------------------------------------ results
    def _build(self) -> Trace:
        notes = list(self._notes)
        if self.mode == "timing":
            notes.append("timing mode: no op nodes or FLOPs; edges only between module calls")
        else:
            notes.append("full mode: times include per-op recording overhead; "
                         "use mode='timing' for the cleanest times")  # fmt: skip
        if self._sync:
            notes.append("CUDA: forward times synchronize; backward times are host-side")
        dev = next((str(p.device) for p in self.model.parameters()), "cpu")
        meta = {
            "model": type(self.model).__name__,
            "mode": self.mode,
            "device": dev,
            "torch_version": torch.__version__.split("+")[0],
            "backward": self._bwd_total > 0,
            "calls": self._top_calls,
            "forward_time": self._fwd_total,
            "backward_time": self._bwd_total,
            "outside_flops_fwd": self._outside["flops_fwd"],
            "outside_flops_bwd": self._outside["flops_bwd"],
            "outside_bwd_time": self._outside["bwd_time"],
            "notes": tuple(notes),
        }
        memory, memory_meta = self._memory.result() if self._memory is not None else ((), None)
        return build_trace(self._raw, self._edges, model=self.model, meta=meta, memory=memory,
                           memory_meta=memory_meta)  # fmt: skip

    def _failure_message(self, node: RawNode, exc: BaseException) -> str:
        where = f"module '{node.module}'" if node.module else "the root module"
        metas = [freeze_meta(m) for m in node.inputs]
        ins = ", ".join(
            f"{m.name or 'arg'}: {m.dtype}{fmt_shape(m.shape)}" for m in metas
        ) or "no tensors"  # fmt: skip
        return (
            f"{type(self.model).__name__} failed in {where} ({node.type}) called with "
            f"inputs ({ins}): {type(exc).__name__}: {exc}"
        )


_NO_CALL = object()


def _unpack(t: torch.Tensor) -> torch.Tensor:
    return t


_SIGNATURES: dict[type, inspect.Signature | None] = {}


def _bind(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict) -> list[tuple[str, Any]]:
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
