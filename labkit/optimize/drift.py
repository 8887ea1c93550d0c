"""Where a candidate model's numbers part from the baseline's, layer by layer.

Both models run the same inputs once, recorded by labkit's public step with an observer
of module outputs (:func:`module_outputs`); each module's output in the candidate is
compared with the output of the module at the same path in the baseline (first call of
each). :func:`labkit.optimize.apply` keeps module paths, so an optimized copy lines up
with its original.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from labkit._tensors import named_tensors
from labkit.optimize._random import held_randomness
from labkit.trace import Step, record_step
from labkit.trace.instrument import Observer, RawNode

FP16_MAX = 65504.0


@dataclass(frozen=True)
class LayerDrift:
    """How far one module's output moved from the baseline's.

    Args:
        path: Module path (``""`` for the whole model).
        type: Module class name in the candidate.
        max_abs: Largest absolute difference.
        rel: ``||candidate - baseline|| / ||baseline||`` (L2 norms).
        cosine: Cosine similarity of the flattened outputs.
        base_max_abs: Largest absolute value of the baseline output (for fp16 range checks).
        finite: False when the candidate output has inf or NaN.
    """

    path: str
    type: str
    max_abs: float
    rel: float
    cosine: float
    base_max_abs: float
    finite: bool = True

    def drifts(self, tolerance: float) -> bool:
        """True when the relative error passes ``tolerance`` or the output is not finite."""
        return not self.finite or self.rel > tolerance


def flat(value: object) -> torch.Tensor | None:
    """All floating-point tensors in ``value`` flattened into one fp32 vector (None if none)."""
    parts = [
        t.detach().reshape(-1).float().cpu()
        for _, t in named_tensors(value)
        if t.is_floating_point() and not t.is_meta
    ]
    if not parts:
        return None
    return torch.cat(parts) if len(parts) > 1 else parts[0]


def deviation(base: torch.Tensor, cand: torch.Tensor) -> tuple[float, float, float]:
    """(max abs, relative L2, cosine) between two flat fp32 vectors of equal size."""
    if base.shape != cand.shape:
        raise ValueError(
            f"outputs differ in size: baseline {tuple(base.shape)}, candidate {tuple(cand.shape)}"
        )
    base, cand = base.double(), cand.double()  # fp32 sums over millions of elements drift
    diff = cand - base
    max_abs = float(diff.abs().max()) if diff.numel() else 0.0
    norm = float(base.norm())
    rel = float(diff.norm()) / norm if norm > 0 else (0.0 if float(diff.norm()) == 0 else math.inf)
    denom = float(base.norm() * cand.norm())
    cosine = float(base @ cand) / denom if denom > 0 else (1.0 if rel == 0 else 0.0)
    cosine = max(-1.0, min(1.0, cosine))
    return max_abs, rel, cosine


def layer_drift(
    baseline: torch.nn.Module,
    candidate: torch.nn.Module,
    *args: object,
    skip: tuple[str, ...] = (),
    seed: int = 0,
    hold_random: bool = True,
    **kwargs: object,
) -> list[LayerDrift]:
    """Per-module output drift of ``candidate`` against ``baseline``, in baseline call order.

    Both run once under ``torch.no_grad()`` with the same seed, in their current
    train/eval mode, with dropout switched off (``hold_random``), so the drift is
    the candidate's numerics and not different dropout masks. Hooks are removed
    afterwards, also on error, and both models, the inputs and the random number
    generators are as before.

    Args:
        baseline: The reference model (usually fp32 eager).
        candidate: The model to check, with the same module paths.
        *args: Positional inputs of both models.
        skip: Module paths to leave out (e.g. convolutions that absorbed a BatchNorm).
        seed: Seed set before each run, so any other random draws match.
        hold_random: Switch dropout off in both runs (modules and functional calls).
        **kwargs: Keyword inputs of both models.

    Returns:
        One :class:`LayerDrift` per module that ran in both and produced floating outputs.

    Example:
        >>> import torch
        >>> from torch import nn
        >>> from labkit.optimize import Recipe, layer_drift
        >>> from labkit.optimize.apply import apply
        >>> model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
        >>> x = torch.randn(32, 8)
        >>> fast = apply(model, Recipe(precision="bf16-mixed"))
        >>> rows = layer_drift(model, fast, x)
        >>> [r.path for r in rows]  # forward order; '' is the model's output
        ['0', '1', '2', '']
        >>> all(r.rel < 0.05 for r in rows)  # bf16 keeps ~3 significant digits
        True
    """
    order: list[str] = []
    base_out: dict[str, torch.Tensor] = {}
    results: dict[str, LayerDrift] = {}

    def record(path: str, module: torch.nn.Module, output: object) -> None:
        if path in base_out:
            return
        vec = flat(output)
        if vec is not None:
            base_out[path] = vec
            order.append(path)

    def check(path: str, module: torch.nn.Module, output: object) -> None:
        if path in results or path not in base_out:
            return
        vec = flat(output)
        if vec is None or vec.shape != base_out[path].shape:
            return
        base = base_out[path]
        max_abs, rel, cos = deviation(base, vec)
        finite = bool(torch.isfinite(vec).all())
        base_max = float(base.abs().max()) if base.numel() else 0.0
        results[path] = LayerDrift(path, type(module).__name__, max_abs, rel, cos, base_max, finite)

    module_outputs(baseline, args, kwargs, record, skip=skip, seed=seed, hold_random=hold_random)
    module_outputs(candidate, args, kwargs, check, skip=skip, seed=seed, hold_random=hold_random)
    return [results[p] for p in order if p in results]


OnOutput = Callable[[str, torch.nn.Module, object], None]


class _Outputs(Observer):
    """Passes every module call's output, with its path, to ``on_output``."""

    def __init__(self, on_output: OnOutput, skip: tuple[str, ...]) -> None:
        self.on_output, self.skip = on_output, skip

    def __repr__(self) -> str:
        return f"_Outputs(skip={self.skip})"

    def ret(self, node: RawNode, module: torch.nn.Module, output: object) -> None:
        path = node.module or ""
        if path not in self.skip:
            self.on_output(path, module, output)


def module_outputs(
    model: torch.nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    on_output: OnOutput,
    *,
    skip: tuple[str, ...] = (),
    seed: int = 0,
    hold_random: bool = True,
) -> None:
    """Run ``model`` forward once as a drift check does, passing each module call's output.

    One forward pass under ``torch.no_grad()``, seeded, with dropout held off, recorded by
    labkit's public step (:func:`labkit.trace.record_step`) with an observer of module
    outputs: the hooks are the instrumentation layer's, and the model, its inputs and the
    random number generators are as before afterwards.

    Args:
        model: The model to run.
        args: Positional inputs.
        kwargs: Keyword inputs.
        on_output: ``on_output(path, module, output)`` for every module call, in call order.
        skip: Module paths left out.
        seed: Seed set right before the forward pass.
        hold_random: Switch dropout off (modules and functional calls).
    """

    def forward(*a: object, **k: object) -> object:
        torch.manual_seed(seed)
        return model(*a, **k)

    held = held_randomness(model) if hold_random else contextlib.nullcontext()
    step = Step(model, tuple(args), dict(kwargs), backward=False, forward=forward)
    record_step(
        step, mode="timing", observers=[_Outputs(on_output, skip)], contexts=[held, torch.no_grad()]
    )


def first_drift(rows: list[LayerDrift], tolerance: float) -> LayerDrift | None:
    """The first module (in call order, innermost first) whose output drifts past ``tolerance``."""
    for row in rows:
        if row.path and row.drifts(tolerance):
            return row
    root = next((r for r in rows if not r.path), None)
    return root if root is not None and root.drifts(tolerance) else None


def fp16_risks(rows: list[LayerDrift], limit: int = 3) -> list[str]:
    """Notes for modules whose fp32 outputs exceed fp16's range or turned non-finite."""
    notes = []
    for r in rows:
        where = r.path or "(model output)"
        if r.base_max_abs > FP16_MAX:
            notes.append(
                f"fp16 overflow risk in {where} ({r.type}): fp32 output reaches "
                f"{r.base_max_abs:.3g}, above fp16's max {FP16_MAX:.0f}"
                + ("; it produced inf/NaN" if not r.finite else "")
            )
        elif not r.finite:
            notes.append(f"{where} ({r.type}) produced inf/NaN under fp16")
    return notes[:limit]
