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
    run = Run(
        logdir=str(folder),
        config={"lr": lr, "seed": 0, "max_epochs": 2, "recipe": labkit.Recipe().to_dict()},
    )
    run.add_event({"type": "start", "t": t0})
    run.add_event(
        {
            "type": "steps",
            "steps": [
                {"step": i + 1, "epoch": i // 2, "loss": v, "t": t0 + 0.5 * (i + 1)}
                for i, v in enumerate(losses)
            ],
        }
    )
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
    assert view.curves["b"]["loss"] == {
        "x": [1, 2, 3, 4],
        "t": [0.5, 1.0, 1.5, 2.0],
        "y": [1.0, 0.95, 0.9, 0.85],
    }
    assert view.curves["a"]["val_loss"]["t"] == pytest.approx([1.1, 2.1])
    assert repr(view) == (
        "RunsView(runs=2, shown=2, metrics=['loss', 'val_loss'], x='step', "
        "smoothing=0.6, log=False)"
    )


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
    assert "text/html" not in bundle  # issue 37: a sanitizer would show it as source
    text = bundle["text/plain"]
    assert "best val_loss" in text and "0.85" in text and "ranked by best val_loss" in text
    png = base64.b64decode(bundle["image/png"])
    assert png.startswith(b"\x89PNG") and len(png) > 2000
    assert bundle["image/svg+xml"].lstrip().startswith("<?xml")
    assert "application/vnd.labkit.view+json" in bundle


def _ranked(folder: Path, n: int) -> list[float]:
    """``n`` runs named r00.. whose best val_loss is not in name order; their bests."""
    bests = [0.5 + ((7 * i) % n) / (2 * n) for i in range(n)]
    for i, best in enumerate(bests):
        _run(folder / f"r{i:02d}", 0.01 * (i + 1), [1.0, best + 0.1, best + 0.05, best])
    return bests


def test_the_best_runs_by_the_ranking_metric_are_drawn_first(tmp_path: Path) -> None:
    """Issue 37 item 5: the best ten by best val_loss, not the first ten by name, and the
    view says so."""
    bests = _ranked(tmp_path, 24)
    view = runs(tmp_path).show()
    order = sorted(range(24), key=lambda i: bests[i])
    assert view.selected == [f"r{i:02d}" for i in order[:10]]
    assert view.selected != [f"r{i:02d}" for i in range(10)]  # not the order by name
    assert view.rank_by == "val_loss"
    assert view.rank_note.startswith(
        "drawn: the best 10 of 24 runs, ranked by best val_loss (lower is better)"
    )
    top3 = RunsView(runs(tmp_path), rank_by="loss", top=3)
    assert top3.selected == [f"r{i:02d}" for i in order[:3]]  # loss ends at the same best
    assert "best 3 of 24" in top3.rank_note
    with pytest.raises(ValueError, match=r"rank_by: no run has the metric 'val_acc'"):
        RunsView(runs(tmp_path), rank_by="val_acc")
    with pytest.raises(ValueError, match=r"top is how many runs are drawn first"):
        RunsView(runs(tmp_path), top=0)


def test_higher_is_better_is_read_from_the_runs(tmp_path: Path) -> None:
    for name, acc in (("a", [0.5, 0.6, 0.7]), ("b", [0.5, 0.9, 0.8]), ("c", [0.4, 0.5, 0.55])):
        run = Run(logdir=str(tmp_path / name), config={"lr": 0.1})
        run.add_event({"type": "start", "t": 0.0})
        for e, v in enumerate(acc):
            run.add_event({"type": "epoch", "epoch": e, "step": e + 1, "val_acc": v, "t": 1.0 + e})
        run.add_event({"type": "end", "status": "finished", "t": 9.0})
        run.save()
    view = RunsView(runs(tmp_path), top=2)
    assert view.rank_by == "val_acc" and view.selected == ["b", "a"]
    assert "(higher is better)" in view.rank_note


def test_run_colours_do_not_repeat_before_20_then_dash() -> None:
    from labkit.views.runs import RUN_COLORS, run_style

    assert len({run_style(i)[0] for i in range(20)}) == 20 == len(RUN_COLORS)
    assert all(run_style(i)[1] is None for i in range(20))
    assert run_style(20)[0] == run_style(0)[0] and run_style(20)[1]
    assert run_style(40)[1] != run_style(20)[1]


def test_the_picture_has_one_legend_entry_per_run(root: Path) -> None:
    view = runs(root).show(metrics=["loss"])  # smoothed and raw curves of a and b
    fig = view.to_figure()
    labels = [t.get_text() for leg in fig.legends for t in leg.get_texts()]
    assert labels == ["a", "b"]
    lines = fig.axes[0].get_lines()
    assert len(lines) == 4 and sum(line.get_alpha() == 0.3 for line in lines) == 2


def test_dashboard_sends_wall_time_per_point() -> None:
    dash = Dashboard(throttle=0.0)
    dash.push({"type": "start", "total_steps": 4, "max_epochs": 2, "world_size": 1, "t": 100.0})
    dash.push(
        {
            "type": "steps",
            "memory": 0,
            "steps": [
                {
                    "step": s,
                    "epoch": 0,
                    "loss": 1.0 / s,
                    "compute_time": 0.01,
                    "data_time": 0.0,
                    "samples": 8,
                    "t": 100.0 + s,
                }
                for s in (1, 2)
            ],
        }
    )
    dash.push({"type": "epoch", "epoch": 0, "step": 2, "val_loss": 0.4, "t": 102.5})
    dash.flush()
    assert dash.series_t == {"train_loss": [1.0, 2.0], "val_loss": [2.5]}
    for k, ts in dash.series_t.items():
        assert len(ts) == len(dash.series[k]["x"])


def test_dashboard_wall_time_follows_downsampling() -> None:
    dash = Dashboard(throttle=0.0, max_points=10)
    dash.push({"type": "start", "t": 0.0})
    dash.push(
        {
            "type": "steps",
            "memory": 0,
            "steps": [
                {
                    "step": s,
                    "epoch": 0,
                    "loss": 1.0,
                    "compute_time": 0.0,
                    "data_time": 0.0,
                    "samples": 1,
                    "t": 2.0 * s,
                }
                for s in range(1, 101)
            ],
        }
    )
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
    first = labkit.Lab(
        torch.nn.Linear(4, 1), data, loss=F.mse_loss, batch_size=8, logdir=tmp_path / "first"
    )
    run = first.fit(max_epochs=1, dashboard=False, **kw)
    second = labkit.Lab(
        torch.nn.Linear(4, 1), data, loss=F.mse_loss, batch_size=8, logdir=tmp_path / "second"
    )
    second.fit(max_epochs=1, dashboard=True, **kw)
    earlier = second.dashboard.earlier
    assert list(earlier) == ["first"]
    assert earlier["first"]["train_loss"]["y"] == run.losses
    assert "val_loss" in earlier["first"]
