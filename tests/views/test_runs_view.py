"""RunsView (labkit.runs(...).show()) and the dashboard's wall-time axis (issue 30, item 3)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

import labkit
from labkit.train.run import Run
from labkit.train.run_table import runs
from labkit.views.dashboard import Dashboard
from labkit.views.runs import RunsView


def _run(folder: Path, lr: float, losses: list[float], *, t0: float = 1000.0) -> None:
    run = Run(logdir=str(folder), config={"lr": lr, "seed": 0, "max_epochs": 2,
                                          "recipe": labkit.Recipe().to_dict()})  # fmt: skip
    run.add_event({"type": "start", "t": t0})
    run.add_event({"type": "steps", "steps": [
        {"step": i + 1, "epoch": i // 2, "loss": v, "t": t0 + 0.5 * (i + 1)}
        for i, v in enumerate(losses)]})  # fmt: skip
    run.add_event({"type": "epoch", "epoch": 0, "step": 2, "val_loss": losses[1], "t": t0 + 1.1})
    run.add_event({"type": "epoch", "epoch": 1, "step": 4, "val_loss": losses[3], "t": t0 + 2.1})
    run.add_event({"type": "end", "status": "finished", "t": t0 + 2.5})
    run.save()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    _run(tmp_path / "a", 0.1, [1.0, 0.8, 0.6, 0.5])
    _run(tmp_path / "b", 0.01, [1.0, 0.95, 0.9, 0.85], t0=5000.0)
    return tmp_path


def test_the_view_sends_the_runs_rows_and_curves(root: Path) -> None:
    rs = runs(root)
    view = rs.show()
    assert isinstance(view, RunsView)
    assert [r["name"] for r in view.rows] == ["a", "b"] and view.selected == ["a", "b"]
    assert view.metrics == ["loss", "val_loss"] and view.all_metrics == ["loss", "val_loss"]
    assert view.rows[0]["hparams"] == {"lr": 0.1, "seed": 0, "max_epochs": 2}
    assert view.rows[1]["last"] == {"loss": 0.85, "val_loss": 0.85}
    assert view.rows[0]["best"]["loss"] == 0.5 and view.rows[0]["wall_time"] == 2.5
    assert view.curves["b"]["loss"] == {"x": [1, 2, 3, 4], "t": [0.5, 1.0, 1.5, 2.0],
                                        "y": [1.0, 0.95, 0.9, 0.85]}  # fmt: skip
    assert view.curves["a"]["val_loss"]["t"] == pytest.approx([1.1, 2.1])
    assert repr(view) == ("RunsView(runs=2, shown=2, metrics=['loss', 'val_loss'], x='step', "
                          "smoothing=0.6, log=False)")  # fmt: skip


def test_choices_and_bad_arguments(root: Path) -> None:
    rs = runs(root)
    view = rs.show(metrics=["val_loss"], runs=["b"], x="time")
    assert view.metrics == ["val_loss"] and view.selected == ["b"] and view.x_axis == "time"
    with pytest.raises(ValueError, match=r"no run named 'c'; runs: \['a', 'b'\]"):
        rs.show(runs=["c"])
    with pytest.raises(ValueError, match=r"no run has the metric 'val_acc'"):
        rs.show(metrics=["val_acc"])
    with pytest.raises(ValueError, match=r"x must be 'step' or 'time'"):
        rs.show(x="epoch")


def test_the_final_state_picture_holds_the_table_and_the_curves(root: Path) -> None:
    view = runs(root).show(x="time")
    bundle, _ = view._repr_mimebundle_()
    html = bundle["text/html"]
    assert "lk-runs-final" in html and "best val_loss" in html and "0.85" in html
    png = base64.b64decode(bundle["image/png"])
    assert png.startswith(b"\x89PNG") and len(png) > 2000
    assert "application/vnd.labkit.view+json" in bundle


def test_dashboard_sends_wall_time_per_point() -> None:
    dash = Dashboard(throttle=0.0)
    dash.push({"type": "start", "total_steps": 4, "max_epochs": 2, "world_size": 1, "t": 100.0})
    dash.push({"type": "steps", "memory": 0, "steps": [
        {"step": s, "epoch": 0, "loss": 1.0 / s, "compute_time": 0.01, "data_time": 0.0,
         "samples": 8, "t": 100.0 + s} for s in (1, 2)]})  # fmt: skip
    dash.push({"type": "epoch", "epoch": 0, "step": 2, "val_loss": 0.4, "t": 102.5})
    dash.flush()
    assert dash.series_t == {"train_loss": [1.0, 2.0], "val_loss": [2.5]}
    for k, ts in dash.series_t.items():
        assert len(ts) == len(dash.series[k]["x"])


def test_dashboard_wall_time_follows_downsampling() -> None:
    dash = Dashboard(throttle=0.0, max_points=10)
    dash.push({"type": "start", "t": 0.0})
    dash.push({"type": "steps", "memory": 0, "steps": [
        {"step": s, "epoch": 0, "loss": 1.0, "compute_time": 0.0, "data_time": 0.0,
         "samples": 1, "t": 2.0 * s} for s in range(1, 101)]})  # fmt: skip
    dash.flush()
    xs, ts = dash.series["train_loss"]["x"], dash.series_t["train_loss"]
    assert len(ts) == len(xs) == 10 and ts == [2.0 * x for x in xs]  # the same points


def test_the_live_dashboard_overlays_earlier_runs_of_the_same_root(tmp_path: Path) -> None:
    import torch
    import torch.nn.functional as F
    from torch.utils.data import TensorDataset

    x = torch.randn(16, 4)
    data = (
        TensorDataset(x, x.sum(1, keepdim=True)),
        TensorDataset(x[:8], x[:8].sum(1, keepdim=True)),
    )
    kw = {"launch": "inline", "trainer_kwargs": {"enable_progress_bar": False}}
    first = labkit.Lab(torch.nn.Linear(4, 1), data, loss=F.mse_loss, batch_size=8,
                       logdir=tmp_path / "first")  # fmt: skip
    run = first.fit(max_epochs=1, dashboard=False, **kw)
    second = labkit.Lab(torch.nn.Linear(4, 1), data, loss=F.mse_loss, batch_size=8,
                        logdir=tmp_path / "second")  # fmt: skip
    second.fit(max_epochs=1, dashboard=True, **kw)
    earlier = second.dashboard.earlier
    assert list(earlier) == ["first"]
    assert earlier["first"]["train_loss"]["y"] == run.losses
    assert "val_loss" in earlier["first"]
