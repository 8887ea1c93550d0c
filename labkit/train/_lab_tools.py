"""A Lab's looking tools: one training step traced, and Lightning's learning-rate finder.

Both run the Lab's own step on its own data outside a fit and leave the model as it was.
``Lab.trace`` and ``Lab.lr_find`` call these functions; the Lab keeps the results
(``lab.traces``, ``lab.lr`` with ``apply=True``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from lightning.pytorch.tuner.lr_finder import _LRFinder

    from labkit.trace.model import Trace
    from labkit.train.lab import Lab


@contextlib.contextmanager
def _no_logging(module: object) -> Iterator[None]:
    """``module.log``/``log_dict`` as no-ops for a while: a ``training_step`` run outside a
    fit (Lab.trace) would raise in them (no Trainer, or a finished one's loop)."""
    saved: dict[str, Any] = {
        k: module.__dict__[k] for k in ("log", "log_dict") if k in module.__dict__
    }
    module.__dict__["log"] = module.__dict__["log_dict"] = lambda *a, **k: None
    try:
        yield
    finally:
        for k in ("log", "log_dict"):
            module.__dict__.pop(k, None)
        module.__dict__.update(saved)


def _step_loss(out: object) -> torch.Tensor:
    """The loss a LightningModule's ``training_step`` returned (a tensor or ``{"loss": ...}``)."""
    if isinstance(out, Mapping):
        out = out.get("loss")
    if not isinstance(out, torch.Tensor):
        raise TypeError(
            f"training_step returned {type(out).__name__}, not a loss tensor or a dict with "
            "'loss': Lab.trace traces the step that trains"
        )
    return out


def trace_step(lab: Lab, *, mode: str, warmup: int, repeat: int) -> Trace:
    """One training step of ``lab`` (forward, loss, backward) on its first batch, traced
    as :func:`labkit.trace` traces (see ``Lab.trace``)."""
    from labkit.trace.api import check_not_meta
    from labkit.trace.step import Step, record_step
    from labkit.train.module import default_step

    batch = lab._loaders.first_batch()
    check_not_meta("Lab.trace", lab.model, (batch,), {})  # nothing to time on meta
    if lab._is_lightning():  # the user's own training_step is the step
        module: Any = lab.model  # a LightningModule
        user_step = Step(
            module, (batch,), forward=lambda b: module.training_step(b, 0), loss=_step_loss
        )
        with _no_logging(module):  # self.log() outside a fit: nothing to log to
            return record_step(user_step, mode=mode, warmup=warmup, repeat=repeat)
    step = lab.step or default_step
    loss = lab._binding.plain_loss()
    model = lab.model
    user_step = Step(model, (batch,), forward=lambda b: step(model, b), loss=lambda out: loss(*out))
    return record_step(user_step, mode=mode, warmup=warmup, repeat=repeat)


def lr_find(
    lab: Lab, *, min_lr: float, max_lr: float, num_training: int, seed: int, **kwargs: Any
) -> _LRFinder | None:
    """Lightning's ``Tuner.lr_find`` on a copy of ``lab``'s module (see ``Lab.lr_find``).

    Returns:
        Lightning's ``_LRFinder``, or None when the sweep found nothing.
    """
    import lightning.pytorch as pl
    from lightning.pytorch.tuner.tuning import Tuner

    from labkit.train._callback import seed_all
    from labkit.train._lab_trainer import _PRECISION, _quiet_lightning

    module = lab.module()
    if not hasattr(module, "lr"):
        raise TypeError(
            "lr_find needs a module with an `lr` attribute; for your own "
            "LightningModule add self.lr and use it in "
            "configure_optimizers"
        )
    seed_all(seed)
    tmp = lab.logdir / "lr_find"
    with _quiet_lightning():
        # the sweep's Trainer needs no logger, checkpoint or progress bar; the tuner
        # stops it after num_training steps (max_epochs=-1: no epoch limit)
        trainer = pl.Trainer(
            accelerator="auto",
            devices=1,
            logger=False,
            max_epochs=-1,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            default_root_dir=str(tmp),
            precision=_PRECISION[lab.recipe.precision],
        )
        return Tuner(trainer).lr_find(
            module,
            datamodule=lab.datamodule(seed),
            min_lr=min_lr,
            max_lr=max_lr,
            num_training=num_training,
            update_attr=False,
            **kwargs,
        )
