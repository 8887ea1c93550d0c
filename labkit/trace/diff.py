"""``labkit.diff``: what changed between two traces, module by module."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from labkit._format import fmt_bytes, fmt_count, fmt_time
from labkit.trace.model import Trace
from labkit.trace.summary import module_rows

_FIGURES = ("fwd_time", "bwd_time", "flops_fwd", "flops_bwd", "activation_bytes",
            "saved_bytes", "params")  # fmt: skip


@dataclass(frozen=True)
class TraceDiff:
    """Per-module differences between trace ``a`` (before) and ``b`` (after).

    Args:
        rows: One record per module path: ``status`` (``"same"``, ``"changed"``,
            ``"added"``, ``"removed"``), ``type``, the before/after/delta of each
            figure, and ``shapes`` (``(before, after)`` output shapes when they differ).
        a_model: Model class of ``a``.
        b_model: Model class of ``b``.
    """

    rows: tuple[dict[str, Any], ...]
    a_model: str
    b_model: str

    def changed(self) -> list[dict[str, Any]]:
        """Rows whose status is not ``"same"``."""
        return [r for r in self.rows if r["status"] != "same"]

    def summary(self, *, min_rel: float = 0.0) -> str:
        """Text table of added, removed and changed modules (relative change >= ``min_rel``)."""
        lines = [f"diff {self.a_model} -> {self.b_model}"]
        for r in self.rows:
            if r["status"] == "same" and not _big(r, min_rel):
                continue
            parts = [f"{r['status']:8s} {r['path'] or '(root)'} ({r['type']})"]
            for f, fmt in (("fwd_time", fmt_time), ("bwd_time", fmt_time),
                           ("flops_fwd", fmt_count), ("activation_bytes", fmt_bytes),
                           ("params", fmt_count)):  # fmt: skip
                a, b = r[f]
                if a != b:
                    parts.append(f"{f} {fmt(a)} -> {fmt(b)}")
            if r["shapes"]:
                parts.append(f"output {r['shapes'][0]} -> {r['shapes'][1]}")
            lines.append("  ".join(parts))
        return "\n".join(lines)

    def to_pandas(self) -> Any:
        """Rows as a ``pandas.DataFrame`` with ``<figure>_a``, ``_b`` and ``_delta`` columns."""
        import pandas as pd

        flat = []
        for r in self.rows:
            rec = {"path": r["path"], "type": r["type"], "status": r["status"]}
            for f in _FIGURES:
                rec[f"{f}_a"], rec[f"{f}_b"] = r[f]
                rec[f"{f}_delta"] = r[f][1] - r[f][0]
            flat.append(rec)
        return pd.DataFrame(flat).set_index("path")

    def __repr__(self) -> str:
        counts: dict[str, int] = {}
        for r in self.rows:
            counts[r["status"]] = counts.get(r["status"], 0) + 1
        body = ", ".join(f"{k}={v}" for k, v in sorted(counts.items()))
        return f"TraceDiff({self.a_model} -> {self.b_model}: {body})"


def _big(row: dict[str, Any], min_rel: float) -> bool:
    if min_rel <= 0:
        return False
    for f in ("fwd_time", "bwd_time"):
        a, b = row[f]
        if a and abs(b - a) / a >= min_rel:
            return True
    return False


def diff(a: Trace, b: Trace) -> TraceDiff:
    """Compare two traces module by module ("what did this change / upgrade do").

    Structural changes (a module added or removed, different output shapes,
    parameters or FLOPs) mark a row ``"changed"``; timing differences alone do not,
    since time is noisy: read the ``fwd_time``/``bwd_time`` pairs for those.

    Example:
        >>> import torch, labkit
        >>> model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU())
        >>> before = labkit.trace(model, torch.randn(2, 4))
        >>> after = labkit.trace(model.append(torch.nn.Linear(8, 2)), torch.randn(2, 4))
        >>> d = diff(before, after)  # labkit.diff
        >>> [(r["path"], r["status"]) for r in d.rows]
        [('', 'changed'), ('0', 'same'), ('1', 'same'), ('2', 'added')]
        >>> d.rows[0]["params"]  # 4*8 + 8, then + 8*2 + 2
        (40, 58)
        >>> print(d.summary())                           # doctest: +SKIP
    """
    ra = {r["path"]: r for r in module_rows(a)}
    rb = {r["path"]: r for r in module_rows(b)}
    rows = []
    for path in [*ra, *(p for p in rb if p not in ra)]:
        x, y = ra.get(path), rb.get(path)
        row: dict[str, Any] = {"path": path, "type": (y or x)["type"]}  # type: ignore[index]  # one side has it
        for f in _FIGURES:
            row[f] = ((x or {}).get(f, 0), (y or {}).get(f, 0))
        sx = x["output_shapes"] if x else None
        sy = y["output_shapes"] if y else None
        row["shapes"] = (sx, sy) if x and y and sx != sy else None
        if x is None:
            row["status"] = "added"
        elif y is None:
            row["status"] = "removed"
        elif (
            row["shapes"]
            or x["type"] != y["type"]
            or any(
                row[f][0] != row[f][1]
                for f in ("flops_fwd", "flops_bwd", "params", "activation_bytes")
            )
        ):
            row["status"] = "changed"
        else:
            row["status"] = "same"
        rows.append(row)
    return TraceDiff(tuple(rows), a.meta.model, b.meta.model)
