from __future__ import annotations

import copy

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from torch.utils.data import DataLoader

import labkit
from labkit.train import Lab, fit_from_args
from labkit.train.checkpoint import load_checkpoint, recipe_of
from tests.train._helpers import LOSS, accuracy, datasets, loaders, mlp


def raw_loop(model, train_loader, *, epochs, lr, seed):
    """The hand-written PyTorch loop Lab.fit must match (seeding as in its docstring)."""
    torch.manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for epoch in range(epochs):
        model.train()
        for i, (x, y) in enumerate(train_loader):
            if i == 0:
                torch.manual_seed(seed + epoch)
            opt.zero_grad()
            loss = LOSS(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
    return losses


def test_parity_with_raw_loop_bitwise(tmp_path):
    model = mlp(dropout=0.2)
    reference = copy.deepcopy(model)
    train, val = loaders()
    lab = Lab(model, (train, val), loss=LOSS, optimizer="adam", lr=1e-2, logdir=tmp_path)
    run = lab.fit(max_epochs=3, seed=7, dashboard=False)
    losses = raw_loop(
        reference, DataLoader(train.dataset, batch_size=16), epochs=3, lr=1e-2, seed=7
    )
    assert run.losses == losses
    for (name, a), b in zip(
        lab.model.state_dict().items(), reference.state_dict().values(), strict=True
    ):
        assert torch.equal(a, b), name


def test_resume_repeats_uninterrupted_losses(tmp_path):
    data = datasets()
    full = Lab(mlp(dropout=0.2), data, loss=LOSS, batch_size=16, logdir=tmp_path / "full")
    full_run = full.fit(max_epochs=4, seed=1, dashboard=False)
    part = Lab(mlp(dropout=0.2), data, loss=LOSS, batch_size=16, logdir=tmp_path / "part")
    first = part.fit(max_epochs=2, seed=1, dashboard=False)
    resumed = Lab(mlp(dropout=0.2), data, loss=LOSS, batch_size=16, logdir=tmp_path / "part")
    second = resumed.fit(max_epochs=4, seed=1, resume=True, dashboard=False)
    assert second.config["ckpt_path"].endswith("last.ckpt")
    assert "resumed from" in second.notes[-1]
    assert first.losses + second.losses == full_run.losses
    for a, b in zip(
        resumed.model.state_dict().values(), full.model.state_dict().values(), strict=True
    ):
        assert torch.equal(a, b)
    ck = load_checkpoint(tmp_path / "part" / "checkpoints" / "last.ckpt")
    assert recipe_of(ck) == labkit.Recipe().to_dict() and ck["epoch"] == 3


def test_tensorboard_files_read_back(tmp_path, capsys):
    lab = Lab(
        mlp(),
        datasets(),
        loss=LOSS,
        metrics={"acc": accuracy},
        batch_size=16,
        recipe=labkit.Recipe(matmul_precision="high"),
        logdir=tmp_path,
    )
    lab.fit(max_epochs=2, log_every=1, histogram_every=3, trace_every=4, dashboard=False)
    (version,) = (tmp_path / "tensorboard").iterdir()
    acc = EventAccumulator(str(version), size_guidance={"scalars": 0, "histograms": 0})
    acc.Reload()
    tags = acc.Tags()
    assert {"train_loss", "train_acc", "val_loss", "val_acc", "train_loss_epoch"} <= set(
        tags["scalars"]
    )
    assert len(acc.Scalars("train_loss")) == 12
    assert any(t.startswith("grad_norm/") for t in tags["scalars"])
    assert any(t.startswith("trace/fwd_ms/") for t in tags["scalars"])
    assert "weights/0.weight" in tags["histograms"] and "grads/0.weight" in tags["histograms"]
    # hparams plugin data holds the recipe
    hp = acc.PluginTagToContent("hparams")
    assert hp and b"recipe/matmul_precision" in b"".join(hp.values())
    run = lab.last_run
    assert len(run.traces) == 3 and all(p.endswith(".json") for p in run.traces)
    text = lab.tensorboard()
    assert f"tensorboard --logdir {tmp_path / 'tensorboard'}" in text
    assert "tensorboard --logdir" in capsys.readouterr().out


def test_logged_values_match_an_independent_computation(tmp_path):
    """Per-step scalars on Lightning's logging steps; epoch means weighted by batch size."""
    x, y = datasets()[1].tensors
    lab = Lab(
        mlp(), datasets(), loss=LOSS, metrics={"acc": accuracy}, batch_size=20, logdir=tmp_path
    )  # 96 train samples: batches of 20, 20, 20, 20, 16
    run = lab.fit(max_epochs=2, log_every=2, dashboard=False)
    (version,) = (tmp_path / "tensorboard").iterdir()
    acc = EventAccumulator(str(version), size_guidance={"scalars": 0})
    acc.Reload()
    by_step = {s["step"]: s for s in run.steps}  # run steps count from 1, TensorBoard from 0
    logged = acc.Scalars("train_loss")
    assert [e.step for e in logged] == [1, 3, 5, 7, 9]
    for e in logged:
        assert e.value == pytest.approx(by_step[e.step + 1]["loss"], rel=1e-6)
    epoch_at = {(e.step, e.value) for e in acc.Scalars("epoch")}
    assert {(1, 0), (3, 0), (5, 1), (7, 1), (9, 1)} <= epoch_at
    for epoch, e in enumerate(acc.Scalars("train_loss_epoch")):
        steps = [s for s in run.steps if s["epoch"] == epoch]
        assert [s["samples"] for s in steps] == [20, 20, 20, 20, 16]
        mean = sum(s["loss"] * s["samples"] for s in steps) / 96
        assert e.value == pytest.approx(mean, rel=1e-5)
        assert run.epochs[epoch]["train_loss"] == pytest.approx(e.value, rel=1e-6)
    # validation means (batches of 20 and 12) equal the loss over all 32 samples at the end
    with torch.no_grad():
        out = lab.model(x)
    assert acc.Scalars("val_loss")[-1].value == pytest.approx(float(LOSS(out, y)), rel=1e-5)
    assert acc.Scalars("val_acc")[-1].value == pytest.approx(float(accuracy(out, y)), rel=1e-6)
    assert run.epochs[-1]["val_loss"] == pytest.approx(acc.Scalars("val_loss")[-1].value)


def test_lr_find(tmp_path):
    lab = Lab(mlp(), datasets(), loss=LOSS, batch_size=16, logdir=tmp_path)
    before = copy.deepcopy(lab.model.state_dict())
    finder = lab.lr_find(num_training=20, apply=True, early_stop_threshold=None)
    assert len(finder.results["lr"]) == 20
    assert lab.lr == pytest.approx(finder.suggestion())
    fig = finder.plot(suggest=True)
    assert fig.axes and fig.axes[0].get_xscale() == "log"
    for k, v in lab.model.state_dict().items():
        assert torch.equal(v, before[k]), k


def test_stop_in_background_keeps_checkpoint(tmp_path):
    lab = Lab(mlp(), datasets(512), loss=LOSS, batch_size=4, logdir=tmp_path)
    run = lab.fit(max_epochs=50, background=True, dashboard=False)
    import time

    deadline = time.time() + 60
    while len(run.steps) < 5 and time.time() < deadline:
        time.sleep(0.05)
    lab.stop()
    run.wait(timeout=60)
    assert run.status == "stopped"
    assert run.steps[-1]["step"] < 50 * 96
    assert (tmp_path / "checkpoints" / "last.ckpt").exists()


def test_fit_from_args_and_repr(tmp_path):
    lab = Lab(mlp(), datasets(), loss=LOSS, batch_size=32, logdir=tmp_path / "a")
    assert repr(lab) == (
        "Lab(model=Sequential, loss=cross_entropy, optimizer='adam', lr=0.001, "
        f"recipe=Recipe(), runs=0, traces=0, logdir='{tmp_path / 'a'}')"
    )
    run = fit_from_args(lab, ["--max-epochs", "1", "--seed", "3", "--logdir", str(tmp_path / "b")])
    assert run.config["seed"] == 3 and run.logdir == str(tmp_path / "b") and len(run.steps) == 3
    assert "runs=1" in repr(lab)
    with pytest.raises(TypeError, match="needs loss="):
        Lab(mlp(), datasets())


def test_lab_trace_keeps_model(tmp_path):
    lab = Lab(mlp(), datasets(), loss=LOSS, batch_size=8, logdir=tmp_path)
    before = copy.deepcopy(lab.model.state_dict())
    t = lab.trace(mode="timing")
    assert lab.traces == [t] and {r["path"] for r in t.rows()} >= {"", "0", "3"}
    assert all(p.grad is None for p in lab.model.parameters())
    assert all(torch.equal(v, before[k]) for k, v in lab.model.state_dict().items())
