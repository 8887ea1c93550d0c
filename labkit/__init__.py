"""labkit: a notebook-first research framework for PyTorch.

``import labkit`` is fast: torch and everything heavier load on first use of a name.

Example:
    >>> import labkit
    >>> t = labkit.trace(model, x)          # doctest: +SKIP
    >>> print(t.summary(depth=2))           # doctest: +SKIP
"""

from __future__ import annotations

from labkit._lazy import lazy_exports

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
    "Lab": "labkit.train",
    "runs": "labkit.train.runs",
    "Runs": "labkit.train.runs",
    "GAT": "labkit.gnn",
    "GATv2": "labkit.gnn",
}

__all__ = ["__version__", *_LAZY]


# labkit.trace, labkit.memory and labkit.plan are callable packages; other names are attributes
__getattr__, __dir__ = lazy_exports(__name__, _LAZY, modules=("trace", "memory", "plan"))
