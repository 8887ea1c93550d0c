"""Fault table, no silent no-ops (issue 35, item 6): a checkpoint pattern that matches no
module is a RecipeError naming the nearest module paths, before any step; a dataset of
dict batches fitted without ``step=`` has the fit's notes (and run.json) name which keys
went to the model, which one is the target, and which were left out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import Dataset

import labkit
from labkit.optimize import Recipe, RecipeError
from tests.faults._lab import FIT, Counting, data, lab


class Blocks(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.blocks = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return self.blocks(x)


@pytest.mark.parametrize("pattern", ["no.such.*", "blocks.3", "Linaer"])
def test_a_checkpoint_pattern_matching_nothing_is_refused_naming_near_paths(
    tmp_path: Path, pattern: str
) -> None:
    model = Blocks()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    the_lab = lab(tmp_path, model, recipe=Recipe(checkpoint=(pattern,)))
    with pytest.raises(RecipeError) as err:
        the_lab.fit(max_epochs=1, **FIT)
    msg = str(err.value)
    assert f"no module matches {pattern!r}" in msg
    assert "this model's paths look like: blocks (Sequential), blocks.0 (Linear)" in msg
    if pattern != "no.such.*":  # a near miss names what was meant
        near = msg.split("(nearest: ")[1].split(")")[0].split(", ")
        assert {"blocks.3": "blocks.0", "Linaer": "Linear"}[pattern] in near
    assert model.calls == 0
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    assert not (tmp_path / "checkpoints" / "last.ckpt").exists()


class Dicts(Dataset):
    """Items as dicts, as a tokenizer's or a collate_fn's output comes."""

    def __init__(self, keys: tuple[str, ...]) -> None:
        g = torch.Generator().manual_seed(1)
        self.x = torch.randn(16, 4, generator=g)
        self.keys = keys

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        values = {
            "x": self.x[i],
            "features": self.x[i],
            "mask": torch.ones(4),
            "y": self.x[i].sum(0, keepdim=True),
            "id": torch.tensor(i),
        }
        return {k: values[k] for k in self.keys}


class Keywords(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(4, 1)

    def forward(self, features: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.fc(features * mask)


class OwnLoss(Keywords):
    def forward(
        self,
        features: torch.Tensor,
        mask: torch.Tensor,  # type: ignore[override]
        y: torch.Tensor,
    ) -> dict[str, torch.Tensor]:
        pred = super().forward(features, mask)
        return {"loss": F.mse_loss(pred, y), "pred": pred}


def _note(run: labkit.Run) -> str:
    (note,) = [n for n in run.notes if n.startswith("the batch is a dict")]
    saved = json.loads((Path(run.logdir) / "run.json").read_text())["notes"]
    assert note in saved  # kept with the run, not only in memory
    return note


def test_a_dict_batch_with_x_names_the_keys_left_out(tmp_path: Path) -> None:
    run = lab(tmp_path, Counting(), Dicts(("x", "y", "mask", "id"))).fit(max_epochs=1, **FIT)
    assert run.status == "finished", run.error
    assert _note(run) == (
        "the batch is a dict with keys x, y, mask, id: batch['x'] went to the model as its "
        "input and batch['y'] to the loss mse_loss(output, target) as the target; not used: "
        "mask, id (pass step=lambda net, batch: (net(...), target) to Lab to use them)"
    )


def test_a_dict_batch_without_x_goes_in_as_keywords(tmp_path: Path) -> None:
    run = lab(tmp_path, Keywords(), Dicts(("features", "mask", "y"))).fit(max_epochs=1, **FIT)
    assert run.status == "finished", run.error
    assert _note(run) == (
        "the batch is a dict with keys features, mask, y: features, mask went to the model as "
        "keyword arguments and batch['y'] to the loss mse_loss(output, target) as the target"
    )


def test_a_dict_batch_with_the_models_own_loss(tmp_path: Path) -> None:
    the_lab = labkit.Lab(
        OwnLoss(),
        Dicts(("features", "mask", "y")),
        loss="model",
        optimizer="sgd",
        lr=0.01,
        batch_size=8,
        logdir=tmp_path,
    )
    run = the_lab.fit(max_epochs=1, **FIT)
    assert run.status == "finished", run.error
    assert _note(run) == (
        "the batch is a dict with keys features, mask, y: all of them went to the model as "
        "keyword arguments (model(**batch)); the loss is the one the model returned; "
        "batch['y'] is the target metrics get"
    )


def test_pairs_and_a_step_of_the_users_get_no_dict_note(tmp_path: Path) -> None:
    run = lab(tmp_path / "pairs", Counting(), data()).fit(max_epochs=1, **FIT)
    assert run.status == "finished" and not any("is a dict" in n for n in run.notes)
    own = lab(
        tmp_path / "own",
        Counting(),
        Dicts(("x", "y", "mask")),
        step=lambda net, b: (net(b["x"] * b["mask"]), b["y"]),
    )
    run = own.fit(max_epochs=1, **FIT)
    assert run.status == "finished" and not any("is a dict" in n for n in run.notes)


def test_a_dict_batch_without_a_target_is_refused_naming_its_keys(tmp_path: Path) -> None:
    model = Counting()
    with pytest.raises(
        TypeError,
        match=r"cannot find the target in a dict batch with keys "
        r"\['mask', 'x'\]",
    ):
        lab(tmp_path, model, Dicts(("x", "mask"))).fit(max_epochs=1, **FIT)
    assert model.calls == 0
