"""Research code compiles its model early (``model = torch.compile(model)``) and then hands
it to every tool. labkit measures the module inside, eagerly, under the user's own paths,
and says so; nothing is compiled by the measurement."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

import labkit

NOTE = "the model is torch.compile'd: labkit measured the Sequential inside it eagerly"


# torch.compile's first import of inductor (the test's own call, not labkit's) warns
@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")
@pytest.mark.parametrize("entry", ["trace", "memory", "plan"])
def test_a_compiled_model_is_measured_as_the_module_inside_and_says_so(entry: str) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    compiled = torch.compile(model)
    x = torch.randn(4, 8)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    result = getattr(labkit, entry)(compiled, x)
    trace = result if entry == "trace" else result.trace
    keys = [n.key for n in trace.nodes if n.kind == "module"]
    assert keys and not any("_orig_mod" in k for k in keys), keys  # the user's own paths
    assert any(NOTE in n for n in trace.meta.notes)
    if entry != "trace":
        assert NOTE in result.summary()
    with FlopCounterMode(display=False) as fc:
        model(x).sum().backward()
    model.zero_grad(set_to_none=True)
    assert trace.total_flops == fc.get_total_flops()
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
