"""The growth detector finds a planted leak, names where it was made, is silent on a clean loop."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import labkit
from labkit.memory import GrowthReport
from tests.memory.conftest import Stack, assert_clean


def _setup() -> tuple[Stack, torch.optim.Optimizer, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    model = Stack(d=16, n=2)
    return model, torch.optim.Adam(model.parameters()), torch.randn(32, 16), torch.randn(32, 1)


def test_planted_leak_is_found_with_its_line_and_fix() -> None:
    model, opt, x, y = _setup()
    history: list[torch.Tensor] = []

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        F.mse_loss(model(x), y).backward()
        opt.step()
        val_loss = F.mse_loss(model(x), y)  # still holds its graph
        history.append(val_loss)  # the leak

    rep = labkit.find_growth(model, step, steps=5)
    assert rep.growing and bool(rep)
    assert rep.bytes_per_step > 0
    diffs = [b - a for a, b in zip(rep.live_after_step, rep.live_after_step[1:], strict=False)]
    assert all(d > 0 for d in diffs[1:])
    here = __file__
    cats = {s.category for s in rep.sites}
    assert "activations" in cats
    root = [s for s in rep.sites if not s.module and s.category == "temporaries"]
    assert root and root[0].file == here and "val_loss = F.mse_loss" in root[0].code
    assert any(s.module.startswith("blocks.") for s in rep.sites)
    assert "loss.item()" in rep.fix and f"{here}:{root[0].line}" in rep.fix
    text = str(rep)
    assert "grows" in text and "fix:" in text
    assert repr(rep).startswith("GrowthReport(growing=True, steps=5, per_step=")
    assert_clean(model)


@pytest.mark.parametrize("set_to_none", [True, False])
def test_clean_loop_is_silent(set_to_none: bool) -> None:
    model, opt, x, y = _setup()
    history: list[float] = []

    def step() -> None:
        opt.zero_grad(set_to_none=set_to_none)
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        history.append(loss.item())

    rep = labkit.find_growth(model, step, steps=5)
    assert isinstance(rep, GrowthReport)
    assert not rep.growing and rep.sites == () and rep.fix == ""
    assert len(set(rep.live_after_step[1:])) == 1
    assert str(rep).startswith("no growth")
    assert_clean(model)


def test_kept_tensors_without_graph_are_named_too() -> None:
    model, opt, x, y = _setup()
    kept: list[torch.Tensor] = []

    def step() -> None:
        opt.zero_grad()
        out = model(x)
        F.mse_loss(out, y).backward()
        opt.step()
        kept.append(out.detach())

    rep = labkit.find_growth(model, step, steps=4)
    assert rep.growing
    # the innermost user frame is the model's own forward, which made the kept output
    assert rep.sites[0].module == "head" and rep.sites[0].file.endswith("conftest.py")
    assert "self.head(x)" in rep.sites[0].code
    assert "survive every step" in rep.fix


def test_bad_arguments_are_refused() -> None:
    model, *_ = _setup()
    with pytest.raises(ValueError, match="steps >= warmup \\+ 2"):
        labkit.find_growth(model, lambda: None, steps=2, warmup=1)
