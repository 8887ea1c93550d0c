"""MemoryTracker: tensor storages counted as they are created and freed, by phase and module.

It is one context the :class:`~labkit.trace.Recorder` enters in ``"full"`` mode (and
that :func:`labkit.memory.memory` enters around a timing-mode recorder). A
``TorchDispatchMode`` sees every storage an aten op creates, forward, backward and
inside ``optimizer.step``; a weak reference with a callback on the (preserved)
``UntypedStorage`` object sees the moment it is freed. Each storage is counted once,
however many views share it.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
import weakref
from typing import TYPE_CHECKING, Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from labkit.trace._tree import named_tensors

if TYPE_CHECKING:
    from labkit.trace.recorder import Recorder

CATEGORIES = ("parameters", "gradients", "optimizer", "activations", "temporaries", "inputs")
PARAMS, GRADS, OPT, ACTS, TEMPS, INPUTS = range(6)
PHASES = ("forward", "backward", "optimizer")
_FWD, _BWD, _OPT = PHASES

_TORCH_DIR = os.path.dirname(torch.__file__)
_LABKIT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_current_task = torch._C._current_graph_task_id
_F32 = torch.float32


class _Rec:
    """One live storage (mutable bookkeeping; never leaves the tracker)."""

    __slots__ = (
        "cat",
        "dev",
        "fp32",
        "module",
        "nbytes",
        "op",
        "phase",
        "ref",
        "sid",
        "site",
        "step",
    )

    def __init__(
        self, nbytes: int, cat: int, module: str, phase: str, fp32: bool, dev: bool, sid: int,
        step: int, op: str = "",
    ) -> None:  # fmt: skip
        self.nbytes = nbytes
        self.cat = cat
        self.module = module
        self.phase = phase
        self.fp32 = fp32
        self.dev = dev
        self.sid = sid
        self.step = step
        self.op = op
        self.site: tuple[str, int, str] | None = None
        self.ref: Any = None


class MemoryTracker(TorchDispatchMode):
    """Live tensor-storage bytes through a step, by phase, module and category.

    Categories: ``parameters`` (model parameters and buffers), ``gradients`` (their
    ``.grad``), ``optimizer`` (optimizer state), ``activations`` (tensors saved for
    backward), ``inputs`` (model inputs) and ``temporaries`` (everything else). Phases:
    ``forward``, ``backward`` (an autograd graph task is running) and ``optimizer``
    (inside any ``Optimizer.step``).

    Args:
        recorder: The recorder whose module stack names the running module.
        own_pack_hooks: Install saved-tensor hooks to see activations. The full-mode
            recorder has its own and forwards them (``False`` there).
        stacks: Record the user's source line for every storage (for leak reports;
            costs a few microseconds per allocation).
        optimizers: Optimizers whose existing state counts from the start (the state of
            others counts from their first ``step()`` in the recording).
        inputs: Tensors (or nested containers) to count as inputs from the start.
        cuda_history: On CUDA, also record the caching allocator's event history and
            write its snapshot here (a pickle for https://pytorch.org/memory_viz).

    Example:
        >>> rec = Recorder(model, mode="timing")            # doctest: +SKIP
        >>> with rec, MemoryTracker(rec) as mem:            # doctest: +SKIP
        ...     model(x).sum().backward()
        >>> mem.peak, mem.samples()[-1]                      # doctest: +SKIP
    """

    def __init__(
        self,
        recorder: Recorder,
        *,
        own_pack_hooks: bool = True,
        stacks: bool = False,
        optimizers: tuple[Any, ...] = (),
        inputs: Any = None,
        cuda_history: str | os.PathLike[str] | None = None,
        own_mode: bool = True,
    ) -> None:
        super().__init__()
        self.own_mode = own_mode
        self.cuda_history = cuda_history
        self.rec = recorder
        self.own_pack_hooks = own_pack_hooks
        self.stacks = stacks
        self._optimizers = tuple(optimizers)
        self._initial_inputs = inputs
        self.active = False
        self._reset()

    def __repr__(self) -> str:
        return (
            f"MemoryTracker(model={type(self.rec.model).__name__}, stacks={self.stacks}, "
            f"own_pack_hooks={self.own_pack_hooks}, active={self.active})"
        )

    # ------------------------------------------------------------ state
    def _reset(self) -> None:
        self._recs: dict[int, _Rec] = {}  # id(weakref) -> record
        self._by_sid: dict[int, _Rec] = {}  # id(storage object) -> record
        self._cat = [0] * 6
        self._mod: dict[tuple[str, int], int] = {}
        self._fp32: dict[tuple[str, int], int] = {}
        self._saved: dict[str, int] = {}
        self.total = 0
        self.peak = 0
        self.dev_total = 0  # accelerator storages only (compared with the CUDA allocator)
        self.dev_peak = 0
        self.start_cuda = 0
        self.peak_time = 0.0
        self.peak_phase = _FWD
        self.peak_module = ""
        self._dirty = False
        self.peak_cat: list[int] = [0] * 6
        self.peak_mod: dict[tuple[str, int], int] = {}
        self.peak_fp32: dict[tuple[str, int], int] = {}
        self._events: list[tuple[Any, ...]] = []
        self._in_opt = 0
        self._opt_created: list[_Rec] = []
        self.step = 0
        self.start_bytes = 0
        self.failed_module: str | None = None
        self.error: str | None = None
        self.cuda: dict[str, Any] | None = None
        self._handles: list[Any] = []
        self._cuda_state: Any = None
        self._pack_ctx: Any = None
        self._pushed = False
        self._owners: dict[int, str] = {}

    # ------------------------------------------------------------ lifecycle
    def __enter__(self) -> MemoryTracker:
        self._reset()
        model = self.rec.model
        try:
            owner = getattr(self.rec, "_param_owner", None) or {}
            for path, mod in model.named_modules():
                for p in mod.parameters(recurse=False):
                    self._owners.setdefault(id(p), owner.get(id(p), path))
            importlib.import_module("torch._dynamo")  # a dispatch mode's first op imports it (~2 s)
            self._t0 = time.perf_counter()
            device = next((p.device for p in model.parameters()), torch.device("cpu"))
            if device.type == "cuda":
                from labkit.memory._cuda import CudaStats

                self._cuda_state = CudaStats(device, self.cuda_history)
                self._cuda_state.begin()
            self.active = True
            for path, mod in model.named_modules():
                for p in (*mod.parameters(recurse=False), *mod.buffers(recurse=False)):
                    self._track(p, PARAMS, self._owners.get(id(p), path), _FWD)
            for p in model.parameters():
                if p.grad is not None:
                    self._track(p.grad, GRADS, self._owners.get(id(p), ""), _FWD)
                if p.requires_grad:
                    self._handles.append(p.register_post_accumulate_grad_hook(self._on_grad))
            for opt in self._optimizers:
                self._adopt_optimizer(opt)
            for _, t in named_tensors(self._initial_inputs):
                self._track(t, INPUTS, "", _FWD)
            self.start_bytes = self.total
            self.start_cuda = self.dev_peak = self.dev_total
            self.peak = self.total
            self._snapshot()
            self._handles.append(model.register_forward_pre_hook(self._on_call, with_kwargs=True))
            from torch.optim.optimizer import (
                register_optimizer_step_post_hook,
                register_optimizer_step_pre_hook,
            )

            self._handles.append(register_optimizer_step_pre_hook(self._on_opt_pre))
            self._handles.append(register_optimizer_step_post_hook(self._on_opt_post))
            if self.own_pack_hooks:
                self._pack_ctx = torch.autograd.graph.saved_tensors_hooks(self._pack, _unpack)
                self._pack_ctx.__enter__()
            if self.own_mode:  # else the recorder's FlopCapture calls observe() per op
                super().__enter__()
                self._pushed = True
        except BaseException:
            self._teardown()
            raise
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if exc is not None:
            stack = getattr(self.rec, "_stack", None)
            self.failed_module = (stack[-1].module or "") if stack else ""
            self.error = f"{type(exc).__name__}: {exc}".strip()
        self._teardown()

    def _teardown(self) -> None:
        try:
            if self._pushed:
                self._pushed = False
                super().__exit__(None, None, None)
        finally:
            try:
                if self._pack_ctx is not None:
                    ctx, self._pack_ctx = self._pack_ctx, None
                    ctx.__exit__(None, None, None)
            finally:
                handles, self._handles = self._handles, []
                for h in handles:
                    h.remove()
                try:
                    if self.active:
                        stack = getattr(self.rec, "_stack", None)
                        if stack and self.failed_module is None:  # left in the middle of a call
                            self.failed_module = stack[-1].module or ""
                        self._sample(self._phase(), self._module())
                        if self._dirty:
                            self._snapshot()
                        if self._cuda_state is not None:
                            self.cuda = self._cuda_state.end(self)
                finally:
                    if self._cuda_state is not None:
                        self._cuda_state.stop_history()
                    self.active = False
                    # dropping the weak references drops their callbacks too
                    self._recs = {}
                    self._by_sid = {}

    # ------------------------------------------------------------ accounting
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        out = func(*args, **(kwargs or {}))
        if self.active:
            self.observe(func, out)
        return out

    def observe(self, func: Any, out: Any) -> None:
        """Account the storages of an op's result (called per aten op)."""
        if type(out) is torch.Tensor:
            self._created(out, func)
        elif isinstance(out, torch.Tensor):
            for t in plain_tensors(out):
                self._created(t, func)
        elif isinstance(out, (tuple, list)):
            for o in out:
                if isinstance(o, torch.Tensor):
                    for t in plain_tensors(o):
                        self._created(t, func)

    def _created(self, t: torch.Tensor, func: Any) -> None:
        # runs for every tensor an op returns: kept flat (no helper calls on the common path)
        try:
            st = t.untyped_storage()
        except (RuntimeError, NotImplementedError):
            return  # sparse, nested or functional tensors have no plain storage
        sid = id(st)
        n = st.nbytes()
        rec = self._by_sid.get(sid)
        if rec is not None:  # a view, or an in-place / out= op
            if n != rec.nbytes:  # resize_ or an out= op grew it
                self._adjust(rec, n - rec.nbytes)
            return
        if n == 0 or t.is_meta:
            return
        if self._in_opt:
            phase, module = _OPT, ""
        elif _current_task() != -1:
            call = self.rec._bwd_call
            phase, module = _BWD, (call.module or "") if call is not None else ""
        else:
            stack = self.rec._stack
            phase, module = _FWD, (stack[-1].module or "") if stack else ""
        rec = _Rec(n, TEMPS, module, phase, t.dtype is _F32, not t.is_cpu, sid, self.step,
                   func.__name__)  # fmt: skip
        ref = rec.ref = weakref.ref(st, self._on_free)
        self._recs[id(ref)] = rec
        self._by_sid[sid] = rec
        self._count(rec, n, phase, module)
        if self._in_opt:
            self._opt_created.append(rec)
        if self.stacks:
            rec.site = _user_frame()
        self._events.append((time.perf_counter() - self._t0, phase, module, *self._cat))

    def _track(self, t: torch.Tensor, cat: int, module: str, phase: str) -> _Rec | None:
        """Count ``t``'s storage as ``cat`` (moving it there if already counted)."""
        if type(t) not in _PLAIN and hasattr(t, "__tensor_flatten__"):
            rec = None
            for inner in plain_tensors(t):  # e.g. torchao's int8 data, scales and zero points
                rec = self._track(inner, cat, module, phase)
            return rec
        try:
            st = t.untyped_storage()
        except (RuntimeError, NotImplementedError):
            return None
        rec = self._by_sid.get(id(st))
        if rec is None:
            if t.device.type == "meta":
                return None
            rec = self._add(st, cat, module, phase, t.dtype == torch.float32)
        elif rec.cat != cat:
            self._move(rec, cat, module)
        return rec

    def _add(self, st: Any, cat: int, module: str, phase: str, fp32: bool) -> _Rec | None:
        n = st.nbytes()
        if n == 0:
            return None
        rec = _Rec(n, cat, module, phase, fp32, st.device.type != "cpu", id(st), self.step)
        ref = rec.ref = weakref.ref(st, self._on_free)
        self._recs[id(ref)] = rec
        self._by_sid[rec.sid] = rec
        self._count(rec, n)
        return rec

    def _count(self, rec: _Rec, n: int, phase: str | None = None, module: str = "") -> None:
        if n < 0 and self._dirty:
            self._snapshot()
        self._cat[rec.cat] += n
        key = (rec.module, rec.cat)
        self._mod[key] = self._mod.get(key, 0) + n
        if rec.fp32:
            self._fp32[key] = self._fp32.get(key, 0) + n
        self.total += n
        if rec.dev:
            self.dev_total += n
            if self.dev_total > self.dev_peak:
                self.dev_peak = self.dev_total
        if self.total > self.peak:
            self.peak = self.total
            self._dirty = True
            self.peak_time = time.perf_counter() - self._t0
            if phase is None:
                phase = self._phase()
                module = self._module(phase)
            self.peak_phase = phase
            self.peak_module = module

    def _adjust(self, rec: _Rec, delta: int) -> None:
        self._count(rec, delta)
        rec.nbytes += delta
        self._sample(self._phase(), self._module())

    def _move(self, rec: _Rec, cat: int, module: str | None = None) -> None:
        if self._dirty:
            self._snapshot()
        n = rec.nbytes
        self._count(rec, -n)
        rec.cat = cat
        if module is not None:
            rec.module = module
        self._count(rec, n)
        self._sample(self._phase(), self._module())

    def _on_free(self, ref: Any) -> None:
        rec = self._recs.pop(id(ref), None)
        if rec is None or not self.active:
            return
        self._by_sid.pop(rec.sid, None)
        self._count(rec, -rec.nbytes, "")  # a free never sets a peak: no need to know where
        self._sample(self._phase(), self._module())

    def _snapshot(self) -> None:
        self._dirty = False
        self.peak_cat = list(self._cat)
        self.peak_mod = dict(self._mod)  # zeros are dropped when the result is built
        self.peak_fp32 = dict(self._fp32)

    def _sample(self, phase: str, module: str) -> None:
        self._events.append((time.perf_counter() - self._t0, phase, module, *self._cat))

    # ------------------------------------------------------------ where are we
    def _phase(self) -> str:
        if self._in_opt:
            return _OPT
        return _BWD if _current_task() != -1 else _FWD

    def _module(self, phase: str | None = None) -> str:
        phase = phase or self._phase()
        if phase == _BWD:
            call = getattr(self.rec, "_bwd_call", None)
            return (call.module or "") if call is not None else ""
        if phase == _OPT:
            return ""
        stack = self.rec._stack
        return (stack[-1].module or "") if stack else ""

    # ------------------------------------------------------------ hooks
    def on_saved(self, t: torch.Tensor) -> None:
        """A tensor was saved for backward: its storage counts as an activation."""
        if not self.active or _current_task() != -1:
            return
        try:
            rec = self._by_sid.get(id(t.untyped_storage()))
        except (RuntimeError, NotImplementedError):
            return
        if rec is not None and rec.cat == TEMPS:
            self._move(rec, ACTS)
            where = self._module(_FWD)
            self._saved[where] = self._saved.get(where, 0) + rec.nbytes

    def _pack(self, t: torch.Tensor) -> torch.Tensor:
        self.on_saved(t)
        return t

    def _on_call(self, module: Any, args: Any, kwargs: Any) -> None:
        if not self.active or len(self.rec._stack) > 1:  # the recorder pushed the root call
            return
        for _, t in (*named_tensors(args), *named_tensors(kwargs)):
            rec = self._by_sid.get(id(t.untyped_storage())) if t.layout == torch.strided else None
            if rec is None or rec.cat == TEMPS:
                self._track(t, INPUTS, "", _FWD)

    def _on_grad(self, p: torch.Tensor) -> None:
        if self.active and p.grad is not None:
            self._track(p.grad, GRADS, self._owners.get(id(p), ""), self._phase())

    def _adopt_optimizer(self, opt: Any) -> None:
        for p, state in opt.state.items():
            owner = self._owners.get(id(p), "")
            for _, t in named_tensors(state):
                self._track(t, OPT, owner, _OPT)

    def _on_opt_pre(self, opt: Any, args: Any, kwargs: Any) -> None:
        if not self.active:
            return
        for group in opt.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    self._track(p.grad, GRADS, self._owners.get(id(p), ""), _OPT)
        self._adopt_optimizer(opt)
        self._in_opt += 1
        self._sample(_OPT, "")

    def _on_opt_post(self, opt: Any, args: Any, kwargs: Any) -> None:
        if not self.active:
            return
        self._in_opt = max(0, self._in_opt - 1)
        self._adopt_optimizer(opt)
        for rec in self._opt_created:  # created in step() and still alive: state
            if rec.cat == TEMPS and self._by_sid.get(rec.sid) is rec:
                self._move(rec, OPT)
        self._opt_created = []
        self._sample(self._phase(), self._module())

    # ------------------------------------------------------------ results
    def live_bytes(self) -> int:
        """Bytes of all storages counted and alive right now."""
        return self.total

    def live_by_category(self) -> dict[str, int]:
        """Live bytes per category right now."""
        return dict(zip(CATEGORIES, self._cat, strict=True))

    def live_records(self) -> list[_Rec]:
        """The live storages' records (only while recording)."""
        return list(self._recs.values())

    def result(self, max_samples: int | None = None) -> tuple[tuple[Any, ...], Any]:
        """``(samples, MemoryMeta)`` for the Trace, once the tracker has exited."""
        from labkit.memory.attribution import memory_meta
        from labkit.memory.timeline import MAX_SAMPLES, to_samples

        dev = next((str(p.device) for p in self.rec.model.parameters()), "cpu")
        samples = to_samples(self._events, max_samples or MAX_SAMPLES)
        return samples, memory_meta(self, dev)

    def mark_step(self) -> None:
        """Start a new step (storages created from now on carry the next step number)."""
        self.step += 1

    @property
    def events(self) -> list[tuple[Any, ...]]:
        """Raw samples ``(time, phase, module, *bytes per category)``, one per change."""
        return self._events


def _unpack(t: torch.Tensor) -> torch.Tensor:
    return t


_PLAIN = (torch.Tensor, torch.nn.Parameter)


def plain_tensors(t: torch.Tensor) -> list[torch.Tensor]:
    """The tensors that hold ``t``'s memory: itself, or a wrapper subclass's inner tensors.

    A wrapper subclass (torchao's quantized weights, for one) reports a storage of its
    logical size; its real bytes are in the tensors ``__tensor_flatten__`` names.
    """
    if type(t) in _PLAIN or not hasattr(t, "__tensor_flatten__"):
        return [t]
    names, _ = t.__tensor_flatten__()
    out: list[torch.Tensor] = []
    for name in names:
        inner = getattr(t, name)
        if isinstance(inner, torch.Tensor):
            out.extend(plain_tensors(inner))
    return out


def _user_frame() -> tuple[str, int, str] | None:
    """The innermost frame outside torch and labkit: where the user's code made a tensor."""
    f = sys._getframe(2)
    while f is not None:
        fn = f.f_code.co_filename
        if not (
            fn.startswith(_TORCH_DIR) or fn.startswith(_LABKIT_DIR) or fn.startswith("<frozen")
        ):
            return (fn, f.f_lineno, f.f_code.co_name)
        f = f.f_back
    return None
