"""Fault table, training: a loss that silently broadcasts and an empty loader are refused
before the first step, naming the shapes and the fix, or the loader."""

from __future__ import annotations

from pathlib import Path

import pytest
from torch.utils.data import TensorDataset

from labkit.train import ShapeCheckError
from tests.faults._lab import FIT, Counting, data, lab


def test_mse_between_n1_output_and_n_target_names_both_shapes_and_the_fix(tmp_path: Path) -> None:
    model = Counting()
    the_lab = lab(tmp_path, model, data(target_shape="[N]"))
    with pytest.raises(
        ShapeCheckError,
        match=r"mse_loss\(output, target\) got output "
        r"float32\[8, 1\] and target float32\[8\], which broadcast to \[8, 8\].*"
        r"mse_loss\(out\.squeeze\(-1\), y\)",
    ):
        the_lab.fit(max_epochs=1, **FIT)
    assert model.calls == 1  # the dry run's one batch, no training step
    assert the_lab.runs[-1].steps == []


@pytest.mark.parametrize("dry_run", [False, True])
@pytest.mark.parametrize("empty", ["train", "val"])
def test_empty_dataset_names_the_loader(tmp_path: Path, empty: str, dry_run: bool) -> None:
    full, none = data(), TensorDataset(*(t[:0] for t in data().tensors))
    model = Counting()
    the_lab = lab(tmp_path, model, (none, full) if empty == "train" else (full, none))
    with pytest.raises(
        ValueError,
        match=rf"the {empty} loader is empty: its TensorDataset has "
        r"0 samples \(batch_size=8\)",
    ):
        the_lab.fit(max_epochs=1, dry_run=dry_run, **FIT)
    assert model.calls == 0
    assert the_lab.runs[-1].status == "failed" and the_lab.runs[-1].steps == []
