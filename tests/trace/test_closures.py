"""What the user's hooks and loss close over is named when the step changes it.

A forward hook collecting features, a loss keeping a history, a ``nonlocal`` counter: each
pass labkit runs calls them again. labkit does not write these back (what a hook collects
is the user's on purpose), but a list that grew by one entry per pass must not be a
surprise: the notes name the hook or function, the variable and how many times the step
ran. Before, nothing was said (a feature list held 9 entries after one ``labkit.trace``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

import labkit
from labkit.trace._closures import Closures, user_hooks


def _model() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


def _note(notes: tuple[str, ...]) -> str | None:
    return next((n for n in notes if n.startswith("what your functions and hooks")), None)


def _collector() -> tuple[list[torch.Tensor], Callable[..., None]]:
    feats: list[torch.Tensor] = []

    def keep(module: nn.Module, args: Any, out: torch.Tensor) -> None:
        feats.append(out.detach())

    return feats, keep


def test_a_feature_hook_that_collects_is_named_with_the_times_the_step_ran() -> None:
    model, x = _model(), torch.randn(3, 4)
    feats, keep = _collector()
    handle = model[0].register_forward_hook(keep)
    try:
        trace = labkit.trace(model, x, repeat=2, progress=False)
    finally:
        handle.remove()
    note = _note(trace.meta.notes)
    assert note is not None, trace.meta.notes
    assert "forward hook on '0' (_collector.<locals>.keep): feats (a list)" in note
    assert f"ran the step {len(feats)} times" in note  # one entry a pass


def test_a_loss_history_and_a_nonlocal_counter_are_named_in_a_memory_report() -> None:
    model, x, y = _model(), torch.randn(3, 4), torch.tensor([0, 1, 0])
    history: list[float] = []
    calls = 0

    def loss(out: torch.Tensor) -> torch.Tensor:
        nonlocal calls
        calls += 1
        value = F.cross_entropy(out, y)
        history.append(float(value.detach()))
        return value

    report = labkit.memory(model, x, loss=loss, progress=False)
    note = _note(report.meta.notes)
    assert note is not None, report.meta.notes
    assert "loss (test_a_loss_history" in note
    assert ": history (a list)" in note and ": calls (an int)" in note
    assert ": y (" not in note  # read, not changed


def test_a_global_hook_of_the_users_is_watched_and_labkits_own_are_not() -> None:
    model, x = _model(), torch.randn(3, 4)
    _, keep = _collector()
    handle = torch.nn.modules.module.register_module_forward_hook(keep)
    try:
        labels = [label for label, _ in user_hooks(model)]
        trace = labkit.trace(model, x, repeat=1, progress=False)
    finally:
        handle.remove()
    assert labels == ["global forward hook"]
    note = _note(trace.meta.notes)
    assert note is not None and "global forward hook (_collector.<locals>.keep): feats" in note


def test_a_hook_that_only_reads_and_a_loss_closing_over_the_model_say_nothing() -> None:
    model, x = _model(), torch.randn(3, 4)
    scale = 2.0
    seen_shapes = {"first": (3, 8)}

    def check(module: nn.Module, args: Any, out: torch.Tensor) -> None:
        assert tuple(out.shape) == seen_shapes["first"]

    def loss(out: torch.Tensor) -> torch.Tensor:  # the model and its parameters, closed over
        return scale * out.pow(2).mean() + 1e-4 * sum(p.pow(2).sum() for p in model.parameters())

    handle = model[0].register_forward_hook(check)
    try:
        trace = labkit.trace(model, x, loss=loss, repeat=1, progress=False)
    finally:
        handle.remove()
    assert _note(trace.meta.notes) is None, trace.meta.notes


def test_closures_of_installed_code_are_not_watched() -> None:
    # torch's own hooks and functions hold caches that are torch's, not the user's
    assert (
        Closures([("loss", F.cross_entropy), ("forward", nn.Linear(2, 2).forward)]).changes() == []
    )
    assert repr(Closures([("loss", F.cross_entropy)])) == "Closures(cells=0)"
