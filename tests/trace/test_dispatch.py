"""The dispatch mode's handler runs outside Dynamo: a ``torch.compile``'d function called
inside the model while labkit records runs as it would eagerly, with the same FLOPs, and
Dynamo never traces labkit's handler (it would warn about what the handler calls)."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

import labkit


@torch.compile(backend="eager")
def _scaled(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.relu(x @ w)


class _CallsCompiled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.w = nn.Parameter(torch.randn(8, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _scaled(self.fc(x), self.w)


# Dynamo's own compile of _scaled (not labkit's doing) warns about a non-leaf's .grad
@pytest.mark.filterwarnings("ignore:The .grad attribute of a Tensor that is not a leaf")
def test_a_compiled_function_inside_the_model_leaves_the_handler_alone() -> None:
    torch.manual_seed(0)
    model, x = _CallsCompiled(), torch.randn(4, 8)
    model(x).sum().backward()  # compiled once, as the user's loop would have
    model.zero_grad(set_to_none=True)
    for _ in range(2):  # every warning is an error here: none from Dynamo inside labkit
        t = labkit.trace(model, x, warmup=0, repeat=1, progress=False)
    with FlopCounterMode(display=False) as fc:
        model(x).sum().backward()
    assert t.total_flops == fc.get_total_flops() > 0
    ops = [n.name for n in t.nodes if n.kind == "op"]
    assert "matmul" in ops and "relu" in ops  # the compiled function's ops, seen eagerly
