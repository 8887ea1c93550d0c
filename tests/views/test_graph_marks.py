"""Graph-break marks on a GraphView: Dynamo's real breaks land on the calls of their module."""

import dataclasses
import inspect

import pytest
import torch
from torch import nn

import labkit
from labkit.optimize import Recipe, compare
from labkit.optimize._breaks import graph_breaks
from labkit.views import GraphView


class Gate(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.fc(x)
        if y.sum() > 0:  # a Python branch on a tensor's value: Dynamo breaks the graph
            return y * 0.5
        return y * 2.0  # the same ops either way: repeated gates roll into one box


class Net(nn.Module):
    """The gate is called twice, apart (not rolled into one box): both calls are marked."""

    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(8, 8)
        self.gate = Gate()
        self.out = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.gate(self.inp(self.gate(x))))


class Stack(nn.Module):
    """Three identical gated blocks: rolled into one ``x3`` box by the view."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.Sequential(Gate(), Gate(), Gate())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(x)


def branch_line() -> int:
    lines, start = inspect.getsourcelines(Gate.forward)
    return start + next(i for i, ln in enumerate(lines) if "if y.sum() > 0" in ln)


def calls(trace, path):
    return [n.id for n in trace.nodes if n.kind == "module" and n.module == path]


@pytest.mark.slow
def test_a_compile_comparisons_breaks_mark_every_call_of_their_module():
    torch.manual_seed(0)
    model, x = Net().eval(), torch.randn(4, 8)
    cmp = compare(
        model,
        x,
        Recipe(compile="default"),
        mode="inference",
        steps=1,
        warmup=0,
        memory=False,
        drift=False,
    )
    assert cmp.result("compile").graph_breaks, cmp.summary()
    trace = labkit.trace(model, x)
    gates = calls(trace, "gate")
    assert len(gates) == 2
    view = GraphView(trace, breaks=cmp)
    assert sorted(map(int, view.marks)) == gates
    for texts in view.marks.values():
        assert texts and all(" in module 'gate' (Gate) at " in t for t in texts)
        assert any(f"test_graph_marks.py:{branch_line()}: if y.sum() > 0" in t for t in texts)
    assert repr(view).endswith(", marked=2)")
    # the same marks through Trace.show's graph tab
    assert trace.show(breaks=cmp).graph.marks == view.marks
    # a newer trace of the same model keeps them, on its own node ids
    view.update(labkit.trace(model, torch.randn(4, 8)))
    view.flush()
    assert sorted(map(int, view.marks)) == calls(view.trace, "gate")


@pytest.fixture(scope="module")
def stack_breaks():
    torch.manual_seed(0)
    model = Stack().eval()
    x = torch.randn(2, 8)
    _, breaks = graph_breaks(model, model.forward, (x,), {}, grad=False)
    return model, x, breaks


def test_a_break_in_a_rolled_call_marks_the_drawn_call_that_stands_for_it(stack_breaks):
    model, x, breaks = stack_breaks
    # Dynamo's stack names the code, not the instance: every Gate runs the line that broke
    assert [(b.module, b.modules) for b in breaks] == [
        ("blocks.0", ("blocks.0", "blocks.1", "blocks.2"))
    ]
    assert "in module 'blocks.0' (Gate, and 2 more of that class) at " in breaks[0].describe()
    trace = labkit.trace(model, x)
    every = GraphView(trace, rolled=False, breaks=breaks)
    assert sorted(map(int, every.marks)) == sorted(
        nid for p in ("blocks.0", "blocks.1", "blocks.2") for nid in calls(trace, p)
    )
    in_last = [dataclasses.replace(b, module="blocks.2", modules=()) for b in breaks]
    rolled = GraphView(trace, breaks=in_last)
    # blocks.1 and blocks.2 are rolled into blocks.0's box: the mark is drawn there
    assert list(map(int, rolled.marks)) == calls(trace, "blocks.0")
    assert "in module 'blocks.2' (Gate)" in rolled.marks[str(calls(trace, "blocks.0")[0])][0]
    flat = GraphView(trace, rolled=False).mark_breaks(in_last)
    assert list(map(int, flat.marks)) == calls(trace, "blocks.2")
    one = GraphView(trace, rolled=False).mark_breaks(dataclasses.asdict(in_last[0]))
    assert one.marks == flat.marks  # one break dict, as a comparison row lists them
    assert flat.mark_breaks([]).marks == {}


def test_a_break_whose_module_did_not_run_is_named_in_a_warning(stack_breaks):
    model, x, breaks = stack_breaks
    trace = labkit.trace(model, x)
    elsewhere = [dataclasses.replace(breaks[0], module="encoder.attn", modules=("encoder.attn",))]
    with pytest.warns(UserWarning, match=r"module 'encoder\.attn' has no call in this trace"):
        view = GraphView(trace, breaks=elsewhere + list(breaks))
    assert list(map(int, view.marks)) == calls(trace, "blocks.0")  # the others still marked


def test_a_comparison_without_a_compile_recipe_is_refused():
    model, x = nn.Linear(8, 4), torch.randn(4, 8)
    cmp = compare(
        model, x, Recipe(), mode="inference", steps=1, warmup=0, memory=False, drift=False
    )
    with pytest.raises(ValueError, match=r"no compiled recipe in this comparison"):
        GraphView(labkit.trace(model, x)).mark_breaks(cmp)


def test_the_static_picture_outlines_the_box_that_shows_each_break(stack_breaks):
    from labkit.trace.graph import canonicalize, visible_graph
    from labkit.views._static import _ink_on, marked_boxes

    model, x, breaks = stack_breaks
    trace = labkit.trace(model, x)
    marks = {int(k): v for k, v in GraphView(trace, rolled=False, breaks=breaks).marks.items()}
    blocks = calls(trace, "blocks")[0]
    # collapsed, the three Gate calls (one break each) show on the blocks box ...
    flat = canonicalize(trace, rolled=False)
    shut = visible_graph(trace, 1, canon=flat)
    assert marked_boxes(shut, marks) == {blocks: 3}
    # ... and opened, each Gate box shows its own
    opened = visible_graph(trace, 2, canon=flat)
    gates = [n for p in ("blocks.0", "blocks.1", "blocks.2") for n in calls(trace, p)]
    assert marked_boxes(opened, marks) == dict.fromkeys(gates, 1)
    assert GraphView(trace, rolled=False, breaks=breaks).to_png().startswith(b"\x89PNG")
    # the text on a box: white on the darkest fill, black on the lightest (WCAG luminance)
    assert _ink_on((0.5, 0.0, 0.15)) == "#fff" and _ink_on((1.0, 1.0, 0.8)) == "#000"
