"""Steps a plan cannot predict: the error names the op, the module and what to do."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import labkit
from tests.memory.conftest import assert_clean


class ItemInForward(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Sequential(nn.Linear(4, 4))
        self.gate = Gate()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.gate(self.inner(x))


class Gate(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x if x.mean().item() > 0 else -x  # a Python branch on a value


class NonzeroOnFloats(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.fc(x)
        return y[y > 0]  # shape depends on the float values


def test_item_in_forward_names_the_op_and_module() -> None:
    model = ItemInForward()
    with pytest.raises(labkit.PlanError) as info:
        labkit.plan(model, torch.randn(2, 4))
    msg = str(info.value)
    assert "op aten._local_scalar_dense.default in module 'gate'" in msg
    assert ".item()" in msg and "labkit.memory(model, batch)" in msg
    assert info.value.__cause__ is None and info.value.__suppress_context__  # no deep traceback
    assert_clean(model)


def test_value_dependent_shape_names_the_op_and_module() -> None:
    model = NonzeroOnFloats()
    with pytest.raises(
        labkit.PlanError, match=r"op aten\.nonzero\.default in NonzeroOnFloats\.forward"
    ) as info:
        labkit.plan(model, torch.randn(2, 4))
    assert "output shape depends on the tensor's values" in str(info.value)


def test_masks_on_known_index_tensors_do_plan() -> None:
    # integer inputs keep their values: a boolean mask on them has a known shape
    class Select(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(10, 3)

        def forward(self, idx: torch.Tensor) -> torch.Tensor:
            keep = idx[idx % 2 == 0]
            return self.emb(keep).sum() * int(idx.max().item())

    model = Select()
    idx = torch.tensor([0, 1, 2, 3, 4, 6, 8, 9])
    plan = labkit.plan(model, idx)
    measured = labkit.memory(model, idx)
    assert plan.compare(measured)["peak"][:2] == (measured.peak_bytes, measured.peak_bytes)


def test_not_a_module_and_a_bad_optimizer() -> None:
    with pytest.raises(TypeError, match=r"labkit\.plan expects a torch\.nn\.Module"):
        labkit.plan(torch.randn(2), torch.randn(2))
    with pytest.raises(TypeError, match=r"must be a torch\.optim\.Optimizer or a factory"):
        labkit.plan(nn.Linear(2, 2), torch.randn(1, 2), optimizer=0.1)
    other = nn.Linear(2, 2)
    foreign = torch.optim.SGD(other.parameters())
    with pytest.raises(ValueError, match=r"not parameters of the model: give labkit\.plan a"):
        labkit.plan(nn.Linear(2, 2), torch.randn(1, 2), optimizer=foreign)


@pytest.mark.skipif(torch.backends.cuda.is_built(), reason="this PyTorch can plan for CUDA")
def test_planning_for_cuda_on_a_cpu_only_build_says_what_is_missing() -> None:
    with pytest.raises(ValueError, match=r"needs a PyTorch built with CUDA \(this one is CPU-only"):
        labkit.plan(nn.Linear(2, 2), torch.randn(1, 2), device="cuda")
