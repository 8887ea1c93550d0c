"""The Trace: plain, immutable data describing one recorded run of a model.

A Trace holds no tensors, modules or callbacks: only numbers, strings and tuples.
Every view (tables, widgets, files, diffs) is a function of it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from labkit._format import fmt_count, fmt_time

if TYPE_CHECKING:
    import os

    from labkit.trace.roll import RolledBlock

SCHEMA_VERSION = 1

NODE_KINDS = ("input", "output", "module", "op")


@dataclass(frozen=True)
class TensorMeta:
    """Shape, dtype and device of one tensor that flowed through the model.

    Args:
        shape: The tensor's shape.
        dtype: Its dtype without the ``torch.`` prefix, e.g. ``"float32"``.
        device: Its device, e.g. ``"cpu"`` or ``"cuda:0"``.
        name: Where it sat in the call's inputs or outputs, e.g. ``"x"`` or ``"[1]"``.
    """

    shape: tuple[int, ...]
    dtype: str
    device: str = "cpu"
    name: str = ""

    @property
    def nbytes(self) -> int:
        """Logical size in bytes (numel times element size)."""
        n = 1
        for d in self.shape:
            n *= d
        return n * _DTYPE_BYTES.get(self.dtype, 4)


_DTYPE_BYTES = {
    "float64": 8,
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "int64": 8,
    "int32": 4,
    "int16": 2,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "complex64": 8,
    "complex128": 16,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
}


@dataclass(frozen=True)
class Node:
    """One node of the graph that ran.

    A node is a model input, a model output, one *call* of a module (two calls of a
    shared module are two nodes pointing to the same ``module`` path) or one tensor
    operation called from forward code. Module calls nest: ``parent`` is the id of
    the enclosing call.

    Additive figures are *self* figures: a module call's ``flops_fwd`` counts what ran
    directly in it (its op nodes included) but not in its child module calls. Use
    :meth:`Trace.total` for inclusive figures. ``fwd_time`` is inclusive (measured
    wall time of the call); ``bwd_time`` is the summed time of the autograd nodes the
    call and its descendants created.

    Args:
        id: Index of the node in ``Trace.nodes``.
        key: Identity stable across traces of the same model, used by merge and diff.
        kind: ``"input"``, ``"output"``, ``"module"`` or ``"op"``.
        name: Module path, op name or input/output name.
        type: Module class name, op name or ``"Tensor"``.
        parent: Id of the enclosing module call, ``None`` at the top.
        module: Module path for module calls, else ``None``.
        inputs: The tensors the node received.
        outputs: The tensors the node produced.
        count: How many times the node ran (above 1 after :meth:`Trace.merge`).
        fwd_time: Forward time of the call, seconds (median over timing passes when
            ``labkit.trace`` took them; per-run mean in a merged trace).
        bwd_time: Backward time of the autograd nodes the call and its descendants made.
        bwd_self_time: Backward time of the autograd nodes the call itself made.
        fwd_iqr: Interquartile range of ``fwd_time`` over the timing passes.
        bwd_iqr: Interquartile range of ``bwd_time`` over the timing passes.
        runs: In how many of the merged runs the node ran (1 for a single recording).
        fwd_pass_times: A module call's ``fwd_time`` in each timing pass, in pass order,
            net of the hook cost alike (``labkit.diff``'s intervals resample them); empty
            for op nodes and in files of an older labkit.
        bwd_pass_times: Its ``bwd_self_time`` in each timing pass, likewise.
    """

    id: int
    key: str
    kind: str
    name: str
    type: str
    parent: int | None = None
    module: str | None = None
    inputs: tuple[TensorMeta, ...] = ()
    outputs: tuple[TensorMeta, ...] = ()
    count: int = 1
    fwd_time: float = 0.0
    bwd_time: float = 0.0
    bwd_self_time: float = 0.0
    flops_fwd: int = 0
    flops_bwd: int = 0
    saved_bytes: int = 0
    fwd_iqr: float = 0.0
    bwd_iqr: float = 0.0
    runs: int = 1
    fwd_pass_times: tuple[float, ...] = ()
    bwd_pass_times: tuple[float, ...] = ()

    @property
    def activation_bytes(self) -> int:
        """Bytes of the tensors this node produced."""
        return sum(t.nbytes for t in self.outputs)


@dataclass(frozen=True)
class Edge:
    """A tensor flowing from node ``src`` to node ``dst``.

    Args:
        src: Producing node id.
        dst: Consuming node id.
        shape: The tensor's shape.
        dtype: The tensor's dtype.
    """

    src: int
    dst: int
    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True)
class ModuleInfo:
    """One module of the model (whether it ran or not) and its parameters.

    Parameters are counted once: a parameter registered in several modules is
    counted at the first (in ``named_modules`` order) and counted as ``shared_params``
    at the others.

    Args:
        path: Dotted module path; ``""`` for the root.
        type: Class name.
        depth: 0 for the root.
        params: Parameters owned directly (not by children), counted once.
        param_bytes: Their bytes.
        trainable: How many of ``params`` require grad.
        shared_params: Elements of parameters this module shares with an earlier module.
        calls: How many times it was called in the trace.
        library: The module that defines its class when that is an installed library's
            (site-packages or the standard library: ``torch.nn.modules.activation``,
            ``torch_geometric.nn.conv.gat_conv``), ``""`` for the user's own code. A graph
            view opens a library's layers collapsed (their insides are not the user's).
    """

    path: str
    type: str
    depth: int
    params: int = 0
    param_bytes: int = 0
    trainable: int = 0
    shared_params: int = 0
    calls: int = 0
    library: str = ""


#: The memory categories of :attr:`MemorySample.bytes`, in the order every view stacks
#: them (the memory tracker counts into a list indexed in this order).
MEMORY_CATEGORIES = ("parameters", "gradients", "optimizer", "activations", "temporaries", "inputs")


@dataclass(frozen=True)
class MemorySample:
    """Live bytes by category at one moment of a recorded step.

    Args:
        time: Seconds since the recording started.
        phase: ``"forward"``, ``"backward"`` or ``"optimizer"``.
        module: Module path running at that moment (``""`` when none).
        bytes: Bytes per category (:data:`MEMORY_CATEGORIES`: parameters, gradients,
            optimizer, activations, temporaries, inputs).
    """

    time: float
    phase: str
    module: str
    bytes: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class MemoryMeta:
    """What a memory recording found: the peak, who holds it, and the allocator's view.

    Args:
        device: Device of the model's parameters.
        peak_bytes: Most live tensor-storage bytes at any moment of the recording.
        peak_time: When the peak happened, seconds since the recording started.
        peak_phase: ``"forward"``, ``"backward"`` or ``"optimizer"`` at the peak.
        peak_module: Module running at the peak (``""`` when none).
        peak_where: Where the peak is, in words: the innermost module, else the phase and
            the call (``"AdamW.step"``, ``"backward of 'enc.0'"``, the loss).
        start_bytes: Live bytes when the recording started (parameters, inputs, ...).
        end_bytes: Live bytes when it ended.
        peak_by_category: Bytes per category at the peak.
        peak_by_module: Bytes per module and category at the peak; tensors are charged
            to the module that created them (parameters, gradients and optimizer state
            to the module owning the parameter).
        peak_fp32_by_category: Of ``peak_by_category``, the float32 bytes.
        saved_by_module: Bytes saved for backward per module (each storage once).
        largest: The biggest storages of the recording, largest first: ``bytes``,
            ``category``, ``module``, ``op``, ``phase``, ``start`` and ``end`` (seconds;
            ``None`` while alive at the end) and ``site`` (``file:line`` with stacks).
        resident_before: Bytes of the inputs' storages outside what the inputs use (a
            batch sliced from a dataset): resident before the step, not counted in it.
        events: Allocation, free and re-categorisation events seen (before any
            down-sampling of ``Trace.memory``).
        allocator: CUDA caching-allocator figures (allocated, reserved, peaks,
            fragmentation %, retries, ...); empty on CPU.
        failed_module: Module running when the recording failed, else ``None``.
        error: The error that ended the recording, else ``None``.
        notes: Plain-language caveats.

    Example:
        >>> import torch, labkit
        >>> model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU())
        >>> m = labkit.memory(model, torch.randn(2, 4)).trace.memory_meta
        >>> m.peak_phase, m.peak_module
        ('backward', '0')
    """

    device: str = "cpu"
    peak_bytes: int = 0
    peak_time: float = 0.0
    peak_phase: str = "forward"
    peak_module: str = ""
    peak_where: str = ""
    start_bytes: int = 0
    end_bytes: int = 0
    peak_by_category: dict[str, int] = field(default_factory=dict)
    peak_by_module: dict[str, dict[str, int]] = field(default_factory=dict)
    peak_fp32_by_category: dict[str, int] = field(default_factory=dict)
    saved_by_module: dict[str, int] = field(default_factory=dict)
    resident_before: int = 0
    largest: tuple[dict[str, Any], ...] = ()
    events: int = 0
    allocator: dict[str, Any] = field(default_factory=dict)
    failed_module: str | None = None
    error: str | None = None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class TraceMeta:
    """What was recorded and how.

    Args:
        model: Class name of the root module.
        mode: ``"timing"`` or ``"full"``.
        device: Device of the model's parameters.
        torch_version: ``torch.__version__`` at record time.
        backward: Whether a backward pass was recorded.
        calls: How many times the root module was called.
        forward_time: Summed wall time of the root calls, seconds.
        backward_time: Summed time of all recorded autograd nodes, seconds.
        outside_flops_fwd: Forward FLOPs that ran outside any module (e.g. the loss).
        outside_flops_bwd: Backward FLOPs of autograd nodes created outside modules.
        outside_bwd_time: Backward time of autograd nodes created outside modules.
        timing: How the times were taken (passes, warm-up, clock, device).
        runs: How many recorded runs this trace stands for (above 1 after
            :meth:`Trace.merge`; its figures are then per-run means).
        forward_iqr: Interquartile range of ``forward_time`` over the timing passes.
        backward_iqr: Interquartile range of ``backward_time`` over the timing passes.
        notes: Plain-language caveats about the figures.
        hook_cost: What was subtracted from module times for labkit's timing hooks, in
            seconds: ``call`` per module call, ``child`` per module call inside it,
            ``segment`` per backward segment (measured at trace time; empty when none).
        no_flop_formula: Ops that ran without a FLOP formula, so their FLOPs are not
            counted: ``op``, ``calls``, ``module`` (where first seen), ``time`` (their
            measured seconds, forward + backward, when op times were taken) and ``share``
            of the step's measured time.
        fwd_floored: Keys of module calls whose ``fwd_time`` is at its floor: taking the
            hook cost off would have left less than the calls inside them or a tenth of the
            measured time (a busy machine's estimate), so the figure is a lower bound;
            summaries mark it ``~``.
        bwd_floored: Likewise for ``bwd_self_time``.
    """

    model: str
    mode: str
    device: str = "cpu"
    torch_version: str = ""
    backward: bool = False
    calls: int = 1
    forward_time: float = 0.0
    backward_time: float = 0.0
    outside_flops_fwd: int = 0
    outside_flops_bwd: int = 0
    outside_bwd_time: float = 0.0
    timing: str = ""
    runs: int = 1
    forward_iqr: float = 0.0
    backward_iqr: float = 0.0
    notes: tuple[str, ...] = ()
    hook_cost: dict[str, float] = field(default_factory=dict)
    no_flop_formula: tuple[dict[str, Any], ...] = ()
    fwd_floored: tuple[str, ...] = ()
    bwd_floored: tuple[str, ...] = ()


@dataclass(frozen=True)
class Trace:
    """One recorded run of a model: the graph that ran and what each part cost.

    Build one with :func:`labkit.trace`; load one with :meth:`Trace.load`.

    Args:
        meta: What was recorded and how.
        modules: Every module of the model with its parameters.
        nodes: Inputs, outputs, module calls and ops, in the order they started.
        edges: Tensors flowing between nodes.
        memory: Memory samples through the step (filled by memory recordings).
        version: Schema version of this data.
        memory_meta: Peak, attribution and allocator figures of a memory recording.

    Example:
        >>> import torch, labkit
        >>> model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU())
        >>> t = labkit.trace(model, torch.randn(2, 4))
        >>> t.total_params
        40
        >>> print(t.summary(columns=("type", "params")))
        Module            Type  Params
        ----------  ----------  ------
        Sequential  Sequential      40
          0             Linear      40
          1               ReLU       0
        ----------  ----------  ------
        Total                       40
        Params: 40 (40 trainable), 160 B; mode=full
    """

    meta: TraceMeta
    modules: tuple[ModuleInfo, ...]
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    memory: tuple[MemorySample, ...] = ()
    version: int = SCHEMA_VERSION
    memory_meta: MemoryMeta | None = None

    # ----------------------------------------------------------------- lookups
    @cached_property
    def children(self) -> dict[int | None, tuple[int, ...]]:
        """Node ids by parent id (``None`` for top-level nodes)."""
        out: dict[int | None, list[int]] = {}
        for n in self.nodes:
            out.setdefault(n.parent, []).append(n.id)
        return {k: tuple(v) for k, v in out.items()}

    @cached_property
    def module_by_path(self) -> dict[str, ModuleInfo]:
        """Modules keyed by path."""
        return {m.path: m for m in self.modules}

    def calls_of(self, path: str) -> tuple[Node, ...]:
        """The call nodes of the module at ``path``."""
        return tuple(n for n in self.nodes if n.kind == "module" and n.module == path)

    def total(self, node_id: int, attr: str) -> float:
        """Inclusive value of an additive self figure over a node's subtree."""
        return self._totals(attr)[node_id]

    def _totals(self, attr: str) -> list[float]:
        cache = self.__dict__.setdefault("_total_cache", {})
        if attr not in cache:
            vals = [getattr(n, attr) for n in self.nodes]
            for n in reversed(self.nodes):  # children come after parents
                if n.parent is not None and n.kind == "module":
                    vals[n.parent] += vals[n.id]
            cache[attr] = vals
        return cache[attr]

    # ----------------------------------------------------------------- totals
    @property
    def total_params(self) -> int:
        """Unique parameter elements (shared parameters counted once)."""
        return sum(m.params for m in self.modules)

    @property
    def total_flops(self) -> int:
        """All FLOPs recorded, forward and backward, inside modules and outside."""
        inside = sum(n.flops_fwd + n.flops_bwd for n in self.nodes if n.kind == "module")
        return inside + self.meta.outside_flops_fwd + self.meta.outside_flops_bwd

    # ----------------------------------------------------------------- views
    def rows(self) -> list[dict[str, Any]]:
        """One plain record per module (figures summed over its calls)."""
        from labkit.trace.summary import module_rows

        return module_rows(self)

    def summary(self, depth: int | None = None, **kwargs: Any) -> str:
        """A text table of modules down to ``depth``; see :func:`labkit.trace.summary.summarize`."""
        from labkit.trace.summary import summarize

        return summarize(self, depth=depth, **kwargs)

    def top(self, n: int = 10, by: str = "time") -> list[dict[str, Any]]:
        """The ``n`` modules costing most by self ``time``, ``flops``, ``params`` or ``memory``."""
        from labkit.trace.summary import top

        return top(self, n, by=by)

    def to_pandas(self) -> Any:
        """The rows as a ``pandas.DataFrame`` (needs pandas)."""
        from labkit.trace.summary import to_pandas

        return to_pandas(self)

    def rolled(self) -> tuple[RolledBlock, ...]:
        """Runs of identical consecutive sibling calls, for display as ``x N``."""
        from labkit.trace.roll import roll_repeats

        return roll_repeats(self)

    def show(self, **kwargs: Any) -> Any:
        """Graph, profile and memory views in linked tabs; see :class:`labkit.views.TraceView`
        (registered by the views: ``labkit.show(trace)`` is the same)."""
        from labkit import _display

        return _display.display("trace.show", self, **kwargs)

    def plot(self, view: str = "graph", **kwargs: Any) -> bytes:
        """A static PNG of ``"graph"``, ``"profile"`` or ``"memory"`` (matplotlib)."""
        from labkit import _display

        png: bytes = _display.display("trace.plot", self, view, **kwargs)
        return png

    def _repr_html_(self) -> str:
        from labkit import _display

        html: str = _display.display("trace.html", self)
        return html

    # ----------------------------------------------------------------- files
    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict, with ``schema`` and ``version`` keys."""
        from labkit.trace.io import trace_to_dict

        return trace_to_dict(self)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the trace as versioned JSON, atomically."""
        from labkit.trace.io import save

        save(self, path)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Trace:
        """Read a trace written by :meth:`save`; errors name the file and the problem."""
        from labkit.trace.io import load

        return load(path)

    @classmethod
    def merge(cls, *traces: Trace) -> Trace:
        """Union of several traces' graphs, with how often each node ran."""
        from labkit.trace.merge import merge

        return merge(*traces)

    def replace(self, **changes: Any) -> Trace:
        """A copy with some fields replaced."""
        return dataclasses.replace(self, **changes)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Trace):
            return NotImplemented
        return (
            self.version,
            self.meta,
            self.modules,
            self.nodes,
            self.edges,
            self.memory,
            self.memory_meta,
        ) == (
            other.version,
            other.meta,
            other.modules,
            other.nodes,
            other.edges,
            other.memory,
            other.memory_meta,
        )

    def __repr__(self) -> str:
        calls = sum(1 for n in self.nodes if n.kind == "module")
        ops = sum(1 for n in self.nodes if n.kind == "op")
        return (
            f"Trace(model={self.meta.model}, mode={self.meta.mode!r}, modules={len(self.modules)}, "
            f"calls={calls}, ops={ops}, params={fmt_count(self.total_params)}, "
            f"flops={fmt_count(self.total_flops)}, fwd={fmt_time(self.meta.forward_time)}, "
            f"bwd={fmt_time(self.meta.backward_time)})"
        )


# Unhashable, as a mutable-looking value is in Python: a full trace holds dicts, so a value
# hash cannot exist, and @dataclass(frozen=True) would otherwise generate one (it treats
# `__hash__ = None` beside a hand-written __eq__ as not given).
Trace.__hash__ = None  # type: ignore[assignment]
