"""A checkpoint checked against the fit that resumes from it, before any step runs.

``Lab.fit(resume=True)`` / ``ckpt_path=...`` loads the checkpoint here first (weights only,
see :func:`labkit.train.checkpoint.load_checkpoint`) and compares it with what the fit is
about to train, so that a wrong checkpoint is named with the fix instead of failing inside
Lightning (or, worse, training with silently replaced settings):

- **weights**: every parameter and buffer of the model is in the checkpoint with the same
  shape (a ``Linear(4, 1)`` checkpoint resumed into ``Linear(4, 3)`` names ``fc.weight``,
  both shapes and the file);
- **optimizer type**: the checkpoint's optimizer state must fit the fit's optimizer class
  (``Adam`` state in an ``SGD`` run is named with both types and the file);
- **learning rate and Recipe**: what the Lab holds now and what the checkpoint was trained
  with may differ. The rule (``FitOptions.on_change``): ``"refuse"`` (the default) names
  each difference and stops; ``"keep"`` continues with the checkpoint's settings (the
  Lab's lr and Recipe are ignored for this run, and a note says so); ``"apply"`` continues
  with the Lab's lr (written into the restored optimizer) and Recipe, with a note.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from labkit.train.checkpoint import CheckpointError, load_checkpoint

if TYPE_CHECKING:
    from labkit.train.module import LabModule

ON_CHANGE = ("refuse", "keep", "apply")


class ResumeError(CheckpointError):
    """The checkpoint does not fit the fit resuming from it; names the file and the field."""


def check_weights(
    ckpt: Mapping[str, Any],
    expected: Mapping[str, torch.Tensor],
    path: Path,
    *,
    strict_names: bool = True,
) -> None:
    """Refuse a checkpoint whose ``state_dict`` does not fit ``expected`` (names and shapes).

    Args:
        ckpt: The loaded checkpoint.
        expected: The state dict the fit trains (the LightningModule's keys).
        path: The checkpoint file, for the message.
        strict_names: Also refuse missing or unexpected names (off when a Recipe renames
            parameters, e.g. quantization).

    Raises:
        ResumeError: naming the file, the parameter and both shapes.
    """
    state = ckpt.get("state_dict")
    if not isinstance(state, Mapping):
        raise ResumeError(
            f"the checkpoint {path} has no state_dict: it was not written by Lightning or labkit"
        )
    wrong = [
        (k, tuple(state[k].shape), tuple(v.shape))
        for k, v in expected.items()
        if k in state
        and isinstance(state[k], torch.Tensor)
        and tuple(state[k].shape) != tuple(v.shape)
    ]
    if wrong:
        rows = "; ".join(
            f"{_name(k)}: checkpoint {list(a)}, model {list(b)}" for k, a, b in wrong[:5]
        )
        more = f" (and {len(wrong) - 5} more)" if len(wrong) > 5 else ""
        raise ResumeError(
            f"the checkpoint {path} does not fit the model: {rows}{more}. It was saved from a "
            "model of another shape: resume with the model it was trained with, or start "
            "fresh (resume=False, or another logdir)"
        )
    if not strict_names:
        return
    missing = [k for k in expected if k not in state]
    extra = [k for k in state if k not in expected]
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"the model's {_names(missing)} missing from it")
        if extra:
            parts.append(f"it holds {_names(extra)} the model does not have")
        raise ResumeError(
            f"the checkpoint {path} does not fit the model: {' and '.join(parts)}; "
            "resume with the model it was trained with, or start fresh"
        )


def _name(key: str) -> str:
    return key.removeprefix("net.")


def _names(keys: list[str]) -> str:
    shown = ", ".join(_name(k) for k in keys[:5])
    return shown + (f" (and {len(keys) - 5} more)" if len(keys) > 5 else "")


def check_optimizer(ckpt: Mapping[str, Any], optimizer: torch.optim.Optimizer, path: Path) -> None:
    """Refuse optimizer state that another optimizer type wrote (``Adam`` state into ``SGD``).

    The type is read from the checkpoint's ``labkit.optimizer`` record when present, else
    recognised from the state's keys (``exp_avg`` is Adam's, ``momentum_buffer`` SGD's, ...).

    Raises:
        ResumeError: naming both types and the file.
    """
    states = ckpt.get("optimizer_states") or []
    if not states:
        return
    saved = (ckpt.get("labkit") or {}).get("optimizer")
    ours = type(optimizer).__name__
    theirs = saved.get("type") if isinstance(saved, Mapping) else _guess(states[0])
    if theirs is not None and theirs != ours:
        raise ResumeError(
            f"the checkpoint {path} holds the state of a {theirs} optimizer, and this fit "
            f"uses {ours}: a {ours} cannot continue from {theirs}'s state. Resume with "
            f"optimizer={theirs!r}, or start fresh (resume=False, or another logdir)"
        )
    groups = states[0].get("param_groups") or []
    sizes = [len(g.get("params", [])) for g in groups]
    ours_sizes = [len(g["params"]) for g in optimizer.param_groups]
    if sizes and sizes != ours_sizes:
        raise ResumeError(
            f"the checkpoint {path} holds {len(sizes)} optimizer param group(s) of "
            f"{sizes} parameters, and this fit's {ours} has {len(ours_sizes)} of {ours_sizes}; "
            "resume with the optimizer it was trained with, or start fresh"
        )


_STATE_KEYS = {
    "exp_avg_sq": "Adam",  # Adam and AdamW write the same keys: told apart by the record
    "momentum_buffer": "SGD",
    "square_avg": "RMSprop",
    "sum": "Adagrad",
}


def _guess(state: Mapping[str, Any]) -> str | None:
    per_param = state.get("state") or {}
    first = next(iter(per_param.values()), None) if isinstance(per_param, Mapping) else None
    if not isinstance(first, Mapping):
        return None
    for key, name in _STATE_KEYS.items():
        if key in first:
            return None if name == "Adam" else name  # Adam vs AdamW: cannot tell
    return None


def optimizer_record(optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """What a checkpoint keeps of the optimizer: its type and each group's lr."""
    return {
        "type": type(optimizer).__name__,
        "lr": [float(g.get("lr", float("nan"))) for g in optimizer.param_groups],
    }


def changes(
    ckpt: Mapping[str, Any], *, lr: float | None, recipe: Mapping[str, Any] | None
) -> list[str]:
    """What differs between the Lab now and the checkpoint, one sentence each.

    Args:
        ckpt: The loaded checkpoint.
        lr: The Lab's learning rate (``None``: not the Lab's to set).
        recipe: The Lab's Recipe as a dict.
    """
    record = ckpt.get("labkit") or {}
    out = []
    saved = record.get("optimizer") if isinstance(record.get("optimizer"), Mapping) else None
    if lr is not None:
        old = _saved_lr(ckpt, saved)
        if old is not None and not math.isclose(old, lr, rel_tol=1e-12, abs_tol=0.0):
            out.append(f"lr: checkpoint {old:g}, Lab {lr:g}")
    old_recipe = record.get("recipe")
    if recipe is not None and isinstance(old_recipe, Mapping) and dict(old_recipe) != dict(recipe):
        keys = sorted(set(old_recipe) | set(recipe))
        diff = [
            f"{k} {old_recipe.get(k)!r} -> {recipe.get(k)!r}"
            for k in keys
            if old_recipe.get(k) != recipe.get(k)
        ]
        out.append("Recipe: " + ", ".join(diff))
    return out


def _saved_lr(ckpt: Mapping[str, Any], saved: Mapping[str, Any] | None) -> float | None:
    if saved is not None and saved.get("lr"):
        return float(saved["lr"][0])
    states = ckpt.get("optimizer_states") or []
    groups = states[0].get("param_groups") if states else None
    if groups and "initial_lr" not in groups[0] and "lr" in groups[0]:
        return float(groups[0]["lr"])  # a scheduler changes lr: compare only without one
    return None


def apply_rule(diff: list[str], rule: str, path: Path, module: LabModule) -> list[str]:
    """Apply the resume rule to the differences; returns notes for the Run.

    Args:
        diff: :func:`changes`' sentences (``lr: ...``, ``Recipe: ...``).
        rule: ``"refuse"``, ``"keep"`` or ``"apply"`` (``FitOptions.on_change``).
        path: The checkpoint, for messages.
        module: The LabModule (``"apply"`` sets its lr override).

    Raises:
        ResumeError: ``"refuse"`` with any difference, or ``"keep"`` with a Recipe change
            (the Recipe in force cannot be un-applied to the checkpoint's).
    """
    if not diff:
        return []
    listed = "; ".join(diff)
    if rule == "refuse":
        raise ResumeError(
            f"resuming from {path} would change what the run trains with ({listed}); say "
            "which to use: fit(on_change='apply') continues with the Lab's values, "
            "fit(on_change='keep') with the checkpoint's learning rate, or set them back"
        )
    if rule == "keep":
        if any(d.startswith("Recipe:") for d in diff):
            raise ResumeError(
                f"resuming from {path} with on_change='keep' cannot keep the checkpoint's "
                f"Recipe ({listed}): set lab.recipe to the checkpoint's (recipe_of(load_checkpoint"
                "(path))) or use on_change='apply'"
            )
        return [f"resumed from {path} with the checkpoint's settings (on_change='keep'): {listed}"]
    lr = next((d for d in diff if d.startswith("lr:")), None)
    if lr is not None:
        module.lr_override = float(module.lr)
    return [f"resumed from {path} with the Lab's settings (on_change='apply'): {listed}"]


def load_for_resume(path: str | Path) -> dict[str, Any]:
    """The checkpoint, loaded once for the checks (errors name the file)."""
    return load_checkpoint(path)
