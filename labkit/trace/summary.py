"""Per-module records, text tables and rankings computed from a Trace."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from labkit._format import fmt_bytes, fmt_count, fmt_shape, fmt_time

if TYPE_CHECKING:
    from labkit.trace.model import Trace

_SUMMED = (
    "calls",
    "fwd_time",
    "fwd_self_time",
    "bwd_time",
    "bwd_self_time",
    "flops_fwd",
    "flops_bwd",
    "flops_fwd_self",
    "flops_bwd_self",
    "activation_bytes",
    "saved_bytes",
    "saved_bytes_self",
    "fwd_iqr",
    "bwd_iqr",
)


NOISY = 0.5
"""A timed figure whose interquartile range exceeds this fraction of its median is noisy."""


def is_noisy(median: float, iqr: float) -> bool:
    """Whether a timed figure is noise rather than a measurement: its spread over the timing
    passes (IQR) exceeds half its median (issue 31)."""
    return median > 0 and iqr > NOISY * median


def module_rows(trace: Trace) -> list[dict[str, Any]]:
    """One plain record per module, in ``named_modules`` order; figures summed over calls.

    Inclusive figures (``fwd_time``, ``flops_fwd``, ``saved_bytes``, ``params``) cover the
    module's children; ``*_self`` figures do not. ``fwd_bound`` and ``bwd_bound`` flag a
    time that is a lower bound (the hook-cost subtraction stopped at its floor:
    :func:`_bounds`); ``fwd_noisy`` and ``bwd_noisy`` flag a time whose spread exceeds half
    its median (:func:`is_noisy`) or that is a bound: both are marked ``~``.
    """
    calls: dict[str, list[int]] = {}
    for n in trace.nodes:
        if n.kind == "module":
            calls.setdefault(n.module or "", []).append(n.id)
    kids = trace.children
    subtree_params: dict[str, int] = {}
    for m in trace.modules:
        parts = m.path.split(".") if m.path else []
        for i in range(len(parts) + 1):
            key = ".".join(parts[:i])
            subtree_params[key] = subtree_params.get(key, 0) + m.params
    fwd_bound, bwd_bound = _bounds(trace)
    rows: list[dict[str, Any]] = []
    for m in trace.modules:
        ids = calls.get(m.path, [])
        nodes = [trace.nodes[i] for i in ids]
        child_fwd = sum(
            trace.nodes[c].fwd_time
            for i in ids
            for c in kids.get(i, ())
            if trace.nodes[c].kind == "module"
        )
        first = nodes[0] if nodes else None
        rows.append(
            {
                "path": m.path,
                "type": m.type,
                "depth": m.depth,
                "calls": len(ids),
                "params": subtree_params.get(m.path, 0),
                "params_self": m.params,
                "param_bytes": m.param_bytes,
                "trainable": m.trainable,
                "shared_params": m.shared_params,
                "fwd_time": sum(n.fwd_time for n in nodes),
                "fwd_self_time": max(0.0, sum(n.fwd_time for n in nodes) - child_fwd),
                "fwd_iqr": sum(n.fwd_iqr for n in nodes),
                "bwd_iqr": sum(n.bwd_iqr for n in nodes),
                "runs": max((n.runs for n in nodes), default=0),
                "bwd_time": sum(n.bwd_time for n in nodes),
                "bwd_self_time": sum(n.bwd_self_time for n in nodes),
                "flops_fwd": int(sum(trace.total(i, "flops_fwd") for i in ids)),
                "flops_bwd": int(sum(trace.total(i, "flops_bwd") for i in ids)),
                "flops_fwd_self": sum(n.flops_fwd for n in nodes),
                "flops_bwd_self": sum(n.flops_bwd for n in nodes),
                "activation_bytes": sum(n.activation_bytes for n in nodes),
                "saved_bytes": int(sum(trace.total(i, "saved_bytes") for i in ids)),
                "saved_bytes_self": sum(n.saved_bytes for n in nodes),
                "fwd_bound": any(i in fwd_bound for i in ids),
                "bwd_bound": any(i in bwd_bound for i in ids),
                "input_shapes": [list(t.shape) for t in first.inputs] if first else [],
                "output_shapes": [list(t.shape) for t in first.outputs] if first else [],
            }
        )
    for r in rows:
        r["fwd_noisy"] = is_noisy(r["fwd_time"], r["fwd_iqr"]) or r["fwd_bound"]
        r["bwd_noisy"] = is_noisy(r["bwd_time"], r["bwd_iqr"]) or r["bwd_bound"]
    return rows


def _bounds(trace: Trace) -> tuple[set[int], set[int]]:
    """Node ids whose forward, or inclusive backward, figure is a lower bound: the hook-cost
    subtraction was stopped at its floor (``TraceMeta.fwd_floored`` / ``bwd_floored``); a
    backward figure holds its children's, so a call above a floored one is a bound too."""
    fwd_keys, bwd_keys = set(trace.meta.fwd_floored), set(trace.meta.bwd_floored)
    if not fwd_keys and not bwd_keys:
        return set(), set()
    fwd = {n.id for n in trace.nodes if n.kind == "module" and n.key in fwd_keys}
    bwd: set[int] = set()
    for n in trace.nodes:
        if n.kind == "module" and n.key in bwd_keys:
            i: int | None = n.id
            while i is not None and i not in bwd:
                bwd.add(i)
                i = trace.nodes[i].parent
    return fwd, bwd


COLUMNS: dict[str, tuple[str, Any]] = {
    "type": ("Type", lambda r: r["type"]),
    "calls": ("Calls", lambda r: str(r["calls"])),
    "runs": ("Runs", lambda r: str(r["runs"])),
    "output": ("Output", lambda r: _shapes(r["output_shapes"])),
    "params": ("Params", lambda r: fmt_count(r["params"])),
    "flops_fwd": ("FLOPs fwd", lambda r: fmt_count(r["flops_fwd"])),
    "flops_bwd": ("FLOPs bwd", lambda r: fmt_count(r["flops_bwd"])),
    "fwd": ("Fwd", lambda r: _marked(r["fwd_time"], r["fwd_iqr"], r["fwd_bound"])),
    "fwd_iqr": ("Fwd IQR", lambda r: fmt_time(r["fwd_iqr"])),
    "fwd_self": ("Fwd self", lambda r: fmt_time(r["fwd_self_time"])),
    "bwd": ("Bwd", lambda r: _marked(r["bwd_time"], r["bwd_iqr"], r["bwd_bound"])),
    "bwd_iqr": ("Bwd IQR", lambda r: fmt_time(r["bwd_iqr"])),
    "bwd_self": ("Bwd self", lambda r: fmt_time(r["bwd_self_time"])),
    "act": ("Activations", lambda r: fmt_bytes(r["activation_bytes"])),
    "saved": ("Saved for bwd", lambda r: fmt_bytes(r["saved_bytes"])),
}
DEFAULT_COLUMNS = (
    "type",
    "calls",
    "output",
    "params",
    "flops_fwd",
    "flops_bwd",
    "fwd",
    "fwd_iqr",
    "bwd",
    "bwd_iqr",
    "act",
)
_TIMES = ("fwd", "fwd_iqr", "fwd_self", "bwd", "bwd_iqr", "bwd_self")
_NOISY_MARK = " ~"


def _timed(median: float, iqr: float) -> str:
    """A time, marked when it is noisy."""
    return fmt_time(median) + (_NOISY_MARK if is_noisy(median, iqr) else "")


def _marked(median: float, iqr: float, bound: bool) -> str:
    """A module row's time, marked when it is noisy or a lower bound."""
    return fmt_time(median) + (_NOISY_MARK if bound or is_noisy(median, iqr) else "")


def summarize(
    trace: Trace,
    depth: int | None = None,
    *,
    columns: Sequence[str] = DEFAULT_COLUMNS,
    rolled: bool = False,
) -> str:
    """A text table of modules down to ``depth`` (``None``: all), with a total line.

    Args:
        trace: The trace to summarize.
        depth: Deepest module level shown (0 is the root).
        columns: Any of ``COLUMNS``' keys, in display order.
        rolled: Merge identical repeated blocks into one ``x N`` row each.

    Returns:
        The table as text.
    """
    unknown = [c for c in columns if c not in COLUMNS]
    if unknown:
        raise ValueError(f"unknown summary columns {unknown}; choose from {list(COLUMNS)}")
    if trace.meta.runs > 1 and "calls" in columns and "runs" not in columns:
        i = list(columns).index("calls") + 1
        columns = (*columns[:i], "runs", *columns[i:])  # a merged trace says where nodes ran
    rows = module_rows(trace)
    if rolled:
        rows = _roll_rows(trace, rows)
    shown = [r for r in rows if depth is None or r["depth"] <= depth]
    header = ["Module", *(COLUMNS[c][0] for c in columns)]
    body = [[_label(r, trace), *(COLUMNS[c][1](r) for c in columns)] for r in shown]
    root = rows[0] if rows else None
    total = ["Total", *("" for _ in columns)]
    if root is not None:
        extra = {
            "params": fmt_count(trace.total_params),
            "flops_fwd": fmt_count(root["flops_fwd"] + trace.meta.outside_flops_fwd),
            "flops_bwd": fmt_count(root["flops_bwd"] + trace.meta.outside_flops_bwd),
            "fwd": _timed(trace.meta.forward_time, trace.meta.forward_iqr),
            "fwd_iqr": fmt_time(trace.meta.forward_iqr),
            "bwd": _timed(trace.meta.backward_time, trace.meta.backward_iqr),
            "bwd_iqr": fmt_time(trace.meta.backward_iqr),
        }
        total = ["Total", *(extra.get(c, "") for c in columns)]
    widths = [max(len(str(x)) for x in col) for col in zip(header, *body, total, strict=True)]
    sep = "  ".join("-" * w for w in widths)

    def line(cells: list[str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = [str(c).rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True)]
        return "  ".join([first, *rest]).rstrip()

    out = [line(header), sep, *(line(b) for b in body), sep, line(total)]
    trainable = sum(m.trainable for m in trace.modules)
    out.append(
        f"Params: {trace.total_params:,} ({trainable:,} trainable), "
        f"{fmt_bytes(sum(m.param_bytes for m in trace.modules))}; mode={trace.meta.mode}"
    )
    if trace.meta.runs > 1:
        out.append(
            f"Merged: {trace.meta.runs} runs; figures are per-run means; Runs = in how "
            "many runs the module ran"
        )
    if any(c in _TIMES for c in columns):
        out.append(f"Times: {trace.meta.timing or 'as recorded'} ({trace.meta.device})")
    if any(_NOISY_MARK in str(cell) for cell in [*(c for b in body for c in b), *total]):
        out.append(
            f"{_NOISY_MARK.strip()} noisy: the spread (IQR) over the timing passes is more than "
            "half the median; re-trace with more passes (repeat=) on a quieter machine"
            + (
                "; or a lower bound: labkit's hook-cost estimate would have taken it below "
                "the calls inside it or a tenth of what was measured (a busy machine)"
                if trace.meta.fwd_floored or trace.meta.bwd_floored
                else ""
            )
        )
    missing = no_formula_note(trace)
    if missing and any(c.startswith("flops") for c in columns):
        out.append(missing)
    return "\n".join(out)


def no_formula_note(trace: Trace) -> str:
    """The ops that computed without a FLOP formula, in one sentence (``""`` when none).

    Example:
        ``"FLOPs not counted (no formula): mylib.attn x12 in 'blocks.0' (31% of measured
        time); the FLOP figures cover the other ops"``
    """
    recs = trace.meta.no_flop_formula
    if not recs:
        return ""
    parts = []
    for r in recs:
        where = f" in '{r.get('module', '')}'" if r.get("module") else ""
        share = f" ({r['share']:.0%} of measured time)" if "share" in r else ""
        parts.append(f"{r.get('op', '?')} x{r.get('calls', 0)}{where}{share}")
    return (
        f"FLOPs not counted (no formula): {', '.join(parts)}; the FLOP figures cover the other ops"
    )


def _label(row: dict[str, Any], trace: Trace) -> str:
    name = row["path"].rsplit(".", 1)[-1] if row["path"] else trace.meta.model
    if row.get("rolled"):
        name = f"{row['rolled_name'].rsplit('.', 1)[-1]} x{row['rolled']}"
    return "  " * row["depth"] + name


def _shapes(shapes: list[list[int]]) -> str:
    if not shapes:
        return "-"
    return fmt_shape(shapes[0]) + (f" +{len(shapes) - 1}" if len(shapes) > 1 else "")


def _roll_rows(trace: Trace, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Sum the rows of each rolled block's modules into one row per relative path."""
    alias: dict[str, tuple[str, str, int]] = {}  # path -> (first block path, rolled name, n)
    for block in trace.rolled():
        paths = [trace.nodes[i].module or "" for i in block.node_ids]
        if len(set(paths)) != len(paths):
            continue  # one module called repeatedly: already a single row
        for p in paths:
            alias[p] = (paths[0], block.name, block.count)
    out: list[dict[str, Any]] = []
    merged: dict[str, dict[str, Any]] = {}
    for r in rows:
        head = next((p for p in alias if r["path"] == p or r["path"].startswith(p + ".")), None)
        if head is None:
            out.append(r)
            continue
        first, name, count = alias[head]
        key = first + r["path"][len(head) :]
        if key in merged:
            acc = merged[key]
            for k in (*_SUMMED, "params", "params_self"):
                acc[k] += r[k]
            for k in ("fwd_bound", "bwd_bound"):
                acc[k] = acc[k] or r[k]
            continue
        acc = dict(r, path=key)
        if r["path"] == head:
            acc.update(rolled=count, rolled_name=name)
        merged[key] = acc
        out.append(acc)
    return out


_TOP_KEYS = {
    "time": ("fwd_self_time", "bwd_self_time"),
    "fwd_time": ("fwd_self_time",),
    "bwd_time": ("bwd_self_time",),
    "flops": ("flops_fwd_self", "flops_bwd_self"),
    "params": ("params_self",),
    "memory": ("activation_bytes", "saved_bytes_self"),
}


def top(trace: Trace, n: int = 10, *, by: str = "time") -> list[dict[str, Any]]:
    """The ``n`` most expensive modules by a *self* figure (children excluded).

    ``by`` is one of ``"time"`` (forward + backward), ``"fwd_time"``, ``"bwd_time"``,
    ``"flops"``, ``"params"`` or ``"memory"`` (activations + bytes saved for backward).
    """
    if by not in _TOP_KEYS:
        raise ValueError(f"by must be one of {list(_TOP_KEYS)}, got {by!r}")
    keys = _TOP_KEYS[by]
    rows = [dict(r, value=sum(r[k] for k in keys)) for r in module_rows(trace)]
    rows = [r for r in rows if r["value"] > 0]
    rows.sort(key=lambda r: r["value"], reverse=True)
    return rows[:n]


def to_pandas(trace: Trace) -> Any:
    """The module rows as a ``pandas.DataFrame`` indexed by module path."""
    try:
        import pandas as pd
    except ImportError as e:
        raise ImportError("Trace.to_pandas needs pandas: pip install pandas") from e
    return pd.DataFrame(module_rows(trace)).set_index("path")
