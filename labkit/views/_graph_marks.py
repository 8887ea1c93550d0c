"""Graph-break marks for a GraphView: which module calls of a Trace broke compile's graph.

``labkit.compare`` with a compile recipe reports Dynamo's graph breaks, each with the
path of the module whose code broke the graph (:mod:`labkit.optimize._breaks`). Here
each break is mapped to every call of that module in a trace, as the ``marks`` a
GraphView draws: ``{trace node id: [text per break]}``. A call rolled into a repeated
block's first call is marked on the call that stands for it (the one drawn). The
browser lifts a mark on a hidden call onto the collapsed box that holds it
(``widgets/src/_graph_marks.js``).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping
from dataclasses import asdict, is_dataclass
from typing import TYPE_CHECKING, Any

from labkit.optimize import GraphBreak
from labkit.trace.graph import canonicalize

if TYPE_CHECKING:
    from labkit.trace.model import Trace

_FIELDS = ("reason", "module", "module_type", "source", "count", "modules")


def break_dicts(breaks: Any) -> list[dict[str, Any]]:
    """The graph breaks of a Comparison, a RecipeResult or a list of breaks, as dicts.

    Args:
        breaks: A :class:`~labkit.optimize.Comparison` (the breaks of every compiled
            row, each place once), one of its :class:`~labkit.optimize.RecipeResult`
            rows, or an iterable of break dicts / ``GraphBreak`` objects.

    Raises:
        ValueError: A comparison or row without a compiled recipe (nothing to mark), or
            a break without a ``module`` field.
    """
    if hasattr(breaks, "results"):  # a Comparison
        compiled = [r for r in breaks.results if r.graphs is not None]
        if not compiled:
            labels = [r.label for r in breaks.results]
            raise ValueError(
                f"no compiled recipe in this comparison (rows {labels}): graph breaks come "
                "from a compile recipe, e.g. labkit.compare(model, x, Recipe(compile='default'))"
            )
        items: Iterable[Any] = [b for r in compiled for b in r.graph_breaks]
    elif hasattr(breaks, "graph_breaks"):  # one RecipeResult
        if breaks.graphs is None:
            raise ValueError(
                f"recipe {breaks.label!r} was not compiled: it has no graph breaks to mark"
            )
        items = breaks.graph_breaks
    elif isinstance(breaks, Mapping):  # one break dict
        items = [breaks]
    else:
        items = breaks
    out: list[dict[str, Any]] = []
    seen: set[tuple[Any, ...]] = set()
    for b in items:
        d = asdict(b) if is_dataclass(b) and not isinstance(b, type) else dict(b)
        if "module" not in d:
            raise ValueError(f"a graph break needs a 'module' field (its module path), got {d}")
        d = {"reason": "graph break", "module_type": "", "source": "", "count": 1, **d}
        d["modules"] = tuple(d.get("modules") or ())
        key = tuple(d[f] for f in _FIELDS[:4])
        if key not in seen:  # the same place reported by several compiled rows
            seen.add(key)
            out.append({f: d[f] for f in _FIELDS})
    return out


def describe(b: Mapping[str, Any]) -> str:
    """One line: reason, module and source line (as ``GraphBreak.describe`` writes it)."""
    return GraphBreak(**{f: b[f] for f in _FIELDS}).describe()


def break_marks(
    trace: Trace, breaks: list[dict[str, Any]], *, rolled: bool = True
) -> dict[int, list[str]]:
    """``{trace node id: [text per break]}``: every call of each break's modules, marked.

    A break's ``modules`` are every module of the class whose code broke (each runs that
    code); a break without them marks its ``module``.

    A break whose module is unknown (Dynamo's stack left the model's classes) or has no
    call in ``trace`` is not marked; one warning names each such module path.

    Args:
        trace: The trace the GraphView shows.
        breaks: Break dicts (:func:`break_dicts`).
        rolled: Whether the view rolls repeated blocks (marks then land on the drawn call).
    """
    if not breaks:
        return {}
    calls: dict[str, list[int]] = {}
    for n in trace.nodes:
        if n.kind == "module" and n.module is not None:
            calls.setdefault(n.module, []).append(n.id)
    alias = canonicalize(trace, rolled=rolled).alias
    marks: dict[int, list[str]] = {}
    unplaced: list[str] = []
    for b in breaks:
        at = b["source"] or b["reason"]
        if b["module"] is None:
            unplaced.append(f"a break in no module of the model ({at})")
            continue
        paths = b["modules"] or (b["module"],)
        ran = [p for p in paths if p in calls]
        if not ran:
            unplaced.append(f"module {b['module']!r} has no call in this trace ({at})")
            continue
        text = describe(b)
        for nid in (nid for p in ran for nid in calls[p]):
            texts = marks.setdefault(alias[nid], [])
            if text not in texts:  # calls rolled into one drawn call: marked once
                texts.append(text)
    if unplaced:
        warnings.warn(
            f"{len(unplaced)} graph break(s) not marked on {trace.meta.model}'s graph: "
            f"{'; '.join(unplaced)}. Trace the model the comparison ran on (the module "
            "paths must match).",
            stacklevel=3,
        )
    return marks
