"""compare runs the user's hooks and loss on copies of the model (which keep the hooks and
what they close over): what they change outside the model is named in the comparison's
notes, as labkit.trace names it. Before, a feature hook's list grew by one entry a step
with nothing said."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

import labkit
from tests.optimize.conftest import quick_compare


def _cheap(model: nn.Module, x: torch.Tensor, **kw: Any) -> Any:
    return quick_compare(model, x, [labkit.Recipe(checkpoint=("0",))], **kw)


def test_a_feature_hook_and_a_loss_history_are_named_in_the_comparison() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    feats: list[torch.Tensor] = []
    history: list[float] = []

    def keep(module: nn.Module, args: Any, out: torch.Tensor) -> None:
        feats.append(out.detach())

    def loss(out: torch.Tensor) -> torch.Tensor:
        value = out.pow(2).mean()
        history.append(float(value.detach()))
        return value

    handle = model[0].register_forward_hook(keep)
    try:
        cmp = _cheap(model, torch.randn(4, 8), loss=loss)
    finally:
        handle.remove()
    assert feats and history  # they ran, on the copies
    note = next((n for n in cmp.notes if n.startswith("what your functions and hooks")), "")
    assert "forward hook on '0'" in note and ": feats (a list)" in note, cmp.notes
    assert "loss (" in note and ": history (a list)" in note, cmp.notes
    assert "compare ran the step on copies of the model" in note


def test_nothing_is_said_of_code_that_changes_nothing() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    cmp = _cheap(model, torch.randn(4, 8), loss=lambda out: out.pow(2).mean())
    assert not any("not put back" in n for n in cmp.notes), cmp.notes
