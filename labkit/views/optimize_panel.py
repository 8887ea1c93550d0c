"""Moved to :mod:`labkit.panels.optimize_panel`; kept so ``from
labkit.views.optimize_panel import OptimizePanel`` in older notebooks still works."""

from __future__ import annotations

from labkit.panels.optimize_panel import OptimizePanel

__all__ = ["OptimizePanel"]
