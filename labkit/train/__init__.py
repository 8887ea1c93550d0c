"""Training: :class:`Lab`, the LightningModule adapter, data helpers, guards, checkpoints, runs.

Lightning is imported when a name is first used: ``import labkit.train`` stays fast.

Example:
    >>> from labkit.train import Lab          # doctest: +SKIP
    >>> run = Lab(model, (train, val), loss=F.cross_entropy).fit(max_epochs=2)  # doctest: +SKIP
"""

from __future__ import annotations

from labkit._lazy import lazy_exports

_LAZY = {
    "Lab": "labkit.train.lab",
    "fit_from_args": "labkit.train.lab",
    "FitOptions": "labkit.train.fit_options",
    "Run": "labkit.train.run",
    "RunFileError": "labkit.train.run",
    "RunStopped": "labkit.train.run",
    "RunClosedError": "labkit.train.run",
    "watch": "labkit.train.watching",
    "WatchOptions": "labkit.train.watching",
    "runs": "labkit.train.run_table",
    "Runs": "labkit.train.run_table",
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


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
