"""The front-end contract: what each widget's dict traits carry to ``widgets/src/*.js``.

Written once, as TypedDicts: field names, units and shapes. The JS reads these names
only, and takes labels and units from the payload itself (``metrics``, ``headers``), so
a label or unit changes here and in :mod:`labkit.views._payload`, nowhere else.

Conventions:

- Arrays are parallel: element ``k`` of every per-node (per-row, per-sample) list is
  node (row, sample) ``k``.
- Times are seconds, memory is bytes, FLOPs and parameters are counts.
- A unit is one of :data:`UNITS`; ``widgets/src/_units.js`` maps each to a formatter.

:func:`problems` checks a value against one of these types (the payload tests run it on
what the views send for real traces).
"""

from __future__ import annotations

import types
import typing
from typing import Any, TypedDict, Union

#: The units a payload may name, with how the browser writes them (widgets/src/_units.js).
UNITS: dict[str, str] = {
    "text": "as is",
    "int": "a plain integer (calls, runs)",
    "count": "1.23M (FLOPs, parameters)",
    "time": "seconds, written 12.3 ms",
    "bytes": "bytes, written 1.5 KiB",
}

#: A figure per drawn node: metric key -> value per payload node (in ``ids`` order).
NodeMetrics = dict[str, list[float | int]]


class GraphInstances(TypedDict):
    """Module calls inside rolled blocks: which drawn box shows each, and which call it is."""

    name: list[str]  #: module path of the call (``"blocks.4.mlp"``)
    node: list[int]  #: payload index of the box that shows it
    where: list[list[int]]  #: flat ``[rolled entry, call (0-based)]`` pairs, outermost first


class GraphPayload(TypedDict):
    """``GraphView.graph``: the drawn nodes of a trace (``_payload.graph_payload``)."""

    key: str  #: hash of what the layout depends on (nodes, nesting, edges, rolling)
    model: str  #: the model's class name
    ids: list[int]  #: trace node id of payload node k
    kind: str  #: one letter per node: i(nput), o(utput), m(odule call), p (op)
    parent: list[int]  #: payload index of the enclosing call, -1 at the top
    name: list[str]  #: module path or op name
    type: list[str]  #: module class or op type
    ins: list[list[int]]  #: per node, indices into ``tensors`` of its inputs
    outs: list[list[int]]  #: per node, indices into ``tensors`` of its outputs
    rolled: list[list[int | str]]  #: ``[node, calls, block name]`` per rolled block
    instances: GraphInstances  #: calls inside rolled blocks (``GraphView.instance_metrics``)
    edges: list[int]  #: flat ``src, dst`` payload-index pairs (leaf to leaf)
    edge_tensor: list[int]  #: per edge, index into ``tensors``
    tensors: list[str]  #: ``"2x8x16x16 float32"`` (shape ``x``-joined, dtype)
    runs: list[int]  #: in how many of the merged runs each node ran
    total_runs: int  #: runs merged into the trace (1 for one recording)
    metrics: dict[str, list[str]]  #: metric key -> ``[label, unit]`` (the colour-by menu)


class ProfilePayload(TypedDict):
    """``ProfileView.table``: one row per module call path (``_payload.profile_payload``)."""

    model: str
    columns: list[str]  #: the columns of each row (+ ``runs`` for a merged trace)
    rows: list[list[str | int | float]]  #: one list per module, in ``columns`` order
    output: list[str]  #: per row, the first output's shape (``"2x8"``) or ``""``
    timing: str  #: how the times were taken
    runs: int  #: runs merged into the trace
    noisy: dict[str, list[str]]  #: path -> times (fwd_time, bwd_time) whose IQR > median / 2
    headers: dict[str, list[str]]  #: shown column -> ``[header, unit]``, in display order
    metrics: dict[str, list[str]]  #: metric key -> ``[label, unit]`` (the top-N menu)
    metric_columns: dict[str, list[str]]  #: metric key -> ``[inclusive, self]`` column


class LargestStorage(TypedDict):
    """One of the biggest storages of a memory recording, with its lifetime."""

    bytes: int
    category: str  #: one of ``labkit.trace.model.MEMORY_CATEGORIES``
    module: str  #: module that created it (``""`` outside modules)
    op: str
    phase: str
    start: float  #: seconds since the recording started
    end: float | None  #: seconds; ``None`` while alive at the end
    site: str  #: ``file:line`` with stacks, else ``""``


class MemoryPayload(TypedDict):
    """``MemoryTimeline.samples``: bytes per category through a step (``memory_payload``)."""

    time: list[float | int]  #: seconds since the recording started, per sample
    phase: list[str]  #: ``forward``, ``backward``, ``optimizer``... per sample
    module: list[str]  #: module path running at each sample (``""`` when none)
    categories: list[str]  #: MEMORY_CATEGORIES present, in that order, then any others
    bytes: list[list[int]]  #: per category, bytes per sample
    colors: list[str]  #: per category, its fill (``#rrggbb``)
    largest: list[LargestStorage]  #: the biggest storages, largest first
    peak_where: str  #: where the peak is, as the summary says it (``"backward of 'fc'"``)


class AttentionEdge(TypedDict):
    """One edge of a node's neighbourhood with its attention weights."""

    src: int
    dst: int
    hop: int  #: 1 = into the picked node
    layer: int  #: the layer whose coefficients these are
    weights: list[float]  #: one per head
    mean: float  #: their average


class AttentionPayload(TypedDict):
    """``AttentionView.view``: ``labkit.gnn.NodeAttention.to_dict()``."""

    node: int
    hops: int
    nodes: list[int]  #: the neighbourhood, picked node first
    labels: list[int] | None  #: class label per node of ``nodes``
    edges: list[AttentionEdge]
    heads: list[int]  #: heads of the layer used, per hop


class Curve(TypedDict):
    """One curve of the dashboard: steps and values (NaN where a value was missing)."""

    x: list[int | float]  #: global step
    y: list[float]


#: ``Dashboard.series``: curve name (``train_loss``, ``train_*``, ``val_*``) -> curve.
DashboardSeries = dict[str, Curve]


class RankTiming(TypedDict):
    """Per-rank step breakdown at an epoch end (several processes), seconds."""

    rank: int
    step_time: float
    data_time: float
    compute_time: float
    comm_wait: float


class DashboardStats(TypedDict):
    """``Dashboard.stats``: the figures of a run (``None`` until known); seconds, bytes."""

    step: int
    total_steps: int | None
    epoch: int  #: 1-based epoch of the last step
    max_epochs: int | None
    world_size: int
    samples_per_s: float | None  #: all ranks together
    step_time: float | None  #: mean over the last steps
    compute_time: float | None
    data_time: float | None
    memory: int | None  #: bytes in use (CUDA allocated or resident set)
    elapsed_s: float
    eta_s: float | None
    loss: float | None
    ranks: list[RankTiming]
    stragglers: list[str]


class RecipeState(TypedDict):
    """``OptimizePanel.recipe_state``: ``Recipe.to_dict()``."""

    precision: str
    quantization: str | None
    compile: str | None
    checkpoint: list[str]
    channels_last: bool
    fuse_conv_bn: bool
    matmul_precision: str
    export: str | None
    export_kwargs: dict[str, Any]  #: added to every call of the exported model


class SelectOption(TypedDict):
    """One option of a select control."""

    value: str  #: the Recipe value (``"none"`` for None)
    label: str
    disabled: bool  #: e.g. an export target whose packages are not installed
    title: str  #: why it is disabled (``""`` when it is not)


class _FieldBase(TypedDict):
    name: str  #: the Recipe field
    label: str
    kind: str  #: ``select``, ``check``, ``list`` or ``kwargs``
    modes: list[str]  #: the modes it applies in
    hints: dict[str, str]  #: mode -> what it means there
    with_export: bool  #: a non-default value combines with an export


class RecipeField(_FieldBase, total=False):
    """One control of the optimize panel: a Recipe field (``panels._optimize_fields.fields``)."""

    options: list[SelectOption]  #: select only
    sets_mode: str  #: choosing a value switches the panel to this mode (export)
    placeholder: str  #: list and kwargs only
    #: the default Recipe's value (``"none"`` for None; a dict for kwargs)
    default: str | bool | list[str] | dict[str, Any]


class RecipeChoices(TypedDict):
    """``OptimizePanel.choices``: the controls, built from Python's field list."""

    fields: list[RecipeField]
    modes: list[str]  #: ``train``, ``inference``


class _BatchLatencyBase(TypedDict):
    batch_size: int
    step_time: float | None
    throughput: float | None  #: samples per second
    speedup: float | None
    error: str | None  #: first line of the error at that size


class BatchLatency(_BatchLatencyBase, total=False):
    """Latency of a recipe at one batch size (inference, ``batch_sizes``); seconds.

    The interval keys are there when the recipe and the baseline both ran more than one
    round at that size."""

    speedup_low: float | None
    speedup_high: float | None
    within_noise: bool | None


class OptimizeRow(TypedDict):
    """One row of ``OptimizePanel.results``: a measured recipe (seconds, bytes, ratios)."""

    label: str
    step_time: float | None
    speedup: float | None  #: baseline step time / this one
    speedup_low: float | None  #: the speedup's interval (paired bootstrap over the rounds)
    speedup_high: float | None
    within_noise: bool | None  #: the interval spans 1.0: not measurably faster or slower
    rounds: int | None  #: interleaved rounds the speedup comes from
    throughput: float | None  #: samples per second
    compile_time: float | None
    break_even: float | None  #: steps until compiling pays for itself
    export_time: float | None
    peak_memory: int | None
    max_abs: float | None  #: largest absolute output difference from the baseline
    rel: float | None
    cosine: float | None
    loss: float | None
    drift_path: str | None  #: the layer where the outputs first drift apart
    drift_rel: float | None  #: its relative difference
    error: str | None  #: first line of the error
    notes: list[str]
    per_batch: list[BatchLatency]
    graph_breaks: int | None  #: compiled recipes only
    step_median: float | None
    step_q1: float | None
    step_q3: float | None
    step_n: int


#: ``OptimizePanel.locks``: control name -> why it is disabled now.
RecipeLocks = dict[str, str]

#: ``GraphView.marks``: trace node id (as text) -> one line per graph break there.
GraphMarks = dict[str, list[str]]


def problems(value: Any, tp: Any, where: str = "payload") -> list[str]:
    """What in ``value`` does not match the type ``tp`` (empty when it matches).

    TypedDicts need every key and no other; ``float`` takes an ``int`` (JSON does not
    tell them apart), ``int`` and ``float`` take no ``bool``.

    Example:
        >>> problems({"x": [1, 2.5], "y": [0.5, "a"]}, Curve)
        ["payload['y'][1]: 'a' is not a float"]
    """
    origin = typing.get_origin(tp)
    if tp is Any:
        return []
    if typing.is_typeddict(tp):
        return _typeddict_problems(value, tp, where)
    if origin in (Union, types.UnionType):
        options = typing.get_args(tp)
        if any(not problems(value, o, where) for o in options):
            return []
        return [f"{where}: {value!r:.60} is none of {' | '.join(_name(o) for o in options)}"]
    if origin is list:
        if not isinstance(value, list):
            return [f"{where}: {type(value).__name__} is not a list"]
        (item,) = typing.get_args(tp)
        return [p for i, v in enumerate(value) for p in problems(v, item, f"{where}[{i}]")]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__} is not a dict"]
        key_tp, val_tp = typing.get_args(tp)
        out = []
        for k, v in value.items():
            out += problems(k, key_tp, f"{where} key {k!r}")
            out += problems(v, val_tp, f"{where}[{k!r}]")
        return out
    return _scalar_problem(value, tp, where)


def _typeddict_problems(value: Any, tp: Any, where: str) -> list[str]:
    if not isinstance(value, dict):
        return [f"{where}: {type(value).__name__} is not a dict ({tp.__name__})"]
    hints = typing.get_type_hints(tp)
    need = tp.__required_keys__
    out = [f"{where}: no {k!r} ({tp.__name__} needs it)" for k in hints if k in need - value.keys()]
    out += [f"{where}: {k!r} is not a field of {tp.__name__}" for k in value if k not in hints]
    for k, v in value.items():
        if k in hints:
            out += problems(v, hints[k], f"{where}[{k!r}]")
    return out


def _scalar_problem(value: Any, tp: Any, where: str) -> list[str]:
    if tp is None or tp is type(None):
        ok = value is None
    elif tp is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif tp in (str, bool):
        ok = isinstance(value, tp)
    else:
        raise TypeError(f"problems: no check for {tp!r} at {where}; add one to _contract.py")
    return [] if ok else [f"{where}: {value!r:.60} is not a{_article(tp)} {_name(tp)}"]


def _name(tp: Any) -> str:
    return "None" if tp is type(None) else getattr(tp, "__name__", str(tp))


def _article(tp: Any) -> str:
    return "n" if _name(tp)[0] in "aeiouAEIOU" else ""


# ------------------------------------------------------------------ each view's traits
# Every synced trait of each view, by the name its front end reads (``model.get("...")``).
# ``scripts/gen_contract_types.py`` writes these and the payloads above as TypeScript
# types (``widgets/src/_contract_types.d.ts``) that the views' JSDoc names, so ``tsc``
# checks every ``model.get``/``model.set``; ``tests/views/test_contract_types.py`` checks
# each class's synced traits against these and the generated file against this module.
# A dict trait is ``{}`` until the view's first update (the dashboard's ``stats``).


class RunRow(TypedDict):
    """One run of ``RunsView.rows`` (``labkit.views.runs.rows_payload``); seconds."""

    name: str
    status: str  #: the same word as ``state`` (the name read before ``state`` came)
    state: str  #: what it is now: ``running``, ``crashed``, ``finished``, ``stopped``, ``failed``
    state_note: str  #: the state in a sentence (lock holder; last step, epoch, time); "" when ended
    steps: int
    epochs: int
    wall_time: float | None
    last: dict[str, float]  #: metric -> its last value
    best: dict[str, float]  #: metric -> its best value
    hparams: dict[str, str | int | float | bool | None]  #: fit options, changed Recipe fields
    error: str | None


class RunCurve(TypedDict):
    """One metric of one run: steps, seconds since the run started (None: unknown), values."""

    x: list[int | float]
    t: list[float | None]
    y: list[float]


#: ``RunsView.curves`` and ``Dashboard.earlier``: run name -> metric -> curve.
RunCurves = dict[str, dict[str, RunCurve]]


class GraphViewTraits(TypedDict):
    """``GraphView`` (``labkit/views/graph.py``) -> ``widgets/src/graph.js``."""

    graph: GraphPayload
    metrics: NodeMetrics
    metric: str  #: the colour-by metric key
    depth: int
    expanded: list[int]  #: trace node ids of the open calls (sent as one buffer of int32)
    selected: str | None  #: module path (linked with the profile and memory views)
    selected_node: int  #: trace node id, -1 for none
    height: int  #: pixels
    marks: GraphMarks
    rolled: bool
    unrolled: list[str]  #: rolled blocks drawn call by call
    instance_metrics: NodeMetrics  #: per entry of ``graph["instances"]``


class ProfileViewTraits(TypedDict):
    """``ProfileView`` (``labkit/views/profile.py``) -> ``widgets/src/profile.js``."""

    table: ProfilePayload
    metric: str  #: the top-N metric key
    top: int
    sort: str  #: the sorted column
    descending: bool
    selected: str | None  #: module path
    height: int  #: pixels


class MemoryTimelineTraits(TypedDict):
    """``MemoryTimeline`` (``labkit/views/memory.py``) -> ``widgets/src/memory.js``."""

    samples: MemoryPayload
    height: int  #: pixels
    empty_message: str  #: shown when there are no samples
    selected: str | None  #: module path


class DashboardTraits(TypedDict):
    """``Dashboard`` (``labkit/views/dashboard.py``) -> ``widgets/src/dashboard.js``."""

    series: DashboardSeries
    earlier: RunCurves  #: earlier runs of the same logdir family, offered for overlay
    compare: bool  #: overlay ``earlier`` (dimmed): ``compare_with=``, or the toggle
    series_t: dict[str, list[float | None]]  #: curve -> seconds since the fit started
    stats: DashboardStats  #: ``{}`` until the first step
    status: str  #: ``idle``, ``running``, ``finished``, ``stopped``, ``failed``
    error: str
    notes: list[str]
    grad_norms: dict[str, float]  #: parameter -> gradient norm, largest ten
    stop_requested: bool  #: set by the Stop button
    stop_token: str  #: the server extension's handle for the Stop file
    updates: int  #: bumped on every published update


class OptimizePanelTraits(TypedDict):
    """``OptimizePanel`` (``labkit/panels``) -> ``widgets/src/optimize_panel.js``."""

    recipe_state: RecipeState
    choices: RecipeChoices
    locks: RecipeLocks
    option_locks: dict[str, dict[str, str]]  #: control -> option value -> why refused
    mode: str  #: ``train`` or ``inference``
    batch_sizes: list[int]
    running: bool
    progress: float  #: 0..1
    status: str
    notice: str
    error: str
    results: list[OptimizeRow]
    measured_mode: str  #: the mode of the shown results
    applied_label: str
    loss_label: str
    suggestion: str  #: a recipe worth measuring next (``""``: none)


class AttentionViewTraits(TypedDict):
    """``AttentionView`` (``labkit/panels``) -> ``widgets/src/attention.js``."""

    view: AttentionPayload
    node: int
    hops: int
    head: int  #: -1 for the mean over heads
    num_nodes: int
    max_hops: int
    height: int  #: pixels


class RunsViewTraits(TypedDict):
    """``RunsView`` (``labkit/views/runs.py``) -> ``widgets/src/runs.js``."""

    rows: list[RunRow]
    curves: RunCurves
    all_metrics: list[str]
    metrics: list[str]  #: the charted metrics
    selected: list[str]  #: the drawn runs
    x_axis: str  #: ``step`` or ``time``
    smoothing: float  #: EMA weight in [0, 1)
    log: bool
    rank_by: str  #: the metric the runs drawn first were chosen by ("" when not ranked)
    rank_note: str  #: which runs are drawn first and why, as the view says it


class DiffRow(TypedDict):
    """One ranked row of a diff (``TraceDiff.explain``), its figures written as text."""

    module: str  #: module path (the base trace's; the other's for an added module)
    type: str  #: its class name
    status: str  #: ``changed``, ``added``, ``removed`` or ``same``
    match: str  #: how it was matched with the other trace (``path``, ``added``...)
    a: str  #: its figure in the base trace
    b: str  #: its figure in the other trace
    delta: str  #: signed change
    interval: str  #: the change's 95% interval (times), ``""`` when none
    share: str  #: share of the total change, ``""`` when the total did not change
    value: float  #: the change as a number (its unit is the metric's)
    noise: bool  #: the interval spans 0
    node: int  #: payload index of the box that draws the module, -1 when not drawn (added)


class DiffMetric(TypedDict):
    """``DiffView.changes[metric]``: what the graph and the table show for one metric."""

    headline: str  #: the explanation's one sentence
    error: str  #: why the traces cannot answer this metric (``""`` when they can)
    unit: str  #: one of :data:`UNITS`
    worse: str  #: what a rise is called in the legend (``slower``, ``more``)
    better: str  #: what a fall is called (``faster``, ``less``)
    delta: list[float]  #: per payload node, its module's change with everything under it
    noise: list[int]  #: per payload node, 1 when that change is within noise
    rows: list[DiffRow]  #: ranked: real changes by size, then within noise, then unchanged
    notes: list[str]  #: how the figures were taken, what differs between the traces


class DiffViewTraits(TypedDict):
    """``DiffView`` (``labkit/views/diff.py``) -> ``widgets/src/diff.js``."""

    graph: GraphPayload  #: the base trace's graph, nothing rolled
    changes: dict[str, DiffMetric]  #: metric -> its changes and rows
    metric: str  #: the metric shown
    expanded: list[int]  #: trace node ids of the open calls
    selected: str | None  #: module path of the selected row
    labels: list[str]  #: names of the base and the other trace
    height: int  #: pixels


#: Each view's bundle (``widgets/src/<name>.js``) -> its traits.
VIEW_TRAITS: dict[str, Any] = {
    "graph": GraphViewTraits,
    "profile": ProfileViewTraits,
    "memory": MemoryTimelineTraits,
    "dashboard": DashboardTraits,
    "optimize_panel": OptimizePanelTraits,
    "attention": AttentionViewTraits,
    "runs": RunsViewTraits,
    "diff": DiffViewTraits,
}
