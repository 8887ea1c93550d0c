"""Lab's exploration methods come from Lab itself (the @exploration marker)."""

from __future__ import annotations

from pathlib import Path

from labkit.promote import analyze, read_notebook
from labkit.promote._lab_methods import lab_exploration_methods
from labkit.train._exploration import MARK
from tests.promote._notebooks import numbered, write_notebook
from tests.promote.test_analyze import FIT, HEAD, LAB, MODEL


def test_static_read_matches_the_marks_on_lab():
    from labkit.train import Lab

    marked = {
        name: getattr(member, MARK)["unless"]
        for name, member in vars(Lab).items()
        if callable(member) and hasattr(member, MARK)
    }
    assert lab_exploration_methods() == marked
    assert {"trace", "lr_find", "tensorboard"} <= set(marked)
    assert "fit" not in marked and "load" not in marked
    for name in marked:  # every name is a real Lab method
        assert callable(getattr(Lab, name))


def test_exploration_calls_are_dropped_unless_they_change_the_lab(tmp_path: Path):
    cells = numbered(
        HEAD,
        MODEL,
        LAB,
        "lab.tensorboard()\nfinder = lab.lr_find()\nlab.lr_find(apply=True)\n"
        "lab.lr_find(apply=False)\nlab.load()",
        FIT,
    )
    roles = {
        s.source: s.role
        for s in analyze(read_notebook(write_notebook(tmp_path / "nb.ipynb", cells))).statements
    }
    assert roles["lab.tensorboard()"] == "explore"
    assert roles["finder = lab.lr_find()"] == "explore"
    assert roles["lab.lr_find(apply=False)"] == "explore"
    assert roles["lab.lr_find(apply=True)"] == "code"  # sets lab.lr: the script must too
    assert roles["lab.load()"] == "code"  # not marked: changes the weights
