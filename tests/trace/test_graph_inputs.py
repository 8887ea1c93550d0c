"""An input that still carries the graph of code before the call (``z = encoder(x)``,
``a * 2`` of a leaf requiring grad) is measured cut from it: backward stops at the input.

Before, the step's backward flowed into the encoder's ``.grad`` and the second pass failed
("Trying to backward through the graph a second time"), in labkit.trace and
labkit.memory; labkit.plan failed on it too ("Tried to backward() through example input").
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

import labkit
from tests.optimize.conftest import quick_compare


def _encoded() -> tuple[nn.Module, nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    encoder, head = nn.Linear(4, 8), nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
    return encoder, head, encoder(torch.randn(5, 4))  # z holds the encoder's graph


def _notes(what: str, result: Any) -> tuple[str, ...]:
    return result.meta.notes if what == "trace" else result.meta.notes + result.trace.meta.notes


MEASURE = {
    "trace": lambda m, *a, **k: labkit.trace(m, *a, **k, repeat=2, progress=False),
    "memory": lambda m, *a, **k: labkit.memory(m, a[0] if a else None, **k, progress=False),
    "plan": lambda m, *a, **k: labkit.plan(m, a[0] if a else None, **k),
}


@pytest.mark.parametrize("what", sorted(MEASURE))
def test_an_encoded_input_is_measured_from_the_input_on(what: str) -> None:
    encoder, head, z = _encoded()
    result = MEASURE[what](head, z)  # RuntimeError / PlanError before
    assert encoder.weight.grad is None and z.grad_fn is not None  # the graph is the user's
    assert all(p.grad is None for p in head.parameters())
    assert any("carried the graph of code before the call" in n for n in _notes(what, result))
    # the same figures as for the input detached by hand
    plain = MEASURE[what](head, z.detach().requires_grad_())
    if what == "trace":
        assert result.rows()[0]["flops_bwd"] == plain.rows()[0]["flops_bwd"] > 0
    else:
        assert result.peak_bytes == plain.peak_bytes
    z.sum().backward()  # the user's graph still backpropagates afterwards
    assert encoder.weight.grad is not None


def test_a_keyword_input_with_a_graph_is_cut_and_named() -> None:
    encoder, _, z = _encoded()

    class Head(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(8, 2)

        def forward(self, hidden: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
            return self.fc(hidden) * scale

    trace = labkit.trace(Head(), hidden=z, scale=2.0, repeat=1, progress=False)
    assert any("input hidden (AddmmBackward0)" in n for n in trace.meta.notes)
    assert encoder.weight.grad is None


def test_an_input_changed_in_place_through_the_cut_comes_back() -> None:
    encoder, _, z = _encoded()
    before = z.detach().clone()

    class Scales(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(8, 2)

        def forward(self, h: torch.Tensor) -> torch.Tensor:
            with torch.no_grad():
                h.mul_(0.5)  # shares storage with the user's z
            return self.fc(h)

    labkit.trace(Scales(), z, repeat=1, progress=False)
    assert torch.equal(z.detach(), before)
    assert encoder.weight.grad is None


def test_compare_measures_an_encoded_input_from_the_input_on() -> None:
    # before: every row failed ("backward through the graph a second time") and the
    # encoder's .grad was written
    encoder, head, z = _encoded()
    cmp = quick_compare(head, z, [labkit.Recipe(checkpoint=("0",))])
    assert [r.error for r in cmp.results] == [None, None]
    assert encoder.weight.grad is None
    assert any("carried the graph of code before the call" in n for n in cmp.notes)
