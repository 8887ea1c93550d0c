"""Graph breaks of a compiled recipe: count, reason, module and source line."""

import dataclasses
import inspect

import pytest
import torch
from torch import nn

from labkit.optimize import Recipe, compare
from labkit.optimize._breaks import graph_breaks
from labkit.trace.model import Trace


class Chatty(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.fc(x)
        print("", end="")  # Dynamo cannot trace print: graph break
        return torch.relu(y)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(8, 8)
        self.chatty = Chatty()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.chatty(self.inp(x))


def print_line() -> int:
    lines, start = inspect.getsourcelines(Chatty.forward)
    return start + next(i for i, ln in enumerate(lines) if "print(" in ln)


def test_explain_names_reason_module_and_line():
    torch.manual_seed(0)
    model = Net()
    graphs, breaks = graph_breaks(model, model.forward, (torch.randn(2, 8),), {})
    # the model's frame breaks where it calls chatty, then chatty's own frame at print:
    # three graphs, one place reported twice
    assert graphs == 3 and len(breaks) == 1
    b = breaks[0]
    assert b.count == 2
    assert b.module == "chatty" and b.module_type == "Chatty" and b.modules == ("chatty",)
    assert "print" in b.reason
    assert f"test_breaks.py:{print_line()}: " + 'print("", end="")  # Dynamo cannot' in b.source
    assert b.describe().startswith(b.reason + " in module 'chatty' (Chatty) at ")
    assert b.describe().endswith(" (x2)")


@pytest.mark.slow
def test_compare_reports_breaks_on_the_compile_row():
    torch.manual_seed(0)
    model = Net().eval()
    cmp = compare(
        model,
        torch.randn(4, 8),
        Recipe(compile="default"),
        mode="inference",
        steps=2,
        warmup=1,
        target=None,
    )
    r = cmp.result("compile")
    assert r.error is None and r.graphs == 3 and r.recompiles == 0
    assert [b["module"] for b in r.graph_breaks] == ["chatty"]
    assert "Dynamo: 3 graphs, 2 graph breaks at 1 place; 0 recompilations after the first call" in (
        r.notes
    )
    assert any(n.startswith("graph break: ") and "(Chatty)" in n for n in r.notes)
    assert "breaks" in cmp.summary().splitlines()[1].split()


class Pointwise(nn.Module):
    """Many small elementwise ops (advise suggests compile), one graph break."""

    def __init__(self) -> None:
        super().__init__()
        self.chatty = Chatty()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(6):
            x = torch.tanh(x * 1.01 + 0.1).sigmoid()
        return self.chatty(x)


def _hand_timed(t: Trace) -> Trace:
    """``t`` with every op 1 ms and each module call the sum of the ops inside it."""
    inside = [0.0] * len(t.nodes)
    for n in t.nodes:
        if n.kind == "op":
            parent = n.parent
            while parent is not None:
                inside[parent] += 1e-3
                parent = t.nodes[parent].parent
    nodes = [
        dataclasses.replace(n, fwd_time=1e-3 if n.kind == "op" else inside[n.id]) for n in t.nodes
    ]
    total = 1e-3 * sum(n.kind == "op" for n in nodes)
    return t.replace(nodes=nodes, meta=dataclasses.replace(t.meta, forward_time=total))


@pytest.mark.slow
def test_advise_names_the_costliest_break_compare_found():
    import labkit
    from labkit.optimize import advise

    torch.manual_seed(0)
    model, x = Pointwise().eval(), torch.randn(4096, 8)
    t = _hand_timed(labkit.trace(model, x, backward=False, repeat=0))
    recipe = Recipe(compile="default")
    # by construction (every op 1 ms, 25 of its 26 ops elementwise) advise suggests compile
    assert recipe in advise(t, top=10).recipes().values()
    compare(
        model,
        x,
        recipe,
        mode="inference",
        steps=1,
        warmup=0,
        memory=False,
        drift=False,
        target=None,
    )
    s = next(s for s in advise(t, top=10) if s.change == {"compile": "default"})
    assert s.title.endswith("; 2 graph breaks, the costliest in chatty")
    assert s.where[0] == "chatty"
    assert f"test_breaks.py:{print_line()}:" in s.detail and "print" in s.detail
