from __future__ import annotations

import time

import pytest

from labkit.train.run import Run
from labkit.views.dashboard import Dashboard, downsample


def _steps(a: int, b: int) -> dict:
    return {
        "type": "steps",
        "memory": 1024,
        "steps": [
            {
                "step": s,
                "epoch": 0,
                "loss": 1.0 / s,
                "compute_time": 0.01,
                "data_time": 0.002,
                "samples": 32,
            }
            for s in range(a, b)
        ],
    }


def test_push_is_throttled_and_ends_on_latest():
    dash = Dashboard(throttle=0.2)
    dash.push({"type": "start", "total_steps": 1000, "max_epochs": 1, "world_size": 2})
    for i in range(1, 1000, 10):
        dash.push(_steps(i, i + 10))
    assert dash.sends <= 2  # a thousand steps in a burst: the first send, maybe one timer send
    dash.flush()
    s = dash.stats
    assert s["step"] == 1000 and s["world_size"] == 2 and s["memory"] == 1024
    assert abs(s["samples_per_s"] - 2 * 32 / 0.012) < 1e-6
    assert len(dash.series["train_loss"]["x"]) == 400 and dash.series["train_loss"]["x"][-1] == 1000


def test_epoch_curves_status_and_repr():
    dash = Dashboard(throttle=0.0)
    dash.push({"type": "start", "total_steps": 4, "max_epochs": 2, "world_size": 1})
    dash.push(_steps(1, 3))
    dash.push({"type": "epoch", "epoch": 0, "step": 2, "val_loss": 0.4, "val_acc": 0.9})
    dash.push({"type": "end", "status": "finished"})
    dash.flush()
    assert dash.series["val_loss"] == {"x": [2], "y": [0.4]} and dash.status == "finished"
    assert repr(dash) == "Dashboard(status='finished', step=2/4, loss=0.5, throttle=0.0, updates=4)"
    run = Run(status="failed", error="boom", notes=["one process"])
    dash.finish(run)
    assert dash.error == "boom" and dash.notes == ["one process"]


def test_stop_button_calls_on_stop():
    calls = []
    dash = Dashboard(on_stop=lambda: calls.append(time.time()))
    dash.stop_requested = True  # what the browser's Stop button sets
    assert len(calls) == 1


def test_downsample():
    xs, ys = downsample(list(range(10)), [float(i) for i in range(10)], 5)
    assert xs == [1, 3, 5, 7, 9] and ys == [0.5, 2.5, 4.5, 6.5, 8.5]
    assert downsample([1], [2.0], 5) == ([1], [2.0])


def test_stop_file_is_registered_until_the_fit_ends(tmp_path, monkeypatch):
    from labkit import _stops as stops

    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    calls = []
    dash = Dashboard(on_stop=lambda: calls.append(1), stop_file=tmp_path / "STOP")
    assert dash.stop_token and stops.request(dash.stop_token) == tmp_path / "STOP"
    dash.push({"type": "start", "total_steps": 30, "max_epochs": 3, "world_size": 1})
    dash.push(_steps(1, 4))  # stopped in the first epoch
    dash.push({"type": "end", "status": "stopped"})
    dash.finish(Run(status="stopped"))
    assert dash.stats["epoch"] == 1 and dash.status == "stopped"
    assert not (tmp_path / "runtime" / "labkit-stop" / dash.stop_token).exists()
    # a foreground fit's kernel reads the click only after the cell: nothing to stop then
    dash.stop_requested = True
    assert calls == [] and dash.status == "stopped"


EARLIER = {
    "lr-0.1": {"train_loss": {"x": [1, 2], "t": [0.1, 0.2], "y": [1.0, 0.5]}},
    "lr-0.01": {"train_loss": {"x": [1, 2], "t": [0.1, 0.2], "y": [0.9, 0.8]}},
}


@pytest.mark.parametrize(
    ("compare_with", "runs", "on"),
    [
        (None, ["lr-0.1", "lr-0.01"], False),
        (False, ["lr-0.1", "lr-0.01"], False),
        (True, ["lr-0.1", "lr-0.01"], True),
        (["lr-0.01"], ["lr-0.01"], True),
        ("lr-0.1", ["lr-0.1"], True),
    ],
)
def test_earlier_runs_are_offered_and_overlaid_only_when_asked(compare_with, runs, on):
    dash = Dashboard(earlier=EARLIER, compare_with=compare_with)
    assert list(dash.earlier) == runs and dash.compare is on


def test_compare_with_an_unknown_run_names_the_earlier_ones():
    with pytest.raises(ValueError, match=r"\['lr-1'\].*lr-0.1, lr-0.01"):
        Dashboard(earlier=EARLIER, compare_with=["lr-1"])
    with pytest.raises(ValueError, match="no finished or stopped run"):
        Dashboard(compare_with="lr-1")


def test_a_reattach_request_is_answered_while_the_fit_runs(tmp_path, monkeypatch):
    """The page's request (through the server) reaches the dashboard's thread, which sends
    the widget again; the token is offered in the output only while the fit runs."""
    from labkit import _reattach
    from labkit import _stops as stops
    from labkit.views._keep import LABKIT_MIME

    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    dash = Dashboard(stop_file=tmp_path / "STOP")
    dash.push({"type": "start", "total_steps": 30, "max_epochs": 3, "world_size": 1})
    dash.push(_steps(1, 4))
    dash.flush()
    sent = []  # what the widget's comm publishes (no kernel here: comm's DummyComm)

    def publish(kind, data=None, metadata=None, buffers=None, **keys):
        if kind == "comm_open":  # (throttled updates are comm_msg)
            sent.append((kind, data, metadata, keys))

    monkeypatch.setattr(dash.comm, "publish_msg", publish)
    layout = []  # the Layout widget its state names ("IPY_MODEL_..."), sent again first
    monkeypatch.setattr(dash.layout.comm, "publish_msg", lambda kind, *a, **k: layout.append(kind))
    data, _ = dash._repr_mimebundle_()
    assert data[LABKIT_MIME]["reattach"] == dash.stop_token
    asked = time.monotonic()
    _reattach.request(dash.stop_token)
    deadline = asked + 10
    while not sent and time.monotonic() < deadline:
        time.sleep(0.02)
    assert sent and not _reattach.take(dash.stop_token), "the request was not taken"
    kind, data, metadata, keys = sent[0]
    # ipywidgets' comm_open: the same model id, the current state (steps 1-3 included)
    assert kind == "comm_open" and keys["target_name"] == "jupyter.widget"
    assert metadata["version"].startswith("2.") and data["state"]["stats"]["step"] == 3
    assert data["state"]["_esm"] and dash.comm.comm_id == dash.model_id
    assert (
        layout == ["comm_open"] and data["state"]["layout"] == f"IPY_MODEL_{dash.layout.model_id}"
    )
    dash.finish(Run(status="stopped"))
    data, _ = dash._repr_mimebundle_()
    assert "reattach" not in data[LABKIT_MIME]
    with pytest.raises(stops.UnknownStopToken):  # the fit ended: its kernel is free again
        _reattach.request(dash.stop_token)


def test_reattach_without_a_kernel_sends_nothing():
    dash = Dashboard()
    dash.close()
    assert dash.reattach() is False


def test_watch_passes_compare_with_to_its_dashboard(tmp_path):
    """labkit.watch(compare_with=...) reaches the dashboard; by default the earlier runs of
    the logdir family are offered but not overlaid."""
    import torch

    import labkit

    torch.manual_seed(0)
    model = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def loop(name: str, **options) -> Dashboard | None:
        with labkit.watch(model, opt, logdir=tmp_path / name, **options) as run:
            for _ in range(3):
                opt.zero_grad()
                loss = model(torch.ones(4, 2)).pow(2).mean()
                loss.backward()
                opt.step()
                run.step(loss=loss)
            return run._live.session.dash

    assert loop("first", dashboard=False) is None
    plain = loop("second", dashboard=True)
    asked = loop("third", dashboard=True, compare_with=["first"])
    assert isinstance(plain, Dashboard) and isinstance(asked, Dashboard)
    assert plain.compare is False and sorted(plain.earlier) == ["first"]
    assert asked.compare is True and sorted(asked.earlier) == ["first"]
    with pytest.raises(ValueError, match="compare_with names"):
        loop("fourth", dashboard=True, compare_with="nope")
