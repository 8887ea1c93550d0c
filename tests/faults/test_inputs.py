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
    "metadata": {"name": "old"}, "nbformat": 3, "nbformat_minor": 0,
    "worksheets": [{"metadata": {}, "cells": [{
        "cell_type": "code", "collapsed": False, "input": ["x = 1\n", "print(x)"],
        "language": "python", "metadata": {}, "outputs": [], "prompt_number": 1}]}],
}  # fmt: skip


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
    [((3, 7), r"got \[3, 7\]$"), ((7, 2), r"got \[7, 2\] \(an \[E, 2\] list of pairs\? "
                                          r"pass edge_index\.t\(\)\)")],
)  # fmt: skip
def test_gat_names_the_edge_index_it_expects(model_class: type, shape: tuple, says: str) -> None:
    model = model_class(4, 8, 3)
    x = torch.randn(5, 4)
    edges = torch.randint(0, 5, shape)
    name = model_class.__name__
    with pytest.raises(GraphDataError, match=rf"{name}\(x, edge_index\): edge_index must have "
                       rf"shape \[2, E\] \(source row, target row\), {says}"):  # fmt: skip
        model(x, edges)
    with pytest.raises(GraphDataError, match=r"must have shape \[2, E\]"):
        model.attention_weights(x, edges)
    if shape == (7, 2):  # the hint's fix works
        assert model(x, edges.t()).shape == (5, 3)
