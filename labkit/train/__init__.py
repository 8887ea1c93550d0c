"""Training: :class:`Lab`, the LightningModule adapter, data helpers, guards, checkpoints, runs.

Lightning is imported when a name is first used: ``import labkit.train`` stays fast.

Example:
    >>> from labkit.train import Lab          # doctest: +SKIP
    >>> run = Lab(model, (train, val), loss=F.cross_entropy).fit(max_epochs=2)  # doctest: +SKIP
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "Lab": "labkit.train.lab",
    "fit_from_args": "labkit.train.lab",
    "Run": "labkit.train.run",
    "LabModule": "labkit.train.module",
    "as_datamodule": "labkit.train.data",
    "EpochShuffleSampler": "labkit.train.data",
    "ShapeCheckError": "labkit.train.guards",
    "NonFiniteError": "labkit.train.guards",
    "NonFiniteGuard": "labkit.train.guards",
    "DDPWorkerError": "labkit.train._launch",
    "save_checkpoint": "labkit.train.checkpoint",
    "load_checkpoint": "labkit.train.checkpoint",
    "CheckpointError": "labkit.train.checkpoint",
}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'labkit.train' has no attribute {name!r}")
    value = getattr(importlib.import_module(target), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
