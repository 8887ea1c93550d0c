"""Fault table, verify: nothing of the user's is written (issue 35, item 1).

A Lab notebook that fits into ``logdir="runs/exp"`` had been run for 2 epochs; ``labkit
promote nb.ipynb --verify -p epochs=1`` reported ``identical`` and left the user's
``runs/exp`` holding the verify's 1-epoch run: both sides ran where they would write.
Now each side runs in a working copy of the notebook's folder, and every file the user had
is byte for byte as before.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from labkit.cli import main
from labkit.promote import promote
from labkit.promote.execute import run_notebook
from labkit.train import Run
from tests.promote._notebooks import code, numbered, write_notebook

CELLS = [
    "import torch\ntorch.manual_seed(0)\nimport labkit\nfrom torch import nn",
    "model = nn.Linear(4, 1)\n"
    "data = torch.utils.data.TensorDataset(torch.randn(8, 4), torch.randn(8, 1))",
    "lab = labkit.Lab(model, data, loss=nn.functional.mse_loss, batch_size=4)",
    'run = lab.fit(max_epochs=epochs, seed=0, logdir="runs/exp", dashboard=False)',
    "print(f'last loss {run.losses[-1]:.6f}')",
]


def _tree(folder: Path) -> dict[str, str]:
    """Every entry under ``folder``: a file's sha256, a link's target, ``dir`` for a folder."""
    out = {}
    for path in sorted(folder.rglob("*")):
        name = str(path.relative_to(folder))
        if path.is_symlink():
            out[name] = "-> " + str(path.readlink())
        elif path.is_dir():
            out[name] = "dir"
        else:
            out[name] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


@pytest.mark.slow
def test_verify_leaves_every_file_of_the_users_folder_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    nb = write_notebook(
        folder / "train.ipynb",
        [code("epochs = 2", 1, tags=("parameters",)), *numbered(*CELLS)],
    )
    # the user's earlier run, 2 epochs, in runs/exp next to the notebook
    run_notebook(nb, {"epochs": 2}, tmp_path / "earlier.run.ipynb")
    records = list((folder / "runs" / "exp").rglob("run.json"))
    assert records, "the earlier run wrote no run.json"
    promote(nb)  # the script the user keeps, written before verify
    before = _tree(folder)

    status = main(["promote", str(nb), "--force", "--verify", "-p", "epochs=1", "-q"])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "verify: identical" in out
    after = _tree(folder)
    assert after == before, {
        k: (before.get(k), after.get(k))
        for k in before.keys() | after
        if before.get(k) != after.get(k)
    }
    assert f"verify: both ran in copies of {folder} (" in out  # where they wrote
    for record in records:  # the earlier run is still the 2-epoch one
        assert Run.load(record).config["max_epochs"] == 2


def test_a_folder_too_big_to_copy_is_refused_naming_its_largest_entries(tmp_path: Path) -> None:
    from labkit.promote._working_copy import CopyError, working_copy

    folder = tmp_path / "project"
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "train.bin").write_bytes(b"\0" * 4096)
    (folder / "train.ipynb").write_text("{}")
    (folder / ".git").mkdir()
    (folder / ".git" / "pack").write_bytes(b"\0" * 8192)  # left out of the copy
    with pytest.raises(CopyError, match=r"largest data \(4\.00 KiB\), train\.ipynb \(2 B\)"):
        working_copy(folder, tmp_path / "copy", limit=4000)
    assert not (tmp_path / "copy").exists()
    copy = working_copy(folder, tmp_path / "copy", limit=5000)
    assert (copy / "data" / "train.bin").stat().st_size == 4096
    assert not (copy / ".git").exists()
