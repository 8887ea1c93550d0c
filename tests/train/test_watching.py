"""labkit.watch on a plain loop: the record, Stop, the guard, bad input."""

from __future__ import annotations

import json
import threading
import time

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import labkit
from labkit.train import watching
from labkit.train._lock import LogdirBusyError
from labkit.train.guards import NonFiniteError
from labkit.train.run import Run, RunClosedError
from tests.train._helpers import mlp, tensors


def _loop(run, model, opt, x, y, steps, mine=None):
    for _ in range(steps):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if mine is not None:
            mine.append(loss.item())
        run.step(loss=loss, acc=(model(x).argmax(1) == y).float().mean())


def test_records_the_loops_own_losses_and_files(tmp_path):
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = tensors(32)
    mine: list[float] = []
    with labkit.watch(model, opt, logdir=tmp_path, dashboard=False, log_every=1) as run:
        _loop(run, model, opt, x, y, 12, mine)
        run.log(val_loss=torch.tensor(0.25))
    assert run.status == "finished" and run.error is None
    assert run.losses == mine  # step by step, as the loop read them
    assert [s["step"] for s in run.steps] == list(range(1, 13))
    assert all(0.0 <= s["acc"] <= 1.0 for s in run.steps)
    assert run.epochs[0]["val_loss"] == 0.25 and run.epochs[0]["step"] == 12
    assert run.source == "loop" and run.config["lr"] == 0.05
    assert run.config["optimizer"] == "SGD"
    assert Run.load(tmp_path) == run
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert events[0]["type"] == "start" and events[-1] == {**events[-1], "status": "finished"}
    assert list((tmp_path / "tensorboard").glob("events.out.tfevents.*"))
    assert not (tmp_path / ".labkit.lock").exists()
    row = labkit.runs(tmp_path)[0]
    assert row.source == "loop" and row.options["lr"] == 0.05


def _steps_events(logdir):
    lines = (logdir / "events.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["type"] == "steps"]


def test_reads_are_spaced_by_what_they_cost(tmp_path, monkeypatch):
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = tensors(32)
    # 0: every step read at once, whatever a read costs
    with labkit.watch(
        model, opt, logdir=tmp_path / "each", dashboard=False, flush_interval=0
    ) as run:
        _loop(run, model, opt, x, y, 6)
    assert [len(e["steps"]) for e in _steps_events(tmp_path / "each")] == [1] * 6
    # a read allowed almost no share of the time: the first, then none for FLUSH_MAX_S
    monkeypatch.setattr(watching, "FLUSH_SHARE", 1e-12)
    monkeypatch.setattr(watching, "FLUSH_MAX_S", 60.0)
    with labkit.watch(
        model, opt, logdir=tmp_path / "spaced", dashboard=False, flush_interval=1e-9
    ) as run:
        _loop(run, model, opt, x, y, 6)
    assert [len(e["steps"]) for e in _steps_events(tmp_path / "spaced")] == [1, 5]
    assert [s["step"] for s in run.steps] == list(range(1, 7))
    # ... but never more than FLUSH_MAX_S apart
    monkeypatch.setattr(watching, "FLUSH_MAX_S", 0.05)
    with labkit.watch(
        model, opt, logdir=tmp_path / "capped", dashboard=False, flush_interval=1e-9
    ) as run:
        for _ in range(3):
            _loop(run, model, opt, x, y, 1)
            time.sleep(0.06)
    assert [len(e["steps"]) for e in _steps_events(tmp_path / "capped")] == [1, 1, 1]


def test_stop_ends_the_block_as_stopped(tmp_path):
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = tensors(32)
    done = 0
    with labkit.watch(model, opt, logdir=tmp_path, dashboard=False) as run:
        for i in range(100):
            _loop(run, model, opt, x, y, 1)
            done += 1
            if i == 4:
                run.stop()  # what the dashboard's Stop does in this process
    # the step that saw the Stop is recorded, then its run.step raised: nothing lost
    assert done == 5 and run.status == "stopped" and len(run.steps) == 6
    with pytest.raises(RunClosedError, match="after the watched loop ended"):
        run.step(loss=torch.tensor(1.0))


def test_the_stop_file_stops_it_too(tmp_path):
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = tensors(32)
    reached = []
    with labkit.watch(model, opt, logdir=tmp_path, dashboard=False) as run:
        (tmp_path / "STOP").touch()  # what the server extension writes for the Stop button
        threading.Event().wait(0.15)  # past the stop file's look interval (FILE_CHECK_S)
        _loop(run, model, opt, x, y, 3)
        reached.append(True)
    # the first run.step raised RunStopped and the block ended on it, as stopped
    assert not reached and run.status == "stopped" and len(run.steps) == 1
    assert not (tmp_path / "STOP").exists()


def test_an_error_fails_the_run_naming_it(tmp_path):
    model = mlp()
    with pytest.raises(KeyError), labkit.watch(model, logdir=tmp_path, dashboard=False) as run:
        run.step(loss=torch.tensor(0.5))
        raise KeyError("batch")
    assert run.status == "failed" and run.error == "KeyError: 'batch'"
    assert Run.load(tmp_path).status == "failed"


def test_a_forward_nan_names_the_step_and_first_module(tmp_path):
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.Linear(16, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = tensors(32)
    before = None
    with (
        pytest.raises(NonFiniteError) as info,
        labkit.watch(model, opt, logdir=tmp_path, dashboard=False) as run,
    ):
        _loop(run, model, opt, x, y, 3)
        with torch.no_grad():
            model[2].weight[0, 0] = float("inf")  # the third module's output breaks
        before = [p.detach().clone() for p in model.parameters()]
        _loop(run, model, opt, x, y, 1)
    err = info.value
    assert err.step == 4 and err.module == "2" and err.where == "output"
    assert "the last good step was 3" in str(err)
    assert run.status == "failed" and "NonFiniteError" in run.error
    # stopped before optimizer.step: the weights are those the NaN came from
    for p, b in zip(model.parameters(), before, strict=True):
        assert torch.equal(p, b) or (p.isnan() == b.isnan()).all()


def test_a_guard_costs_no_behaviour(tmp_path):
    """The same loop, watched and not, trains to the same weights (hooks change nothing)."""
    x, y = tensors(32)
    finals = []
    for watched in (False, True):
        model = mlp()
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        if watched:
            with labkit.watch(model, opt, logdir=tmp_path, dashboard=False) as run:
                _loop(run, model, opt, x, y, 5)
        else:
            for _ in range(5):
                opt.zero_grad()
                F.cross_entropy(model(x), y).backward()
                opt.step()
        finals.append([p.detach().clone() for p in model.parameters()])
    for a, b in zip(*finals, strict=True):
        assert torch.equal(a, b)
    assert not model._forward_pre_hooks and not opt._optimizer_step_pre_hooks


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda run: run.step(), TypeError, "needs the step's loss"),
        (lambda run: run.step(loss=3), TypeError, "Python int"),
        (lambda run: run.step(loss=torch.ones(2)), ValueError, r"shape \[2\].*mean"),
        (lambda run: run.step(loss=torch.tensor(1)), TypeError, "floating point"),
        (lambda run: run.step(loss=0.5, acc="high"), TypeError, "acc='high'"),
        (lambda run: run.log(), TypeError, "needs figures"),
    ],
)
def test_bad_steps_are_named_and_record_nothing(tmp_path, call, error, match):
    with (
        labkit.watch(mlp(), logdir=tmp_path, dashboard=False) as run,
        pytest.raises(error, match=match),
    ):
        call(run)
    assert run.status == "finished" and run.steps == []


def test_bad_watch_calls(tmp_path, monkeypatch):
    with pytest.raises(TypeError, match=r"torch\.nn\.Module"):
        labkit.watch("model", logdir=tmp_path)
    with pytest.raises(TypeError, match=r"torch\.optim\.Optimizer"):
        labkit.watch(mlp(), optimizer="adam", logdir=tmp_path)
    with pytest.raises(TypeError, match="did you mean 'trace_every'"):
        labkit.watch(mlp(), logdir=tmp_path, trace_evry=3)
    with pytest.raises(ValueError, match="log_every"):
        labkit.watch(mlp(), logdir=tmp_path, log_every=-1)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    with pytest.raises(RuntimeError, match="init_process_group"):
        labkit.watch(mlp(), logdir=tmp_path / "ddp")
    assert not any(tmp_path.iterdir())  # nothing written by a refused call


def test_one_watch_per_logdir(tmp_path):
    with labkit.watch(mlp(), logdir=tmp_path, dashboard=False) as run:
        with pytest.raises(LogdirBusyError, match="this process"):
            labkit.watch(mlp(), logdir=tmp_path, dashboard=False)
        run.step(loss=0.5)
    assert run.status == "finished" and run.losses == [0.5]
    left_open = labkit.watch(mlp(), logdir=tmp_path, dashboard=False)  # free again
    with pytest.raises(LogdirBusyError, match=r"not ended\); end it with run\.close\(\)"):
        labkit.watch(mlp(), logdir=tmp_path, dashboard=False)  # a re-run notebook cell
    left_open.close()
    assert left_open.status == "finished" and not (tmp_path / ".labkit.lock").exists()


def test_a_run_of_lab_fit_is_no_loop():
    with pytest.raises(RunClosedError, match="records a lab run"):
        Run(logdir="x").step(loss=1.0)


def test_watch_is_callable_with_trainer_callbacks():
    import inspect

    assert list(inspect.signature(labkit.watch).parameters)[:4] == [
        "model",
        "optimizer",
        "logdir",
        "dashboard",
    ]
    assert callable(labkit.watch.lightning) and callable(labkit.watch.transformers)
    assert repr(labkit.watch) == "labkit.watch"
    assert "guard" in labkit.watch.__doc__


def test_trace_and_histogram_sampling(tmp_path):
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = tensors(32)
    with labkit.watch(
        model, opt, logdir=tmp_path, dashboard=False, trace_every=2, histogram_every=3
    ) as run:
        _loop(run, model, opt, x, y, 6)
    assert [p.rsplit("_", 1)[1] for p in run.traces] == [
        "0000002.json",
        "0000004.json",
        "0000006.json",
    ]
    trace = labkit.Trace.load(run.traces[0])
    assert {r["path"] for r in trace.rows()} >= {"0", "3"}
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(tmp_path / "tensorboard"), size_guidance={"histograms": 0})
    acc.Reload()
    assert [e.step for e in acc.Histograms("grads/0.weight")] == [3, 6]
    assert not model._forward_hooks and not model._forward_pre_hooks


@pytest.mark.parametrize(
    ("call", "what"),
    [
        (lambda run: run.step(loss=torch.tensor(0.5)), "run.step"),
        (lambda run: run.log(val_loss=0.5), "run.log"),
        (lambda run: run.stop(), "run.stop"),
    ],
)
def test_calls_after_the_block_are_refused_and_change_nothing(tmp_path, call, what):
    with labkit.watch(mlp(), logdir=tmp_path, dashboard=False) as run:
        run.step(loss=0.25)
    written = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    with pytest.raises(
        RunClosedError,
        match=rf"{what} after the watched loop ended \(finished\)"
        r".*labkit\.watch\(model, optimizer\)",
    ):
        call(run)
    assert run.status == "finished" and run.losses == [0.25]
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == written
