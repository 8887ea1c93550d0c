"""Lab in parts (issue 40 item 2): Lab delegates each concern to one small part, keeps its
public API, and its parts follow it through a pickle (the subprocess launch)."""

from __future__ import annotations

import ast
import pickle
from pathlib import Path

import torch
import torch.nn.functional as F

import labkit
from labkit.promote._lab_methods import lab_exploration_methods
from labkit.train._lab_checkpoint import LabCheckpoints
from labkit.train._lab_data import LabData
from labkit.train._lab_events import LabEvents
from labkit.train._lab_launch import LabLaunch
from labkit.train._lab_optim import LabBinding
from tests.train._helpers import datasets, mlp

TRAIN = Path(labkit.__file__).parent / "train"
PARTS = {
    "_loaders": LabData,
    "_binding": LabBinding,
    "_checkpoints": LabCheckpoints,
    "_launcher": LabLaunch,
    "_events": LabEvents,
}


def _class_lines(path: Path) -> dict[str, int]:
    tree = ast.parse(path.read_text())
    return {
        n.name: (n.end_lineno or n.lineno) - n.lineno + 1
        for n in tree.body
        if isinstance(n, ast.ClassDef)
    }


def test_each_part_is_small_and_lab_is_under_450_lines() -> None:
    for path in sorted(TRAIN.glob("_lab_*.py")):
        assert len(path.read_text().splitlines()) <= 250, path.name
    assert _class_lines(TRAIN / "lab.py")["Lab"] <= 450


def test_the_parts_read_the_lab_and_follow_it_through_a_pickle(tmp_path: Path) -> None:
    lab = labkit.Lab(
        mlp(), datasets(32), loss=F.cross_entropy, recipe={"precision": "32"}, logdir=tmp_path
    )
    for name, kind in PARTS.items():
        part = getattr(lab, name)
        assert isinstance(part, kind) and part.lab is lab
    copy = pickle.loads(pickle.dumps(lab))
    for name, kind in PARTS.items():
        assert isinstance(getattr(copy, name), kind) and getattr(copy, name).lab is copy
    assert copy.runs == [] and copy.dashboard is None and not copy._stop.is_set()
    assert copy.recipe == lab.recipe and isinstance(copy.recipe, labkit.Recipe)
    torch.testing.assert_close(copy.model.state_dict(), lab.model.state_dict())


def test_exploration_methods_are_still_read_from_lab_py() -> None:
    assert lab_exploration_methods() == {
        "check": None,
        "trace": None,
        "link": None,
        "lr_find": "apply",
        "scaling": None,
        "tensorboard": None,
    }
