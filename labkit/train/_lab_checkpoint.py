"""A Lab's checkpoints and resume: which checkpoint a fit starts from, checked before any
file is written, and loading one back into ``lab.model``.

:class:`LabCheckpoints` is one of the parts :class:`~labkit.train.Lab` delegates to (as
Lightning's ``Trainer`` delegates to its ``_CheckpointConnector``); it keeps no state of
its own. The checks themselves are :mod:`labkit.train._resume`'s.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from labkit.train.fit_options import FitOptions

if TYPE_CHECKING:
    import lightning.pytorch as pl

    from labkit.train import _launch
    from labkit.train.lab import Lab


def is_last(o: FitOptions) -> bool:
    """Whether ``ckpt_path="last"``: labkit's own last checkpoint (as ``resume=True``)."""
    return o.ckpt_path is not None and str(o.ckpt_path) == "last"


class LabCheckpoints:
    """The checkpoint side of a :class:`~labkit.train.Lab` (see the module docstring).

    Args:
        lab: The Lab whose model the checkpoints hold.
    """

    def __init__(self, lab: Lab) -> None:
        self.lab = lab

    @staticmethod
    def resolve(o: FitOptions, logdir: Path) -> tuple[str | None, bool]:
        """``(checkpoint to start from or None, whether the fit resumes)``.

        ``ckpt_path="last"`` is labkit's own last checkpoint (Lightning's ``"last"`` looks
        for its ModelCheckpoint, which Lab does not use): the same as ``resume=True``.
        """
        from labkit.train.checkpoint import CHECKPOINTS, LAST

        last = logdir / CHECKPOINTS / LAST
        resume = o.resume or is_last(o)
        ckpt: str | None = str(o.ckpt_path) if o.ckpt_path and not is_last(o) else None
        if ckpt is None and resume and last.exists():
            ckpt = str(last)
        return ckpt, resume

    def preflight(
        self, plan: _launch.Plan, o: FitOptions, ckpt: str | None
    ) -> tuple[pl.LightningModule | None, list[str]]:
        """The module to train, its optimizer checked, and the checkpoint checked against both.

        Runs before any file is written. Returns the module (``None`` for a subprocess
        launch, which builds its own) and notes for the Run.
        """
        from labkit.train import _resume

        lab = self.lab
        if plan.mode == "subprocess":
            if ckpt is not None:  # the weights, at least, are checked here
                _resume.load_for_resume(ckpt)
            return None, []
        module: Any = lab.module(copy=False)  # LabModule: its optimizer is checked too
        optimizer = module.prepare_optimizer() if hasattr(module, "prepare_optimizer") else None
        if ckpt is None:
            return module, []
        ck = _resume.load_for_resume(ckpt)
        path = Path(ckpt)
        _resume.check_weights(ck, module.state_dict(), path, strict_names=lab.recipe.is_default)
        if optimizer is None:
            return module, []
        _resume.check_optimizer(ck, optimizer, path)
        diff = _resume.changes(
            ck, lr=lab.lr if lab._binding.builds_lr() else None, recipe=lab.recipe.to_dict()
        )
        return module, _resume.apply_rule(diff, o.on_change, path, module)

    def load(self, path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
        """Load a checkpoint's weights into ``lab.model`` (default: the last one); returns it."""
        from labkit.train._lab_optim import is_lightning
        from labkit.train.checkpoint import CHECKPOINTS, LAST, load_checkpoint

        lab = self.lab
        p = Path(path) if path else lab.logdir / CHECKPOINTS / LAST
        ckpt: dict[str, Any] = load_checkpoint(p)
        state = ckpt["state_dict"]
        if not is_lightning(lab.model):
            state = {k.removeprefix("net."): v for k, v in state.items()}
        lab.model.load_state_dict(state)
        return ckpt
