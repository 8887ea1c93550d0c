"""Fault table, inputs from elsewhere: an nbformat v3 notebook is named with the command
that converts it (run here to check it does); a GAT fed a [3, E] or [E, 2] edge_index
names the [2, E] it expects."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
import torch

from labkit.gnn import GAT, GATv2
from labkit.gnn.validate import GraphDataError
from labkit.promote import NotebookError, read_notebook

V3 = {
    "metadata": {"name": "old"},
    "nbformat": 3,
    "nbformat_minor": 0,
    "worksheets": [
        {
            "metadata": {},
            "cells": [
                {
                    "cell_type": "code",
                    "collapsed": False,
                    "input": ["x = 1\n", "print(x)"],
                    "language": "python",
                    "metadata": {},
                    "outputs": [],
                    "prompt_number": 1,
                }
            ],
        }
    ],
}


def test_nbformat_v3_says_so_and_how_to_convert(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "old.ipynb"
    path.write_text(json.dumps(V3))
    with pytest.raises(NotebookError, match=r"old\.ipynb: an nbformat v3 notebook") as info:
        read_notebook(path)
    command = re.search(r"`(jupyter nbconvert [^`]+)`", str(info.value))
    assert command, str(info.value)
    argv = shlex.split(command.group(1))
    assert argv[:2] == ["jupyter", "nbconvert"]
    from nbconvert.nbconvertapp import NbConvertApp  # what `jupyter nbconvert` runs

    monkeypatch.chdir(tmp_path)
    app = NbConvertApp()
    app.initialize(argv[2:])
    app.start()
    converted = read_notebook(tmp_path / "old.v4.ipynb")  # the suggestion works
    assert [c.source for c in converted.code_cells] == ["x = 1\nprint(x)"]


# PyG 2.8 calls torch.jit.script at import; torch 2.13 deprecates it (as in tests/gnn)
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
@pytest.mark.parametrize("model_class", [GAT, GATv2])
@pytest.mark.parametrize(
    ("shape", "says"),
    [
        ((3, 7), r"got \[3, 7\]$"),
        (
            (7, 2),
            r"got \[7, 2\] \(an \[E, 2\] list of pairs\? "
            r"pass edge_index\.t\(\)\)",
        ),
    ],
)
def test_gat_names_the_edge_index_it_expects(model_class: type, shape: tuple, says: str) -> None:
    model = model_class(4, 8, 3)
    x = torch.randn(5, 4)
    edges = torch.randint(0, 5, shape)
    name = model_class.__name__
    with pytest.raises(
        GraphDataError,
        match=rf"{name}\(x, edge_index\): edge_index must have "
        rf"shape \[2, E\] \(source row, target row\), {says}",
    ):
        model(x, edges)
    with pytest.raises(GraphDataError, match=r"must have shape \[2, E\]"):
        model.attention_weights(x, edges)
    if shape == (7, 2):  # the hint's fix works
        assert model(x, edges.t()).shape == (5, 3)


# ---------------------------------------------------------------- models labkit cannot see into
# (issue 26 item 4): TorchScript, generators, deep nesting, keywords named like labkit's

_JIT_DEPRECATED = "ignore:`torch.jit.script` is deprecated:DeprecationWarning"


def _mlp() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))


class _ScriptedEncoder(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.enc = torch.jit.script(torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU()))
        self.head = torch.nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.enc(x))


@pytest.mark.filterwarnings(_JIT_DEPRECATED)  # torch 2.13 deprecates torch.jit.script itself
@pytest.mark.parametrize("entry", ["trace", "memory", "plan"])
def test_a_scripted_model_names_torchscript_and_the_fix(entry: str) -> None:
    import labkit

    scripted = torch.jit.script(_mlp())
    with pytest.raises(TypeError, match=r"TorchScript .* Pass the nn\.Module itself"):
        getattr(labkit, entry)(scripted, torch.randn(3, 4))


@pytest.mark.filterwarnings(_JIT_DEPRECATED)
def test_a_scripted_submodule_is_a_note_in_a_trace_and_a_clear_plan_error() -> None:
    import labkit
    from labkit.plan import PlanError

    model, x = _ScriptedEncoder(), torch.randn(3, 4)
    t = labkit.trace(model, x, repeat=1)
    assert any("TorchScript modules run as one opaque call: 'enc'" in n for n in t.meta.notes)
    with pytest.raises(PlanError, match=r"module 'enc' is TorchScript .* Plan the Python module"):
        labkit.plan(model, x)
    rep = labkit.memory(model, x)  # measured: the scripted ops are seen at dispatch
    assert rep.peak_bytes > 0 and all(p.grad is None for p in model.parameters())


class _Sums(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 2)

    def forward(self, xs) -> torch.Tensor:  # type: ignore[no-untyped-def]
        return self.fc(torch.stack(list(xs)).sum(0))


@pytest.mark.parametrize("entry", ["trace", "memory", "plan"])
def test_a_generator_input_is_named_with_pass_a_list(entry: str) -> None:
    import labkit

    gen = (torch.randn(3, 4) for _ in range(2))
    batch = gen if entry == "trace" else (gen,)
    with pytest.raises(TypeError, match=r"input 0 is a generator .* pass a list"):
        getattr(labkit, entry)(_Sums(), batch)
    labkit.trace(_Sums(), [torch.randn(3, 4), torch.randn(3, 4)], repeat=1)  # a list runs


def test_two_hundred_nested_sequentials_are_recorded_and_the_limit_put_back() -> None:
    import sys

    import labkit

    model: torch.nn.Module = torch.nn.Linear(4, 4)
    for _ in range(200):
        model = torch.nn.Sequential(model)
    limit = sys.getrecursionlimit()
    t = labkit.trace(model, torch.randn(2, 4), repeat=1)
    assert len(t.rows()) == 201 and sys.getrecursionlimit() == limit
    rep = labkit.memory(model, torch.randn(2, 4))
    assert rep.peak_bytes > 0 and sys.getrecursionlimit() == limit


def test_past_labkits_limit_the_error_names_the_nesting_with_a_short_path() -> None:
    from labkit.trace import TraceError
    from labkit.trace.step import deep_error

    model: torch.nn.Module = torch.nn.Linear(4, 4)
    for _ in range(80):
        model = torch.nn.Sequential(model)
    err = deep_error(model, RecursionError("maximum recursion depth exceeded"))
    assert isinstance(err, TraceError)
    msg = str(err)
    assert "nested 80 modules deep" in msg and "flatten the nesting" in msg
    path = msg.split("(e.g. '")[1].split("')")[0]
    assert len(path) <= 60 and "..." in path


_SEEN: list[str] = []  # the modes forward was called with (outside the model: labkit puts
# the model's own Python state back after measuring)


class _Moded(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 2)

    def forward(self, x: torch.Tensor, mode: str = "train", backward: bool = False):  # type: ignore[no-untyped-def]
        _SEEN.append(mode)
        return self.fc(x) * (2 if mode == "eval" else 1)


@pytest.mark.parametrize("entry", ["trace", "memory", "plan"])
def test_labkits_keywords_never_shadow_the_models(entry: str) -> None:
    import labkit

    model, x = _Moded(), torch.randn(3, 4)
    _SEEN.clear()
    call = getattr(labkit, entry)
    option = {
        "trace": {"mode": "eval"},
        "memory": {"backward": False},
        "plan": {"backward": False},
    }[entry]
    name = next(iter(option))
    with pytest.raises(TypeError, match=rf"takes '{name}' too: .* model_kwargs=\{{'{name}'"):
        call(model, x, **option)
    assert _SEEN == []  # nothing ran
    # the route for the model's keywords; labkit's own options keep their names beside it
    kwargs = {"mode": "eval"}
    call(model, x, model_kwargs=kwargs)
    assert _SEEN and set(_SEEN) == {"eval"}
    if entry == "trace":
        t = call(model, x, mode="timing", model_kwargs={"mode": "eval"}, repeat=1)
        assert t.meta.mode == "timing"


class _HFStyle(torch.nn.Module):
    """A Hugging Face-style forward: keyword inputs, the loss computed inside."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(50, 8)
        self.head = torch.nn.Linear(8, 50)

    def forward(self, input_ids, attention_mask=None, labels=None):  # type: ignore[no-untyped-def]
        logits = self.head(self.emb(input_ids))
        return torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten())


class _TakesABatch(torch.nn.Module):
    """A Lightning-style forward that takes the batch dict itself."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 1)

    def forward(self, batch):  # type: ignore[no-untyped-def]
        return self.lin(batch["x"]).sum()


def test_a_batch_dict_given_positionally_to_trace_says_to_pass_it_as_keywords() -> None:
    import labkit

    model = _HFStyle()
    batch = {"input_ids": torch.randint(0, 50, (2, 6)), "labels": torch.randint(0, 50, (2, 6))}
    with pytest.raises(labkit.TraceError) as info:
        labkit.trace(model, batch)
    message = str(info.value)
    assert (
        "the one input is a dict whose keys (input_ids, labels) are parameters of "
        "_HFStyle.forward" in message
    ), message
    assert "labkit.trace(model, **batch, ...)" in message and "model_kwargs=batch" in message
    assert all(p.grad is None for p in model.parameters())  # nothing left behind
    labkit.trace(model, **batch, repeat=1)  # the fix works as written
    labkit.trace(_TakesABatch(), {"x": torch.randn(3, 4)}, repeat=1)  # the dict itself: runs


@pytest.mark.parametrize("entry", ["memory", "plan"])
def test_a_forward_that_takes_the_dict_itself_is_told_to_wrap_it(entry: str) -> None:
    import labkit

    model, batch = _TakesABatch(), {"x": torch.randn(3, 4)}
    with pytest.raises(RuntimeError) as info:  # MemoryRecordError / PlanError
        getattr(labkit, entry)(model, batch)
    message = str(info.value)
    assert "_TakesABatch.forward takes none of the keywords it was given (x)" in message, message
    assert "pass it inside a tuple: (batch,)" in message
    getattr(labkit, entry)(model, (batch,))  # the fix works as written
    getattr(labkit, entry)(
        _HFStyle(),
        {"input_ids": torch.randint(0, 50, (2, 6)), "labels": torch.randint(0, 50, (2, 6))},
    )
