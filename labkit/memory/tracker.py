"""MemoryTracker: tensor storages counted as they are created and freed, by phase and module.

An observer of the instrumentation layer (:mod:`labkit.trace.instrument`): a
full-mode :class:`~labkit.trace.Recorder` has one, and :func:`labkit.memory.memory`
gives one to a timing-mode recorder. The layer's dispatch mode passes it every storage
an aten op creates, forward, backward and inside ``optimizer.step``; where the model is
(phase, module, backward owner, parameter owner) comes from the layer; a weak reference
with a callback on the (preserved) ``UntypedStorage`` object sees the moment it is
freed. Each storage is counted once, however many views share it.
"""

from __future__ import annotations

import heapq
import os
import sys
import time
import weakref
from dataclasses import dataclass
from enum import IntEnum
from types import FrameType
from typing import Any

import torch
from torch._ops import OpOverload
from torch._subclasses.fake_tensor import FakeTensor

from labkit import _display
from labkit._tensors import model_device, named_tensors, plain_tensors
from labkit.memory._adopt import _COUNTS, adopt_optimizer, adopt_scalers, optimizer_step, track
from labkit.memory._adopt import extent_bytes as extent_bytes  # its home before the split
from labkit.trace.instrument import Instrumentation, RawNode
from labkit.trace.model import MEMORY_CATEGORIES, MemoryMeta, MemorySample
from labkit.trace.recorder import MemoryObserver

CATEGORIES = MEMORY_CATEGORIES  # the order of the counts in _cat and in an event


class Category(IntEnum):
    """A storage's category, valued as its index in :data:`MEMORY_CATEGORIES`.

    The one definition of the names and their order is ``MEMORY_CATEGORIES``; each member
    takes its index there (reordering that tuple reorders these with it), so a member
    indexes the per-category counts directly and ``CATEGORIES[member]`` is its name.
    """

    PARAMETERS = CATEGORIES.index("parameters")
    GRADIENTS = CATEGORIES.index("gradients")
    OPTIMIZER = CATEGORIES.index("optimizer")
    ACTIVATIONS = CATEGORIES.index("activations")
    TEMPORARIES = CATEGORIES.index("temporaries")
    INPUTS = CATEGORIES.index("inputs")


if sorted(CATEGORIES[c] for c in Category) != sorted(CATEGORIES):  # pragma: no cover
    raise ImportError(f"memory.tracker.Category does not cover MEMORY_CATEGORIES {CATEGORIES}")

# the hot path indexes and compares plain ints (an IntEnum member costs twice as much)
PARAMS, GRADS, OPT = int(Category.PARAMETERS), int(Category.GRADIENTS), int(Category.OPTIMIZER)
ACTS, TEMPS, INPUTS = int(Category.ACTIVATIONS), int(Category.TEMPORARIES), int(Category.INPUTS)
EVENT_FIELDS = ("time", "phase", "module", *CATEGORIES)
"""An event's fields: ``(time, phase, module, *bytes per category)``."""
if EVENT_FIELDS.index(CATEGORIES[0]) != _COUNTS:  # pragma: no cover
    raise ImportError(f"memory._adopt._COUNTS does not match EVENT_FIELDS {EVENT_FIELDS}")
PHASES = ("forward", "backward", "optimizer")
LARGEST = 32  # storages kept with their lifetimes for "what was live then" queries
_FWD, _BWD, _OPT = PHASES

_TORCH_DIR = os.path.dirname(torch.__file__)
_LABKIT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_current_task = torch._C._current_graph_task_id
_F32 = torch.float32
_perf = time.perf_counter


@dataclass(slots=True, eq=False)
class _Rec:
    """One live storage (mutable bookkeeping; never leaves the tracker).

    Args:
        nbytes: Bytes counted for it (a view input counts only its own extent).
        category: Where it counts now: a :class:`Category` value, kept as a plain int.
        module: The module it is attributed to.
        phase: The phase that made it.
        fp32: Its tensor is float32.
        on_device: It lives on an accelerator (counted in ``dev_total`` too).
        storage_id: ``id()`` of its ``UntypedStorage`` object.
        step: The step number (:meth:`MemoryTracker.mark_step`) it was made in.
        storage_bytes: The storage's size when counted (above ``nbytes`` for a view input).
        op: The aten op that made it (``""`` when adopted rather than made).
        site: The user's source line that made it, with ``stacks=True``.
        ref: The weak reference whose callback sees it freed.
        born_event: Index of the timeline event that counted it.
        freed_event: Index of the event that saw it freed; -1 while alive.
    """

    nbytes: int
    category: int
    module: str
    phase: str
    fp32: bool
    on_device: bool
    storage_id: int
    step: int
    storage_bytes: int
    op: str = ""
    site: tuple[str, int, str] | None = None
    ref: Any = None
    born_event: int = 0
    freed_event: int = -1


class MemoryTracker(MemoryObserver):
    """Live tensor-storage bytes through a step, by phase, module and category.

    An observer of the instrumentation layer (give it to a
    :class:`~labkit.trace.Recorder` with ``observers=[tracker]``; full-mode recorders
    make their own). Categories: ``parameters`` (model parameters and buffers),
    ``gradients`` (their ``.grad``), ``optimizer`` (optimizer state), ``activations``
    (tensors saved for backward), ``inputs`` (model inputs) and ``temporaries``
    (everything else). Phases: ``forward``, ``backward`` (an autograd graph task is
    running) and ``optimizer`` (inside any ``Optimizer.step``).

    Args:
        model: The module whose step is recorded.
        stacks: Record the user's source line for every storage (for leak reports;
            costs a few microseconds per allocation).
        optimizers: Optimizers whose existing state counts from the start (the state of
            others counts from their first ``step()`` in the recording).
        inputs: Tensors (or nested containers) to count as inputs from the start.
        cuda_history: On CUDA, also record the caching allocator's event history and
            write its snapshot here (a pickle for https://pytorch.org/memory_viz).
        scalers: ``torch.amp.GradScaler`` s whose scale and growth tracker count as
            optimizer state (from their allocation, like an optimizer's).
        max_samples: Timeline samples :meth:`result` keeps at most (peaks kept); default
            ``labkit.memory.timeline.MAX_SAMPLES``.

    Inputs count the bytes the batch's tensors use (a view counts its own extent); the
    rest of their storages existed before the step and is kept apart in
    ``resident_before``.

    Example:
        >>> import torch
        >>> from labkit.trace import Recorder
        >>> model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU())
        >>> x = torch.randn(2, 4)
        >>> mem = MemoryTracker(model)
        >>> with Recorder(model, mode="timing", observers=[mem]):
        ...     model(x).sum().backward()
        >>> t, phase, module, *counts = mem.events[-1]  # the last change, in the backward
        >>> counts  # in CATEGORIES order; (4*8 + 8) float32 = 160 B, input 2*4 float32 = 32 B
        [160, 160, 0, 0, 0, 32]
    """

    needs_dispatch = True
    needs_saved = True
    needs_grads = True

    def __init__(
        self,
        model: torch.nn.Module,
        *,
        stacks: bool = False,
        optimizers: tuple[torch.optim.Optimizer, ...] = (),
        inputs: object = None,
        cuda_history: str | os.PathLike[str] | None = None,
        scalers: tuple[Any, ...] = (),
        max_samples: int | None = None,
    ) -> None:
        self.model = model
        self.max_samples = max_samples
        self._scalers = tuple(scalers)
        self.cuda_history = cuda_history
        self.stacks = stacks
        self._optimizers = tuple(optimizers)
        self._initial_inputs = inputs
        self.active = False
        self._inst: Any = None
        self._reset()

    def __repr__(self) -> str:
        return (
            f"MemoryTracker(model={type(self.model).__name__}, stacks={self.stacks}, "
            f"active={self.active})"
        )

    # ------------------------------------------------------------ state
    def _reset(self) -> None:
        self._free_cb: Any = None  # self._on_free while recording (bound once; see start)
        self._recs: dict[int, _Rec] = {}  # id(weakref) -> record
        self._by_sid: dict[int, _Rec] = {}  # id(storage object) -> record
        self._cat = [0] * len(CATEGORIES)
        self.grads_before = 0
        self._mod: dict[tuple[str, int], int] = {}
        self._fp32: dict[tuple[str, int], int] = {}
        self.saved_by_module: dict[str, int] = {}  # bytes saved for backward, by module
        self.total = 0
        self.peak = 0
        self.dev_total = 0  # accelerator storages only (compared with the CUDA allocator)
        self.dev_peak = 0
        self.start_cuda = 0
        self.peak_time = 0.0
        self.peak_phase = _FWD
        self.peak_module = ""
        self.peak_where = ""
        self._peak_ev = 0
        self.resident_before = 0
        self._dirty = False
        # changes since the peak (category, (module, category), fp32, bytes): the peak's
        # breakdown is the current one minus these, taken when needed (see _snapshot)
        self._journal: list[tuple[int, tuple[str, int], bool, int]] | None = None
        self.peak_cat: list[int] = [0] * len(CATEGORIES)
        self.peak_mod: dict[tuple[str, int], int] = {}
        self.peak_fp32: dict[tuple[str, int], int] = {}
        self._events: list[tuple[Any, ...]] = []
        self.step = 0
        self._big: list[tuple[int, int, _Rec]] = []  # min-heap of the biggest storages
        self._big_min = 0
        self._big_seq = 0
        self.start_bytes = 0
        self.failed_module: str | None = None
        self.failed_where = ""  # where the step was when it failed, in words
        self.error: str | None = None
        self.cuda: dict[str, Any] | None = None
        self._cuda_state: Any = None

    # ------------------------------------------------------------ lifecycle
    def start(self, inst: Instrumentation) -> None:
        self._reset()
        self._inst = inst
        # the callback of every storage's weak reference, bound once (dropped at stop: the
        # bound method refers back to the tracker)
        self._free_cb = self._on_free
        model = self.model
        self._t0 = time.perf_counter()
        device = model_device(model)
        if device.type == "cuda":
            from labkit.memory._cuda import CudaStats

            self._cuda_state = CudaStats(device, self.cuda_history)
            self._cuda_state.begin()
        self.active = True
        params: dict[int, torch.Tensor] = {}  # model.parameters(), read on the way
        for path, mod in model.named_modules():
            for p in _own_tensors(mod):
                track(self, p, PARAMS, inst.param_owner(p) or path, _FWD)
            for p in mod._parameters.values():
                if p is not None:
                    params.setdefault(id(p), p)
        if type(model).parameters is not torch.nn.Module.parameters:
            params = {id(p): p for p in model.parameters()}
        for p in params.values():
            if p.grad is not None:
                track(self, p.grad, GRADS, inst.param_owner(p), _FWD)
        self.grads_before = self._cat[GRADS]  # .grad left by an earlier backward
        for opt in self._optimizers:
            adopt_optimizer(self, opt)
        adopt_scalers(self)
        for _, t in named_tensors(self._initial_inputs):
            track(self, t, INPUTS, "", _FWD)
        self.start_bytes = self.total
        self.start_cuda = self.dev_peak = self.dev_total
        self.peak = self.total
        self.peak_where = inst.where()
        self._snapshot()

    def stop(self, inst: Instrumentation) -> None:
        if inst.error is not None:
            self.failed_module = (inst.failed.module or "") if inst.failed is not None else ""
            self.error = f"{type(inst.error).__name__}: {inst.error}".strip()
            self.failed_where = inst.where()
        try:
            if self.active:
                if inst.stack and self.failed_module is None:  # left in the middle of a call
                    self.failed_module = inst.stack[-1].module or ""
                adopt_scalers(self)
                self._sample(self._phase(), self._module())
                if self._dirty or self._journal is not None:
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
            self._free_cb = None

    # ------------------------------------------------------------ accounting
    def dispatch(
        self, func: OpOverload, args: tuple[object, ...], kwargs: dict[str, object], out: object
    ) -> None:
        if self.active:  # observe's common case inline: one Python call fewer per op
            if type(out) is torch.Tensor or type(out) is FakeTensor:  # a plan's: no wrapper
                self._created(out, func)
            else:
                self.observe(func, out)

    def observe(self, func: OpOverload, out: object) -> None:
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

    def _created(self, t: torch.Tensor, func: OpOverload) -> None:
        # runs for every tensor an op returns: kept flat (no helper calls on the common path)
        try:
            st = t.untyped_storage()
        except (RuntimeError, NotImplementedError):
            return  # sparse, nested or functional tensors have no plain storage
        sid = id(st)
        n = st.nbytes()
        rec = self._by_sid.get(sid)
        if rec is not None:  # a view, or an in-place / out= op
            if n != rec.storage_bytes:  # resize_ or an out= op grew it
                delta, rec.storage_bytes = n - rec.storage_bytes, n
                self._adjust(rec, delta)
            return
        # the device once, as a property: a fake tensor answers it in Python, where is_meta
        # and is_cpu each dispatch a device query through the fake mode (~20 us a tensor);
        # a plain tensor answers is_cpu in C, without making a torch.device (~0.5 us)
        dev = "cpu" if type(t) is torch.Tensor and t.is_cpu else t.device.type
        if n == 0 or dev == "meta":
            return
        inst = self._inst
        phase = inst.phase
        if phase is _FWD:
            stack = inst.stack
            module = (stack[-1].module or "") if stack else ""
        else:
            module = inst.module_now()
        rec = _Rec(
            n, TEMPS, module, phase, t.dtype is _F32, dev != "cpu", sid, self.step, n, func.__name__
        )
        ref = rec.ref = weakref.ref(st, self._free_cb)
        self._recs[id(ref)] = rec
        self._by_sid[sid] = rec
        rec.born_event = len(self._events)
        self._count(rec, n, phase, module)
        if n > self._big_min:
            self._keep_big(rec)
        if self.stacks:
            rec.site = _user_frame()
        self._events.append((_perf() - self._t0, phase, module, *self._cat))

    def _add(
        self,
        st: torch.UntypedStorage,
        cat: int,
        module: str,
        phase: str,
        fp32: bool,
        n: int | None = None,
        dev: bool = False,
    ) -> _Rec | None:
        snb = st.nbytes()
        n = snb if n is None else n
        if snb == 0:
            return None
        # the tensor's device, not the storage's: a fake tensor's storage is on "meta"
        rec = _Rec(n, cat, module, phase, fp32, dev, id(st), self.step, snb)
        ref = rec.ref = weakref.ref(st, self._free_cb)
        self._recs[id(ref)] = rec
        self._by_sid[rec.storage_id] = rec
        rec.born_event = len(self._events)
        self._count(rec, n)
        if n > self._big_min:
            self._keep_big(rec)
        return rec

    def _keep_big(self, rec: _Rec) -> None:
        """Keep the ``LARGEST`` biggest storages of the recording (for range queries)."""
        self._big_seq += 1
        if len(self._big) < LARGEST:
            heapq.heappush(self._big, (rec.nbytes, self._big_seq, rec))
        else:
            heapq.heapreplace(self._big, (rec.nbytes, self._big_seq, rec))
        if len(self._big) == LARGEST:
            self._big_min = self._big[0][0]

    def largest(self) -> list[dict[str, Any]]:
        """The biggest storages of the recording, largest first, with their lifetimes."""
        return _largest(self._big, self._events)

    def _count(self, rec: _Rec, n: int, phase: str | None = None, module: str = "") -> None:
        if n < 0 and self._dirty:
            self._follow()
        self._cat[rec.category] += n
        key = (rec.module, rec.category)
        self._mod[key] = self._mod.get(key, 0) + n
        if rec.fp32:
            self._fp32[key] = self._fp32.get(key, 0) + n
        journal = self._journal
        if journal is not None:
            journal.append((rec.category, key, rec.fp32, n))
            if len(journal) > 4 * len(self._mod) + 64:
                self._snapshot()  # as cheap now as the changes it replays: amortised O(1)
        self.total += n
        if rec.on_device:
            self.dev_total += n
            if self.dev_total > self.dev_peak:
                self.dev_peak = self.dev_total
        if self.total > self.peak:
            self.peak = self.total
            self._dirty = True
            self._journal = None
            self.peak_time = time.perf_counter() - self._t0
            if phase is None:
                phase = self._phase()
                module = self._module(phase)
            self.peak_phase = phase
            self.peak_module = module
            self.peak_where = self._inst.where()
            self._peak_ev = len(self._events)  # the event about to be written

    def _adjust(self, rec: _Rec, delta: int) -> None:
        self._count(rec, delta)
        rec.nbytes += delta
        self._sample(self._phase(), self._module())

    def _move(self, rec: _Rec, cat: int, module: str | None = None) -> None:
        if self._dirty:
            self._follow()
        n = rec.nbytes
        self._count(rec, -n)
        rec.category = cat
        if module is not None:
            rec.module = module
        self._count(rec, n)
        self._sample(self._phase(), self._module())

    def _on_free(self, ref: weakref.ref[torch.UntypedStorage]) -> None:
        rec = self._recs.pop(id(ref), None)
        if rec is None or not self.active:
            return
        self._by_sid.pop(rec.storage_id, None)
        rec.freed_event = len(self._events)  # the sample written just below
        self._count(rec, -rec.nbytes, "")  # a free never sets a peak: no need to know where
        phase = self._phase()
        self._sample(phase, self._module(phase))

    def _follow(self) -> None:
        """The state is leaving the peak: journal the changes from here on instead of copying
        the breakdown per module now (a copy per peak made a chain of N modules cost N^2)."""
        self._dirty = False
        self._journal = []

    def _snapshot(self) -> None:
        """Set the peak's breakdown: the current one, less the changes since the peak."""
        self._dirty = False
        journal, self._journal = self._journal, None
        self.peak_cat = list(self._cat)
        self.peak_mod = dict(self._mod)  # zeros are dropped when the result is built
        self.peak_fp32 = dict(self._fp32)
        for cat, key, fp32, n in reversed(journal or ()):
            self.peak_cat[cat] -= n
            self.peak_mod[key] -= n
            if fp32:
                self.peak_fp32[key] -= n

    def _sample(self, phase: str, module: str) -> None:
        self._events.append((time.perf_counter() - self._t0, phase, module, *self._cat))

    # ------------------------------------------------------------ where are we
    def _phase(self) -> str:
        return self._inst.phase

    def _module(self, phase: str | None = None) -> str:
        if (phase or self._phase()) == _FWD:
            stack = self._inst.stack
            return (stack[-1].module or "") if stack else ""
        return self._inst.module_now()

    # ------------------------------------------------------------ hooks
    def on_saved(self, t: torch.Tensor) -> None:
        """A tensor was saved for backward: its storage counts as an activation."""
        if not self.active or _current_task() != -1:
            return
        try:
            rec = self._by_sid.get(id(t.untyped_storage()))
        except (RuntimeError, NotImplementedError):
            return
        if rec is not None and rec.category == TEMPS:
            self._move(rec, ACTS)
            where = self._module(_FWD)
            self.saved_by_module[where] = self.saved_by_module.get(where, 0) + rec.nbytes

    def saved(self, t: torch.Tensor) -> None:
        self.on_saved(t)

    def call(
        self,
        node: RawNode,
        module: torch.nn.Module,
        args: tuple[object, ...],
        kwargs: dict[str, object],
    ) -> None:
        if not self.active or node.parent is not None:  # only the root call's inputs count
            return
        for _, t in (*named_tensors(args), *named_tensors(kwargs)):
            rec = self._by_sid.get(id(t.untyped_storage())) if t.layout == torch.strided else None
            if rec is None or rec.category == TEMPS:
                track(self, t, INPUTS, "", _FWD)

    def grad(self, p: torch.Tensor) -> None:
        if self.active and p.grad is not None:
            track(self, p.grad, GRADS, self._inst.param_owner(p), self._phase())

    def optimizer(self, opt: torch.optim.Optimizer, entering: bool) -> None:
        optimizer_step(self, opt, entering)

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

    def result(
        self, max_samples: int | None = None
    ) -> tuple[tuple[MemorySample, ...], MemoryMeta | None]:
        """``(samples, MemoryMeta)`` for the Trace, once the tracker has exited."""
        from labkit.memory.attribution import memory_meta
        from labkit.memory.timeline import MAX_SAMPLES, to_samples

        dev = str(model_device(self.model))
        samples = to_samples(self._events, max_samples or self.max_samples or MAX_SAMPLES)
        return samples, memory_meta(self, dev)

    def mark_step(self) -> None:
        """Start a new step (storages created from now on carry the next step number)."""
        self.step += 1

    @property
    def events(self) -> list[tuple[Any, ...]]:
        """Raw samples ``(time, phase, module, *bytes per category)``, one per change.

        The fields are named in :data:`EVENT_FIELDS`; the counts follow ``CATEGORIES``.
        """
        return self._events


def _largest(big: list[tuple[int, int, _Rec]], ev: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    """The kept biggest storages ``big`` (heap entries), largest first, as dicts, with their
    lifetimes read off the events ``ev``."""
    out = []
    for n, _, r in sorted(big, key=lambda item: (-item[0], item[1])):
        site = f"{r.site[0]}:{r.site[1]}" if r.site else ""
        out.append(
            {
                "bytes": n,
                "category": CATEGORIES[r.category],
                "module": r.module,
                "op": r.op,
                "phase": r.phase,
                "start": round(ev[r.born_event][0], 9) if r.born_event < len(ev) else 0.0,
                "end": round(ev[r.freed_event][0], 9) if 0 <= r.freed_event < len(ev) else None,
                "site": site,
            }
        )
    return out


def _own_tensors(mod: torch.nn.Module) -> tuple[torch.Tensor, ...]:
    """``(*mod.parameters(recurse=False), *mod.buffers(recurse=False))`` read from its tables
    (each of those calls builds a generator chain: ~5 us a module); a module that overrides
    either gets its own answer."""
    cls = type(mod)
    if (
        cls.parameters is not torch.nn.Module.parameters
        or cls.buffers is not torch.nn.Module.buffers
    ):
        return (*mod.parameters(recurse=False), *mod.buffers(recurse=False))
    return (
        *(p for p in mod._parameters.values() if p is not None),
        *(b for b in mod._buffers.values() if b is not None),
    )


def _user_frame() -> tuple[str, int, str] | None:
    """The innermost frame outside torch and labkit: where the user's code made a tensor."""
    f: FrameType | None = sys._getframe(2)
    while f is not None:
        fn = f.f_code.co_filename
        if not (
            fn.startswith(_TORCH_DIR) or fn.startswith(_LABKIT_DIR) or fn.startswith("<frozen")
        ):
            return (fn, f.f_lineno, f.f_code.co_name)
        f = f.f_back
    return None


# a full recording (labkit.trace, layer 1) makes its memory observer through labkit._display
_display.register("trace.memory", MemoryTracker)
