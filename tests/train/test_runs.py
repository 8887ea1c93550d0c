"""labkit.runs: several fits' records as plain data (issue 30, item 3)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import TensorDataset

import labkit
from labkit.train.run import Run
from labkit.train.run_table import SERIES_FILE, Runs, minmax_downsample, read_series, runs

FIT = {"dashboard": False, "launch": "inline", "trainer_kwargs": {"enable_progress_bar": False}}


def _fit(logdir: Path, lr: float, epochs: int = 2) -> Run:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(48, 4, generator=g)
    y = x.sum(1, keepdim=True)
    torch.manual_seed(0)
    lab = labkit.Lab(
        torch.nn.Linear(4, 1),
        (TensorDataset(x, y), TensorDataset(x[:16], y[:16])),
        loss=F.mse_loss,
        optimizer="sgd",
        lr=lr,
        batch_size=8,
        logdir=logdir,
    )
    return lab.fit(max_epochs=epochs, **FIT)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("runs")
    _fit(base / "slow", 0.01)
    _fit(base / "fast", 0.05, epochs=3)
    return base


def test_rows_agree_with_each_run_record(root: Path) -> None:
    rs = labkit.runs(root)
    assert isinstance(rs, Runs) and [r.name for r in rs] == ["fast", "slow"]
    for row in rs:
        record = Run.load(root / row.name)
        assert row.status == record.status == "finished"
        assert row.steps == len(record.steps) and row.epochs == len(record.epochs)
        assert row.last["loss"] == record.losses[-1]
        assert row.best["loss"] == min(record.losses)
        assert row.best["val_loss"] == min(e["val_loss"] for e in record.epochs)
        assert row.wall_time == pytest.approx(record.ended - record.started)
        assert row.options["lr"] == record.config["lr"] and "recipe" not in row.options
        assert row.recipe == labkit.Recipe().to_dict()
        assert row.versions["torch"] == torch.__version__ and "lightning" in row.versions
        curve = rs.curves[row.name]["loss"]
        assert curve["y"] == record.losses and curve["x"] == [s["step"] for s in record.steps]
        assert curve["t"] == sorted(curve["t"]) and 0 <= curve["t"][0] <= row.wall_time
        assert sorted(rs.curves[row.name]) == ["loss", "train_loss", "val_loss"]
    assert rs.metrics == ["loss", "train_loss", "val_loss"]


def test_summary_pandas_and_repr(root: Path) -> None:
    rs = runs([root / "slow", root / "fast" / "run.json"], metrics=["loss"])
    text = rs.summary()
    assert text.splitlines()[0].split() == [
        "run",
        "source",
        "status",
        "steps",
        "wall",
        "loss",
        "lr",
        "recipe",
    ]
    assert "fast" in text and "slow" in text and text.endswith("2 run(s)")
    df = rs.to_pandas()
    assert list(df["name"]) == ["fast", "slow"] and list(df["lr"]) == [0.05, 0.01]
    assert {"last_loss", "best_loss", "recipe.precision", "torch_version"} <= set(df.columns)
    assert set(rs.curves["fast"]) == {"loss"}
    assert repr(rs) == "Runs(2 runs: 2 finished; metrics=['loss'])"


def test_run_json_alone_reads_the_same(root: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "fast"
    shutil.copytree(root / "fast", copy)
    (copy / SERIES_FILE).unlink()
    a, b = runs(root / "fast"), runs(copy)
    assert a.curves == b.curves
    assert a.rows[0].last == b.rows[0].last and a.rows[0].steps == b.rows[0].steps


def test_a_corrupt_series_file_is_skipped_with_the_reason(root: Path, tmp_path: Path) -> None:
    import shutil

    shutil.copytree(root / "slow", tmp_path / "slow")
    shutil.copytree(root / "fast", tmp_path / "fast")
    (tmp_path / "fast" / SERIES_FILE).write_bytes(b"not a series file")
    rs = runs(tmp_path)
    assert [r.name for r in rs] == ["slow"]
    assert (
        len(rs.skipped) == 1
        and f"{tmp_path / 'fast' / SERIES_FILE}: not a labkit run" in rs.skipped[0]
    )
    with pytest.raises(labkit.train.run_table.RunsError, match="no such run folder"):
        runs(tmp_path / "missing")


def test_minmax_downsampling_keeps_spikes_dips_and_ends() -> None:
    rng = np.random.default_rng(0)
    y = rng.normal(size=100_000)
    y[31_337], y[77_001], y[5] = 50.0, -40.0, math.nan
    x = np.arange(len(y), dtype=np.float64)
    xs, ys = minmax_downsample(x, y, 2000)
    assert len(xs) <= 2002 and np.all(np.diff(xs) > 0)
    assert ys.max() == 50.0 and ys.min() == -40.0
    assert 31_337 in xs and 77_001 in xs and xs[0] == 0 and xs[-1] == 99_999
    bucket = 100_000 // 1000
    for b in (0, 313, 999):  # each bucket's own min and max are among the points kept
        seg = y[b * bucket : (b + 1) * bucket]
        kept = ys[(xs >= b * bucket) & (xs < (b + 1) * bucket)]
        assert np.nanmin(seg) in kept and np.nanmax(seg) in kept
    same = minmax_downsample(x[:50], y[:50], 2000)
    assert len(same[0]) == 49  # short: only the NaN left out


def test_series_file_round_trips_the_steps(root: Path) -> None:
    meta, cols = read_series(root / "slow")
    record = Run.load(root / "slow")
    assert "steps" not in meta and meta["n_steps"] == len(record.steps)
    assert meta["config"] == record.config
    for key in ("step", "loss", "compute_time", "t"):
        assert cols[key].tolist() == [s[key] for s in record.steps]
    assert json.loads((root / "slow" / "run.json").read_text())["steps"] == record.steps


def test_earlier_runs_beside_a_logdir_for_the_dashboard(root: Path, tmp_path: Path) -> None:
    from labkit.train.run_table import earlier_runs

    got = earlier_runs(root / "slow")
    assert list(got) == ["fast"]  # the other finished run of the root, not the fit's own
    assert sorted(got["fast"]) == ["train_loss", "val_loss"]
    assert got["fast"]["train_loss"]["y"] == Run.load(root / "fast").losses
    assert earlier_runs(tmp_path / "nothing" / "here") == {}
