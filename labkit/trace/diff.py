"""``labkit.diff``: what changed between two traces, module by module."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from labkit._format import fmt_bytes, fmt_count, fmt_time
from labkit.trace._explain_match import Match, match_modules
from labkit.trace.model import Trace
from labkit.trace.summary import module_rows

if TYPE_CHECKING:
    from labkit.trace.explain import Explanation

_FIGURES = (
    "fwd_time",
    "bwd_time",
    "flops_fwd",
    "flops_bwd",
    "activation_bytes",
    "saved_bytes",
    "params",
)


@dataclass(frozen=True)
class TraceDiff:
    """Per-module differences between trace ``a`` (before) and ``b`` (after), or between a
    base trace and several others.

    Args:
        rows: One record per module: ``path`` (the base's; the other trace's when added),
            ``status`` (``"same"``, ``"changed"``, ``"added"``, ``"removed"``), ``type``,
            ``match`` (how it was matched: ``"path"``, a wrapper, ``"structure: ..."``),
            ``paths`` (its path in each trace, ``None`` where absent), each figure as a tuple
            with one value per trace (before, after for two), and ``shapes`` (output shapes
            per trace when they differ).
        a_model: Model class of the base trace.
        b_model: Model class of the (first) other trace.
        traces: The traces, in the order given.
        labels: A name per trace (``"a"``, ``"b"``, ``"c"``... unless named).
        base: Index of the base trace.
    """

    rows: tuple[dict[str, Any], ...]
    a_model: str
    b_model: str
    traces: tuple[Trace, ...] = field(default=(), repr=False, compare=False)
    labels: tuple[str, ...] = ("a", "b")
    base: int = 0
    matches: tuple[tuple[Match, ...], ...] = field(default=(), repr=False, compare=False)

    def explain(
        self,
        metric: str = "time",
        *,
        against: int | str | None = None,
        depth: int | None = None,
        level: float = 0.95,
        seed: int = 0,
    ) -> Explanation:
        """Rank the modules by how much of the change in ``metric`` they explain.

        Args:
            metric: ``"time"`` (forward + backward self time, with 95% intervals from the
                traces' timing passes), ``"memory"``, ``"flops"`` or ``"params"``.
            against: The trace compared with the base (index or label); default the first
                other trace.
            depth: Fold modules below this depth into their ancestor at it (``None``: every
                module on its own).
            level: Confidence level of the time intervals.
            seed: Seed of the bootstrap's own random generator.

        Returns:
            An :class:`~labkit.trace.explain.Explanation`: ``.headline``, ``.summary()``,
            ``.table(page=)``, ``.rows``.

        Example:
            >>> import torch, labkit
            >>> t = labkit.trace(torch.nn.Linear(4, 8), torch.randn(2, 4))
            >>> diff(t, t).explain("flops").headline
            'FLOPs: no change (256 FLOP in both)'
        """
        from labkit.trace.explain import explain_pair

        if not self.traces:
            raise ValueError(
                "this TraceDiff holds no traces (built by hand): use labkit.diff(a, b)"
            )
        other = self._index(against)
        if other == self.base:
            raise ValueError(f"against={against!r} is the base trace; name another one")
        k = other if other < self.base else other - 1
        return explain_pair(
            self.traces[self.base],
            self.traces[other],
            list(self.matches[k]),
            metric,
            labels=(self.labels[self.base], self.labels[other]),
            depth=depth,
            level=level,
            seed=seed,
        )

    def explain_all(self, metric: str = "time", **kwargs: Any) -> list[Explanation]:
        """:meth:`explain` against every trace but the base, in order."""
        return [
            self.explain(metric, against=i, **kwargs)
            for i in range(len(self.traces))
            if i != self.base
        ]

    def table(
        self, metric: str = "time", *, page: int = 1, per_page: int = 25, depth: int | None = None
    ) -> str:
        """A text table with a column group per trace: each module's figure and its change
        from the base (time: with its interval), ranked by the largest change."""
        from labkit.trace.explain import formatter

        exps = self.explain_all(metric, depth=depth)
        f = formatter(metric)
        order: list[str] = []
        for e in exps:
            order += [r.module for r in e.rows if r.module not in order]
        by = [{r.module: r for r in e.rows} for e in exps]
        size = {m: max(abs(b[m].delta) for b in by if m in b) for m in order}
        order.sort(key=lambda m: -size[m])
        pages = max(1, -(-len(order) // per_page))
        if not 1 <= page <= pages:
            raise ValueError(f"page must be 1..{pages} ({len(order)} rows, {per_page} a page)")
        base = self.labels[self.base]
        others = [lb for i, lb in enumerate(self.labels) if i != self.base]
        head = ["module", base, *(c for lb in others for c in (lb, f"{lb} delta", f"{lb} 95%"))]
        body = []
        for m in order[(page - 1) * per_page : page * per_page]:
            first = next(b[m] for b in by if m in b)
            cells = [m or "(root)", f(first.a)]
            for b in by:
                r = b.get(m)
                if r is None:
                    cells += ["", "", ""]
                    continue
                iv = "" if r.low is None else f"{f(r.low)} to {f(r.high or 0.0)}"
                cells += [
                    f(r.b),
                    ("+" if r.delta > 0 else "") + f(r.delta),
                    iv + (" ~" if r.within_noise else ""),
                ]
            body.append(cells)
        widths = [max(len(x) for x in col) for col in zip(head, *body, strict=True)]
        line = lambda c: "  ".join(x.ljust(w) for x, w in zip(c, widths, strict=True)).rstrip()  # noqa: E731
        heads = [e.headline for e in exps]
        return "\n".join(
            [
                *(f"{lb}: {h}" for lb, h in zip(others, heads, strict=True)),
                line(head),
                line(["-" * w for w in widths]),
                *map(line, body),
                f"page {page} of {pages} ({len(order)} rows; ~ within noise)",
            ]
        )

    def show(self, metric: str = "time", *, against: int | str | None = None) -> Any:
        """The live diff view (``labkit.views.diff.DiffView``, registered by ``labkit.views``):
        the base trace's graph coloured by each module's change (diverging scale, legend,
        within-noise hatched), the ranked table linked to it and a toggle between metrics;
        its kept picture (PNG and the table as text) survives without a kernel."""
        from labkit import _display

        return _display.display("diff.show", self, metric, against=against)

    def _index(self, which: int | str | None) -> int:
        if which is None:
            return 1 if self.base == 0 else 0
        if isinstance(which, str):
            if which not in self.labels:
                raise ValueError(f"no trace labelled {which!r}; labels are {list(self.labels)}")
            return self.labels.index(which)
        if not -len(self.traces) <= which < len(self.traces):
            raise ValueError(f"trace index {which} is out of range (0..{len(self.traces) - 1})")
        return which % len(self.traces)

    def changed(self) -> list[dict[str, Any]]:
        """Rows whose status is not ``"same"``."""
        return [r for r in self.rows if r["status"] != "same"]

    def summary(self, *, min_rel: float = 0.0) -> str:
        """Text table of added, removed and changed modules (relative change >= ``min_rel``)."""
        models = [t.meta.model for t in self.traces] or [self.a_model, self.b_model]
        lines = [f"diff {' -> '.join(models)}"]
        for r in self.rows:
            if r["status"] == "same" and not _big(r, min_rel):
                continue
            parts = [f"{r['status']:8s} {r['path'] or '(root)'} ({r['type']})"]
            for f, fmt in (
                ("fwd_time", fmt_time),
                ("bwd_time", fmt_time),
                ("flops_fwd", fmt_count),
                ("activation_bytes", fmt_bytes),
                ("params", fmt_count),
            ):
                if len(set(r[f])) > 1:
                    parts.append(f"{f} " + " -> ".join(fmt(v) for v in r[f]))
            if r["shapes"]:
                parts.append("output " + " -> ".join(str(s) for s in r["shapes"]))
            lines.append("  ".join(parts))
        return "\n".join(lines)

    def to_pandas(self) -> Any:
        """Rows as a ``pandas.DataFrame`` with a ``<figure>_<label>`` column per trace and
        ``<figure>_delta`` (two traces) or ``<figure>_delta_<label>`` (more) against the base."""
        import pandas as pd

        flat = []
        for r in self.rows:
            rec = {"path": r["path"], "type": r["type"], "status": r["status"]}
            for f in _FIGURES:
                vals = r[f]
                for i, lb in enumerate(self.labels[: len(vals)]):
                    rec[f"{f}_{lb}"] = vals[i]
                for i, lb in enumerate(self.labels[: len(vals)]):
                    if i != self.base:
                        name = f"{f}_delta" if len(vals) == 2 else f"{f}_delta_{lb}"
                        rec[name] = vals[i] - vals[self.base]
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
        a, *rest = row[f]
        if a and any(abs(b - a) / a >= min_rel for b in rest):
            return True
    return False


def diff(*traces: Trace, base: int | str = 0, labels: tuple[str, ...] | None = None) -> TraceDiff:
    """Compare traces module by module ("what did this change / upgrade do").

    Modules match by path, else through a wrapper (``module.`` of DDP, ``_orig_mod.`` of
    ``torch.compile``) or by structure and type; each row says which rule matched it.
    Structural changes (a module added or removed, different output shapes, parameters or
    FLOPs) mark a row ``"changed"``; timing differences alone do not, since time is noisy:
    :meth:`TraceDiff.explain` ranks them with intervals.

    Args:
        *traces: Two or more traces; figures are compared with the base's.
        base: The base trace (index or label; default the first).
        labels: A name per trace (default ``"a"``, ``"b"``, ``"c"``...).

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
    if len(traces) < 2:
        raise ValueError(f"labkit.diff needs two or more traces, got {len(traces)}")
    for i, t in enumerate(traces):
        if not isinstance(t, Trace):
            raise TypeError(
                f"labkit.diff: argument {i} is a {type(t).__name__}, not a Trace "
                "(labkit.trace(...), Trace.load(path), or a Plan's .trace)"
            )
    names = labels or tuple(
        "abcdefghijklmnopqrstuvwxyz"[i] if i < 26 else f"t{i}" for i in range(len(traces))
    )
    if len(names) != len(traces) or len(set(names)) != len(names):
        raise ValueError(f"labels must be {len(traces)} distinct names, got {labels!r}")
    if isinstance(base, str):
        if base not in names:
            raise ValueError(f"base={base!r} is not one of the labels {list(names)}")
        base = names.index(base)
    if not 0 <= base < len(traces):
        raise ValueError(f"base={base} is out of range (0..{len(traces) - 1})")
    bt = traces[base]
    others = [i for i in range(len(traces)) if i != base]
    mods = [[(m.path, m.type) for m in t.modules] for t in traces]
    matches = [match_modules(mods[base], mods[i]) for i in others]
    recs = [{r["path"]: r for r in module_rows(t)} for t in traces]
    keyed, rules = _keyed(matches, others, base, len(traces))
    rows = []
    for key, paths in keyed.items():
        have = [recs[i].get(p) if p is not None else None for i, p in enumerate(paths)]
        first = next(h for h in have if h is not None)
        row: dict[str, Any] = {
            "path": first["path"] if paths[base] is None else paths[base],
            "type": (have[others[0]] or first)["type"] if len(traces) == 2 else first["type"],
            "match": rules[key],
            "paths": tuple(paths),
        }
        for f in _FIGURES:
            row[f] = tuple((h or {}).get(f, 0) for h in have)
        shapes = tuple(h["output_shapes"] if h else None for h in have)
        row["shapes"] = shapes if all(have) and len({str(s) for s in shapes}) > 1 else None
        if have[base] is None:
            row["status"] = "added"
        elif any(h is None for h in have):
            row["status"] = "removed"
        elif (
            row["shapes"]
            or len({h["type"] for h in have if h}) > 1
            or any(
                len(set(row[f])) > 1
                for f in ("flops_fwd", "flops_bwd", "params", "activation_bytes")
            )
        ):
            row["status"] = "changed"
        else:
            row["status"] = "same"
        rows.append(row)
    return TraceDiff(
        tuple(rows),
        bt.meta.model,
        traces[others[0]].meta.model,
        tuple(traces),
        tuple(names),
        base,
        tuple(tuple(m) for m in matches),
    )


def _keyed(
    matches: list[list[Match]], others: list[int], base: int, n: int
) -> tuple[dict[str, list[str | None]], dict[str, str]]:
    """Each row's path in every trace (the base's modules, then added ones) and its rule."""
    keyed: dict[str, list[str | None]] = {}
    rules: dict[str, str] = {}
    for k, ms in enumerate(matches):
        for m in ms:
            key = m.a if m.a is not None else f"+{others[k]}:{m.b}"
            paths = keyed.setdefault(key, [None] * n)
            paths[base] = m.a
            paths[others[k]] = m.b
            if key not in rules or rules[key] == "path":
                rules[key] = m.rule
    return keyed, rules
