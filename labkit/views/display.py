"""The views' side of displaying plain data: ``labkit.show(x)`` and the registrations.

Importing :mod:`labkit.views` calls :func:`install`: the data classes' ``show()``,
``plot()`` and ``_repr_html_`` then reach these functions through ``labkit._display``, and a
running IPython shows a Trace as its picture (``image/png``: the graph, the memory timeline
under it) and its repr, with no ``text/html`` (which an HTML sanitizer would turn into
visible source). The data classes import nothing from here.

Example:
    >>> import labkit
    >>> view = labkit.show(labkit.trace(model, x))  # doctest: +SKIP
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from labkit import _display

if TYPE_CHECKING:
    from labkit.memory.attribution import MemoryReport
    from labkit.plan.model import Plan
    from labkit.trace.model import Trace
    from labkit.train.run_table import Runs
    from labkit.views.dashboard import Dashboard
    from labkit.views.runs import RunsView
    from labkit.views.show import TraceView


def show_trace(trace: Trace, **kwargs: Any) -> TraceView:
    """Graph, profile and memory views of ``trace`` in linked tabs (:class:`TraceView`)."""
    from labkit.views.show import TraceView

    return TraceView(trace, **kwargs)


def show_memory(report: MemoryReport, **kwargs: Any) -> TraceView:
    """A measured step's views, opened on the timeline and coloured by activation memory."""
    view = show_trace(report.trace, **{"metric": "activations", **kwargs})
    view.selected_index = 2
    return view


def show_plan(plan: Plan, **kwargs: Any) -> TraceView:
    """A plan's views, coloured by FLOPs, each tab titled "(predicted)"."""
    view = show_trace(plan.trace, **{"metric": "flops", **kwargs})
    view.titles = tuple(f"{t} (predicted)" for t in view.titles)
    return view


def show_runs(
    rs: Runs,
    *,
    metrics: Sequence[str] | None = None,
    runs: Sequence[str] | None = None,
    x: str = "step",
    **kwargs: Any,
) -> RunsView:
    """Chosen metrics of chosen runs overlaid, and a table of runs (:class:`RunsView`)."""
    from labkit.views.runs import RunsView

    return RunsView(rs, metrics=metrics, runs_shown=runs, x=x, **kwargs)


def dashboard(**kwargs: Any) -> Dashboard:
    """``Lab.fit``'s live view (:class:`~labkit.views.dashboard.Dashboard`)."""
    from labkit.views.dashboard import Dashboard

    return Dashboard(**kwargs)


def plot_trace(trace: Trace, view: str = "graph", **kwargs: Any) -> bytes:
    """A static PNG of ``"graph"``, ``"profile"`` or ``"memory"`` (matplotlib)."""
    from labkit.views import _static

    draw: dict[str, Callable[..., bytes]] = {
        "graph": _static.graph_png,
        "profile": _static.profile_png,
    }
    draw["memory"] = _static.memory_png
    if view not in draw:
        raise ValueError(f"view must be one of {list(draw)}, got {view!r}")
    return draw[view](trace, **kwargs)


def trace_html(trace: Trace) -> str:
    """A Trace's static HTML (``Trace._repr_html_``: graph and memory pictures inline)."""
    from labkit.views._static import trace_html as html

    return html(trace)


def trace_png(trace: Trace) -> tuple[bytes, dict[str, int]]:
    """What IPython shows for a Trace: its graph with the memory timeline under it, one PNG
    drawn at 2x, and the width to show it at."""
    import base64

    from labkit.views._keep import png_width
    from labkit.views._static import trace_picture

    png = base64.b64decode(trace_picture(trace)["image/png"])
    return png, {"width": png_width(png) // 2}


def _no_html(trace: Trace) -> None:
    """IPython's ``text/html`` of a Trace: none (its picture is ``image/png``)."""
    return None


def show(x: Any, **kwargs: Any) -> TraceView:
    """Open the views of a Trace, a MemoryReport (:func:`labkit.memory`) or a Plan.

    Args:
        x: What to show.
        **kwargs: Passed on to :class:`TraceView` (``metric``, ``depth``, ...).

    Returns:
        The linked graph / profile / memory tabs.

    Raises:
        TypeError: ``x`` is none of these.

    Example:
        >>> labkit.show(labkit.plan(model, x))  # doctest: +SKIP
    """
    from labkit.memory.attribution import MemoryReport
    from labkit.plan.model import Plan
    from labkit.trace.model import Trace

    if isinstance(x, Plan):
        return show_plan(x, **kwargs)
    if isinstance(x, MemoryReport):
        return show_memory(x, **kwargs)
    if isinstance(x, Trace):
        return show_trace(x, **kwargs)
    raise TypeError(
        "labkit.show(x) shows a Trace (labkit.trace), a MemoryReport (labkit.memory) or a "
        f"Plan (labkit.plan), got {type(x).__name__}"
    )


def _show_diff(d: Any, metric: str = "time", **kwargs: Any) -> Any:
    from labkit.views.diff import show_diff

    return show_diff(d, metric, **kwargs)


def install(formatter: Any = None) -> None:
    """Register the displays with ``labkit._display`` and with IPython's formatters.

    Args:
        formatter: An IPython ``DisplayFormatter`` (default: the running shell's, if any).
    """
    _display.register("trace.show", show_trace)
    _display.register("trace.plot", plot_trace)
    _display.register("trace.html", trace_html)
    _display.register("memory.show", show_memory)
    _display.register("plan.show", show_plan)
    _display.register("runs.show", show_runs)
    _display.register("train.dashboard", dashboard)
    _display.register("diff.show", _show_diff)
    if formatter is None and "IPython" in sys.modules:
        shell = sys.modules["IPython"].get_ipython()
        formatter = getattr(shell, "display_formatter", None)
    if formatter is not None:  # a Plan's .trace too
        formatter.formatters["image/png"].for_type_by_name("labkit.trace.model", "Trace", trace_png)
        formatter.formatters["text/html"].for_type_by_name("labkit.trace.model", "Trace", _no_html)
