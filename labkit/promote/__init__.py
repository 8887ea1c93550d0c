"""Notebook to script: :func:`promote` an exploration notebook into a standalone training
script, and :func:`run_notebook` a notebook headlessly with parameters.

Example:
    >>> from labkit.promote import promote, run_notebook, verify
    >>> promote("train.ipynb", "train.py").warnings                    # doctest: +SKIP
    >>> run_notebook("train.ipynb", parameters={"lr": 0.01})           # doctest: +SKIP
    >>> verify("train.ipynb", "train.py").summary()                    # doctest: +SKIP
    'identical (12 lines)'
"""

from __future__ import annotations

from labkit._lazy import lazy_exports

# public name -> module that defines it; loaded on first use so `labkit --help` stays fast
_LAZY = {
    "Analysis": "labkit.promote.analysis",
    "CellPlan": "labkit.promote.analysis",
    "Statement": "labkit.promote.analysis",
    "analyze": "labkit.promote.analysis",
    "strip_magics": "labkit.promote.analysis",
    "check": "labkit.promote.checks",
    "Problem": "labkit.promote.errors",
    "PromoteError": "labkit.promote.errors",
    "Cell": "labkit.promote.notebook",
    "Notebook": "labkit.promote.notebook",
    "NotebookError": "labkit.promote.notebook",
    "read_notebook": "labkit.promote.notebook",
    "Promoted": "labkit.promote.pipeline",
    "default_output": "labkit.promote.pipeline",
    "promote": "labkit.promote.pipeline",
    "RECIPE_MIME": "labkit.promote.recipe_record",
    "record_recipe": "labkit.promote.recipe_record",
    "recorded_recipe": "labkit.promote.recipe_record",
    "NotebookRunError": "labkit.promote.execute",
    "ParameterError": "labkit.promote.execute",
    "run_notebook": "labkit.promote.execute",
    "render_script": "labkit.promote.script",
    "render_plain_script": "labkit.promote.plain",
    "Report": "labkit.promote.report",
    "promotion_report": "labkit.promote.report",
    "Verification": "labkit.promote.verification",
    "verify": "labkit.promote.verification",
    "TargetExistsError": "labkit.promote.write",
    "write_atomic": "labkit.promote.write",
}

__all__ = sorted(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
