"""Moved to :mod:`labkit.panels.attention`; kept so ``from labkit.views.attention import
AttentionView`` in older notebooks still works."""

from __future__ import annotations

from labkit.panels.attention import AttentionView

__all__ = ["AttentionView"]
