"""``labkit.advise``: read a Trace, name the top bottlenecks, suggest a Recipe change for each.

The advisor only reads a :class:`~labkit.trace.Trace` (plain data); each
:class:`Suggestion` carries the Recipe change it proposes, so
``labkit.compare(model, x, advice.recipes())`` verifies it by measurement.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from labkit._format import fmt_bytes
from labkit.optimize import _advise_measured as _measured
from labkit.optimize import _cpu
from labkit.optimize.recipe import Recipe
from labkit.trace.summary import no_formula_note

if TYPE_CHECKING:
    from labkit.trace import Trace

GEMM_OPS = frozenset(
    {
        "linear",
        "conv1d",
        "conv2d",
        "conv3d",
        "conv_transpose1d",
        "conv_transpose2d",
        "conv_transpose3d",
        "matmul",
        "__matmul__",
        "__rmatmul__",
        "bmm",
        "mm",
        "addmm",
        "baddbmm",
        "einsum",
        "scaled_dot_product_attention",
        "multi_head_attention_forward",
        "bilinear",
    }
)
SOFTMAX_OPS = frozenset({"softmax", "log_softmax", "_softmax"})
ELEMENTWISE_OPS = frozenset(
    {
        "add",
        "__add__",
        "__iadd__",
        "mul",
        "__mul__",
        "sub",
        "__sub__",
        "div",
        "__truediv__",
        "relu",
        "gelu",
        "silu",
        "tanh",
        "sigmoid",
        "dropout",
        "layer_norm",
        "batch_norm",
        "group_norm",
        "softmax",
        "exp",
        "pow",
        "__pow__",
        "rsqrt",
        "mean",
        "neg",
        "where",
    }
)
_CONVS = ("Conv1d", "Conv2d", "Conv3d")
_BNS = ("BatchNorm1d", "BatchNorm2d", "BatchNorm3d")


@dataclass(frozen=True)
class Suggestion:
    """One bottleneck in plain words and the Recipe change that may help.

    Args:
        title: The finding and the change, e.g. ``"GEMMs are 70% of step time: try bf16-mixed"``.
        detail: The figures behind it and the caveats.
        change: Recipe fields to change, e.g. ``{"precision": "bf16-mixed"}``.
        share: The fraction of time, FLOPs or memory the finding covers (0..1).
        where: Module paths involved (most costly first).
    """

    title: str
    detail: str
    change: dict[str, Any]
    share: float = 0.0
    where: tuple[str, ...] = ()

    def recipe(self, base: Recipe | None = None) -> Recipe:
        """``base`` (default ``Recipe()``) with this suggestion's change."""
        return (base or Recipe()).replace(**self.change)


@dataclass(frozen=True)
class Advice:
    """What :func:`advise` found: suggestions, most important first.

    Args:
        suggestions: The findings with their Recipe changes.
        notes: Caveats about the trace (e.g. no op nodes in timing mode).

    Example:
        >>> advice = labkit.advise(labkit.trace(model, x))  # doctest: +SKIP
        >>> print(advice)  # doctest: +SKIP
        >>> labkit.compare(model, x, advice.recipes())  # doctest: +SKIP
    """

    suggestions: tuple[Suggestion, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)

    def recipes(self, base: Recipe | None = None) -> dict[str, Recipe]:
        """One Recipe per suggestion, keyed by its label, ready for :func:`labkit.compare`."""
        out: dict[str, Recipe] = {}
        for s in self.suggestions:
            r = s.recipe(base)
            out.setdefault(r.label, r)
        return out

    def __iter__(self) -> Iterator[Suggestion]:
        return iter(self.suggestions)

    def __len__(self) -> int:
        return len(self.suggestions)

    def __repr__(self) -> str:
        if not self.suggestions:
            lines = ["Advice: nothing stands out"]
        else:
            lines = [f"Advice ({len(self.suggestions)} suggestions):"]
        for i, s in enumerate(self.suggestions, 1):
            lines.append(f"  {i}. {s.title}")
            lines.append(f"     {s.detail}")
            lines.append(f"     change: {s.change}")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


def advise(trace: Trace, *, inference: bool | None = None, top: int = 5) -> Advice:
    """Name the top bottlenecks of a traced step with a suggested Recipe change each.

    Args:
        trace: A trace from :func:`labkit.trace` (``mode="full"`` gives op-level advice).
        inference: Whether the model serves inference (enables int8 and fusion advice).
            Default: True when the trace has no backward pass.
        top: At most this many suggestions.

    A suggestion whose recipe ``labkit.compare`` measured slower than its baseline
    earlier in this process, on this device, says so in its title and detail (with
    why, on CPU) and ranks lower.

    Returns:
        An :class:`Advice`.

    Example:
        >>> advice = labkit.advise(labkit.trace(model, x))  # doctest: +SKIP
        >>> advice.suggestions[0].title  # doctest: +SKIP
        'GEMMs are 71% of step time: try bf16-mixed'
    """
    from labkit.trace import Trace

    if not isinstance(trace, Trace):
        raise TypeError(
            f"advise() needs a labkit Trace (from labkit.trace(model, x)), "
            f"got {type(trace).__name__}"
        )
    if inference is None:
        inference = not trace.meta.backward
    ops = [n for n in trace.nodes if n.kind == "op"]
    notes: list[str] = []
    if not ops:
        notes.append(
            "the trace has no op nodes (mode='timing'?): record with mode='full' for "
            "GEMM and softmax advice"
        )
    if trace.meta.no_flop_formula:
        notes.append(no_formula_note(trace))
    found: list[Suggestion] = []
    found += _softmax_fp16(ops, trace)
    found += _gemms(ops, trace, inference)
    found += _checkpointing(trace)
    found += _elementwise(ops, trace)
    found += _conv_bn(trace, inference)
    found = _measured.annotate(found, trace.meta.device)
    found = _measured.name_costliest_break(found, trace)
    found.sort(key=lambda s: -s.share)
    return Advice(tuple(found[:top]), tuple(notes))


def _module_of(trace: Trace, node: Any) -> str:
    parent = node.parent
    while parent is not None:
        p = trace.nodes[parent]
        if p.kind == "module":
            return p.module or ""
        parent = p.parent
    return ""


def _gemms(ops: list[Any], trace: Trace, inference: bool) -> list[Suggestion]:
    gemm = [n for n in ops if n.name in GEMM_OPS]
    if not gemm:
        return []
    fwd_time = trace.meta.forward_time
    # op times and the forward time are separate medians: a share can read past 100%
    t_share = min(1.0, sum(n.fwd_time for n in gemm) / fwd_time) if fwd_time > 0 else 0.0
    total_flops = sum(n.flops_fwd for n in ops)
    f_share = sum(n.flops_fwd for n in gemm) / total_flops if total_flops else 0.0
    if f_share < 0.6 and t_share < 0.4:
        return []
    share = (t_share + f_share) / 2 if fwd_time > 0 else f_share
    # ops that ran without a FLOP formula count 0: the share is of the FLOPs counted
    counted = "counted FLOPs" if trace.meta.no_flop_formula else "FLOPs"
    headline = f"GEMMs are {f_share:.0%} of {counted} and {t_share:.0%} of forward time"
    by_mod: dict[str, float] = defaultdict(float)
    for n in gemm:
        by_mod[_module_of(trace, n)] += n.fwd_time
    where = tuple(sorted(by_mod, key=lambda k: -by_mod[k])[:5])
    figures = (
        f"{t_share:.0%} of forward time and {f_share:.0%} of forward {counted} are in matrix "
        "multiplies" + (f" ({no_formula_note(trace)})" if trace.meta.no_flop_formula else "")
    )
    out = []
    on_cpu = trace.meta.device.startswith("cpu")
    if not on_cpu or _cpu.native_bf16():
        hw = (
            f"this CPU has native bf16 ({_cpu.bf16_unit()})"
            if on_cpu
            else "GPUs run bf16 on tensor cores"
        )
        out.append(
            Suggestion(
                f"{headline}: try bf16-mixed",
                f"{figures}; {hw}. Check the deviation with labkit.compare.",
                {"precision": "bf16-mixed"},
                share,
                where,
            )
        )
    linears = [n for n in gemm if n.name == "linear"]
    if inference and linears:
        lin_share = sum(n.flops_fwd for n in linears) / total_flops if total_flops else share
        out.extend(_int8(linears, lin_share, figures, where, on_cpu, counted))
    if on_cpu and not _cpu.native_bf16() and not out:
        out.append(
            Suggestion(
                f"{headline}: try torch.compile (no native bf16 here)",
                f"{figures}; this CPU has no native bf16, so bf16-mixed would be slower.",
                {"compile": "default"},
                share * 0.5,
                where,
            )
        )
    return out


SMALL_ROWS = 16  # at most this many rows per Linear call: weight loading dominates


def _int8(
    linears: list[Any],
    share: float,
    figures: str,
    where: tuple[str, ...],
    on_cpu: bool,
    counted: str = "FLOPs",
) -> list[Suggestion]:
    """Both torchao int8 configs, the one that fits the Linear shapes first."""
    rows = sorted(_rows(n) for n in linears)
    m = rows[len(rows) // 2] if rows else 0
    small = 0 < m <= SMALL_ROWS
    shape = f"Linear calls multiply {m} rows (median)"
    dyn = Suggestion(
        f"Linear layers are {share:.0%} of {counted}: try int8-dynamic quantization",
        f"{figures}; {shape}: "
        + (
            "with so few rows, quantizing activations costs about what it saves"
            if small
            else "int8 activations and weights pay when many rows share each weight"
        )
        + ". Accuracy changes: verify with labkit.compare.",
        {"quantization": "int8-dynamic"},
        share * (0.6 if small else 0.9),
        where,
    )
    wo = Suggestion(
        f"Linear layers are {share:.0%} of {counted}: try int8-weight-only quantization",
        f"{figures}; {shape}: int8 weights are 4x smaller, activations stay float; it pays "
        "when loading weights dominates (few rows). Verify with labkit.compare.",
        {"quantization": "int8-weight-only"},
        share * (0.9 if small else 0.6),
        where,
    )
    out = [dyn, wo]
    if on_cpu and _cpu.int8_dot():
        out.append(
            Suggestion(
                f"Linear layers are {share:.0%} of {counted}: "
                "try int8-dynamic compiled (VNNI here)",
                f"{figures}; this CPU has VNNI int8 dot products; under torch.compile "
                "inductor lowers torchao's int8 matmuls to fused oneDNN kernels.",
                {"quantization": "int8-dynamic", "compile": "default"},
                share * 0.85,
                where,
            )
        )
    return out


def _rows(node: Any) -> int:
    shape = node.inputs[0].shape if node.inputs else ()
    n = 1
    for d in shape[:-1]:
        n *= int(d)
    return n


def _softmax_fp16(ops: list[Any], trace: Trace) -> list[Suggestion]:
    risky = [
        n for n in ops if n.name in SOFTMAX_OPS and any(t.dtype == "float16" for t in n.inputs)
    ]
    if not risky:
        return []
    where = tuple(dict.fromkeys(_module_of(trace, n) or "(top level)" for n in risky))
    return [
        Suggestion(
            f"softmax runs in fp16 in {where[0]}: overflow risk, try bf16-mixed",
            f"{len(risky)} softmax calls take float16 inputs (in {', '.join(where[:3])}); logits "
            "past 65504 become inf. bf16 has fp32's range.",
            {"precision": "bf16-mixed"},
            1.0,
            where,
        )
    ]


def _checkpointing(trace: Trace) -> list[Suggestion]:
    if not trace.meta.backward:
        return []
    rows = trace.rows()
    total = next((r["saved_bytes"] for r in rows if r["path"] == ""), 0)
    if total <= 0:
        return []
    by_type: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        if r["path"] and r["calls"] and r["depth"] >= 1 and r["params"] > 0:
            by_type[r["type"]].append(r)
    best = None
    for typ, group in by_type.items():
        if len(group) < 2:
            continue
        # only the outermost modules of this type, so nested ones are not counted twice
        paths = [g["path"] for g in group]
        outer = [g for g in group if not any(g["path"].startswith(p + ".") for p in paths)]
        saved = sum(g["saved_bytes"] for g in outer)
        if any(g["path"].count(".") == 0 and len(outer) == 1 for g in outer):
            continue
        if best is None or saved > best[1] or (saved == best[1] and len(outer) < len(best[2])):
            best = (typ, saved, outer)
    if best is None:
        return []
    typ, saved, outer = best
    share = saved / total
    if share < 0.3:
        return []
    where = tuple(g["path"] for g in sorted(outer, key=lambda g: -g["saved_bytes"]))
    return [
        Suggestion(
            f"{len(outer)} {typ} blocks hold {share:.0%} of saved activations: "
            f"try checkpointing {typ}",
            f"they save {fmt_bytes(saved)} of {fmt_bytes(total)} for backward; checkpointing "
            "recomputes them in backward (about one extra forward of those blocks).",
            {"checkpoint": (typ,)},
            share * 0.8,
            where,
        )
    ]


def _elementwise(ops: list[Any], trace: Trace) -> list[Suggestion]:
    small = [n for n in ops if n.name in ELEMENTWISE_OPS]
    fwd_time = trace.meta.forward_time
    if len(small) < 8 or fwd_time <= 0:
        return []
    share = sum(n.fwd_time for n in small) / fwd_time
    if share < 0.3:
        return []
    return [
        Suggestion(
            f"{len(small)} elementwise/normalization ops are {share:.0%} of forward time: "
            "try torch.compile",
            "torch.compile fuses chains of small ops into fewer kernels; compile time is paid once "
            "(labkit.compare reports it and the break-even step count).",
            {"compile": "default"},
            share * 0.7,
        )
    ]


def _conv_bn(trace: Trace, inference: bool) -> list[Suggestion]:
    if not inference:
        return []
    types = [m.type for m in trace.modules]
    convs = sum(t in _CONVS for t in types)
    bns = sum(t in _BNS for t in types)
    if not convs or not bns:
        return []
    return [
        Suggestion(
            f"{bns} BatchNorm layers next to {convs} convolutions: "
            "try fuse_conv_bn (and channels_last)",
            "for inference a BatchNorm after a convolution folds into its weights, saving a pass "
            "over each activation; channels_last suits oneDNN and tensor-core convolutions.",
            {"fuse_conv_bn": True, "channels_last": True},
            0.3,
        )
    ]
