"""Achieved FLOP/s and model FLOPs utilization (MFU): ``labkit.tune``'s names for the one
definition in :mod:`labkit._utilization` (``compare`` rows and ``Lab.fit``'s summary use it
too)."""

from __future__ import annotations

from labkit._utilization import PEAKS, dtype_of, peak, utilization

__all__ = ["PEAKS", "dtype_of", "peak", "utilization"]
