"""labkit: a notebook-first research framework for PyTorch.

``import labkit`` is fast: torch and everything heavier load on first use of a name.

Example:
    >>> import labkit
    >>> t = labkit.trace(model, x)          # doctest: +SKIP
    >>> print(t.summary(depth=2))           # doctest: +SKIP
"""

from __future__ import annotations

import sys
import types

from labkit import _display
from labkit._lazy import callable_package, lazy_exports

__version__ = "0.1.0"

# public name -> module that defines it (imported on first access)
_LAZY = {
    "trace": "labkit.trace",
    "Trace": "labkit.trace",
    "Recorder": "labkit.trace",
    "TraceError": "labkit.trace",
    "TraceFileError": "labkit.trace",
    "diff": "labkit.trace",
    "memory": "labkit.memory",
    "MemoryReport": "labkit.memory",
    "MemoryRecordError": "labkit.memory",
    "find_growth": "labkit.memory",
    "plan": "labkit.plan",
    "Plan": "labkit.plan",
    "PlanError": "labkit.plan",
    "Recipe": "labkit.optimize",
    "compare": "labkit.optimize",
    "advise": "labkit.optimize",
    "tune": "labkit.optimize.tune",
    "Lab": "labkit.train",
    "runs": "labkit.train.run_table",
    "Runs": "labkit.train.run_table",
    "watch": "labkit.train.watching",
    "RunStopped": "labkit.train.run",
    "GAT": "labkit.gnn",
    "GATv2": "labkit.gnn",
    "show": "labkit.views.display",
}

__all__ = ["__version__", *_LAZY]

# a Trace's, MemoryReport's and Plan's show()/plot()/_repr_html_ find their views here: the
# first display imports labkit.views, which registers them (the data never imports views)
_display.add_provider("labkit.views")
# a full recording's memory timeline: labkit.memory's MemoryTracker (trace never imports memory)
_display.add_provider("labkit.memory.tracker", kinds=("trace.memory",))


# labkit.trace, labkit.memory and labkit.plan are callable packages; other names are attributes
_CALLABLE = ("trace", "memory", "plan")
__getattr__, __dir__ = lazy_exports(__name__, _LAZY, modules=_CALLABLE)


class _Package(types.ModuleType):
    """Whenever a callable package lands on ``labkit`` (first use, or any import of it or of
    a module inside it), it gets its function's signature and docstring."""

    def __setattr__(self, name: str, value: object) -> None:
        if name in _CALLABLE and isinstance(value, types.ModuleType):
            func = getattr(value, name, None)
            if callable(func) and not isinstance(func, types.ModuleType):
                callable_package(value, func)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
