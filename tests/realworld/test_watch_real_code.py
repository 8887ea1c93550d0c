"""labkit.watch on training code as researchers write it, unmodified but for the added lines:
nanoGPT's ``train.py`` loop, a LightningModule under the user's own ``Trainer``, a Hugging
Face ``Trainer``. The recorded losses equal each loop's own, step by step."""

from __future__ import annotations

import math
from contextlib import nullcontext

import lightning.pytorch as pl
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

import labkit
from labkit.train.lab import _quiet_lightning
from tests.realworld.models import GPT, GPTConfig

pytestmark = pytest.mark.slow


# ---------------------------------------------------------------------------- nanoGPT train.py
def nanogpt_train(logdir=None) -> tuple[list[float], list[float], object]:  # noqa: C901 (train.py is one flat script)
    """nanoGPT's train.py loop, shrunk (its names and order); two lines added when watched."""
    batch_size, block_size, gradient_accumulation_steps = 4, 8, 4
    learning_rate, max_iters, weight_decay, beta1, beta2, grad_clip = 6e-4, 12, 0.1, 0.9, 0.95, 1.0
    warmup_iters, lr_decay_iters, min_lr = 3, 12, 6e-5
    eval_interval, eval_iters = 4, 2
    torch.manual_seed(1337)
    g = torch.Generator().manual_seed(0)
    data = {
        "train": torch.randint(0, 64, (2000,), generator=g),
        "val": torch.randint(0, 64, (400,), generator=g),
    }

    def get_batch(split):
        d = data[split]
        ix = torch.randint(len(d) - block_size, (batch_size,))
        x = torch.stack([d[i : i + block_size] for i in ix])
        y = torch.stack([d[i + 1 : i + 1 + block_size] for i in ix])
        return x, y

    model = GPT(
        GPTConfig(
            block_size=block_size,
            vocab_size=64,
            n_layer=2,
            n_head=2,
            n_embd=16,
            dropout=0.1,
            bias=False,
        )
    )
    scaler = torch.amp.GradScaler("cpu", enabled=False)  # float16 only on CUDA
    optimizer = model.configure_optimizers(weight_decay, learning_rate, (beta1, beta2), "cpu")
    ctx = nullcontext()

    @torch.no_grad()
    def estimate_loss():
        out = {}
        model.eval()
        for split in ["train", "val"]:
            losses = torch.zeros(eval_iters)
            for k in range(eval_iters):
                X, Y = get_batch(split)
                with ctx:
                    logits, loss = model(X, Y)  # noqa: RUF059 (as train.py writes it)
                losses[k] = loss.item()
            out[split] = losses.mean()
        model.train()
        return out

    def get_lr(it):
        if it < warmup_iters:
            return learning_rate * (it + 1) / (warmup_iters + 1)
        if it > lr_decay_iters:
            return min_lr
        decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
        coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
        return min_lr + coeff * (learning_rate - min_lr)

    own, vals = [], []
    run = labkit.watch(model, optimizer, logdir=logdir, dashboard=False) if logdir else None  # +
    X, Y = get_batch("train")
    for iter_num in range(max_iters):
        lr = get_lr(iter_num)
        for param_group in optimizer.param_groups:
            param_group["lr"] = lr
        if iter_num % eval_interval == 0:
            losses = estimate_loss()
            vals.append(float(losses["val"]))
            if run is not None:
                run.log(val_loss=losses["val"], train_eval_loss=losses["train"])  # +
        for _micro_step in range(gradient_accumulation_steps):
            with ctx:
                logits, loss = model(X, Y)  # noqa: RUF059 (as train.py writes it)
                loss = loss / gradient_accumulation_steps
            X, Y = get_batch("train")
            scaler.scale(loss).backward()
        if grad_clip != 0.0:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        own.append(loss.item() * gradient_accumulation_steps)  # nanoGPT's lossf
        if run is not None:
            run.step(loss=loss * gradient_accumulation_steps, lr=lr)  # +
    if run is not None:
        run.close()  # +
    return own, vals, run


def test_nanogpt_train_py_watched(tmp_path):
    plain, plain_vals, _ = nanogpt_train()
    own, vals, run = nanogpt_train(tmp_path / "gpt")
    assert own == plain and vals == plain_vals  # watching drew no random number, changed nothing
    assert run.status == "finished" and run.losses == own  # step by step
    assert [s["lr"] for s in run.steps][:2] == [6e-4 * 1 / 4, 6e-4 * 2 / 4]
    assert run.config["lr"] == 6e-4 / 4  # what the param groups had at the first step
    assert [e["val_loss"] for e in run.epochs] == pytest.approx(vals, rel=1e-6)
    assert [e["step"] for e in run.epochs] == [0, 4, 8]
    row = labkit.runs(tmp_path)[0]
    assert (row.source, row.options["lr"], row.steps) == ("loop", 6e-4 / 4, 12)


# ---------------------------------------------------------------------------- Lightning
class LitClassifier(pl.LightningModule):
    """A user's module: self.log, a validation metric, a warm-up scheduler dict per step."""

    def __init__(self, lr: float = 0.01) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))
        self.seen: list[float] = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self.net(x), y)
        self.log("train_loss", loss, prog_bar=True)
        self.seen.append(loss.item())
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        out = self.net(x)
        self.log("val_loss", F.cross_entropy(out, y))
        self.log("val_acc", (out.argmax(1) == y).float().mean())

    def configure_optimizers(self):
        opt = torch.optim.AdamW(self.parameters(), lr=self.hparams.lr)
        warmup = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 4))
        return {"optimizer": opt, "lr_scheduler": {"scheduler": warmup, "interval": "step"}}


def test_users_own_lightning_trainer_watched(tmp_path):
    torch.manual_seed(0)
    x = torch.randn(96, 8)
    y = (x.sum(1) > 0).long()
    train = DataLoader(TensorDataset(x[:64], y[:64]), batch_size=16, shuffle=True)
    val = DataLoader(TensorDataset(x[64:], y[64:]), batch_size=16)
    module = LitClassifier()
    cb = labkit.watch.lightning(logdir=tmp_path / "lit", dashboard=False)
    with _quiet_lightning():
        trainer = pl.Trainer(
            max_epochs=2,
            callbacks=[cb],
            logger=pl.loggers.CSVLogger(tmp_path),
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
        )
        trainer.fit(module, train, val)
    run = cb.run
    assert run.status == "finished" and run.source == "lightning"
    assert run.losses == module.seen  # the loss each training_step returned, step by step
    assert [s["step"] for s in run.steps] == list(range(1, 9))
    assert [e["step"] for e in run.epochs] == [4, 8]
    assert all({"val_loss", "val_acc"} <= set(e) for e in run.epochs)
    assert run.config["lr"] == 0.01 / 4  # the warm-up's first lr, not hparams.lr
    assert list((tmp_path / "lit" / "tensorboard").glob("events.out.tfevents.*"))
    assert (tmp_path / "lightning_logs").is_dir()  # the user's own logger wrote as before
    row = labkit.runs(tmp_path / "lit")[0]
    assert row.source == "lightning" and row.options["lr"] == 0.0025


# ---------------------------------------------------------------------------- Hugging Face
class Tokens(Dataset):
    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(0, 64, (n, 8), generator=g)
        self.labels = (self.ids[:, 0] > 31).long()

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {
            "input_ids": self.ids[i],
            "attention_mask": torch.ones(8, dtype=torch.long),
            "labels": self.labels[i],
        }


@pytest.mark.parametrize("accumulate", [1, 2])
def test_hugging_face_trainer_watched(tmp_path, accumulate):
    from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

    torch.manual_seed(0)
    cfg = BertConfig(
        vocab_size=64,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=16,
        num_labels=2,
    )
    model = BertForSequenceClassification(cfg)
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=4,
        gradient_accumulation_steps=accumulate,
        num_train_epochs=2,
        learning_rate=1e-3,
        logging_steps=1,
        eval_strategy="epoch",
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        seed=0,
    )
    cb = labkit.watch.transformers(logdir=tmp_path / "bert", dashboard=False)
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=Tokens(32, 1),
        eval_dataset=Tokens(8, 2),
        callbacks=[cb],
    )
    trainer.train()
    logged = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    evals = [h["eval_loss"] for h in trainer.state.log_history if "eval_loss" in h]
    run = cb.run
    assert run.status == "finished" and run.source == "transformers"
    assert run.losses == logged  # the loss the Trainer logged for each optimizer step
    assert len(run.steps) == 16 // accumulate
    assert [e["val_loss"] for e in run.epochs] == evals
    assert run.config["lr"] == trainer.optimizer.param_groups[0]["initial_lr"]
    assert not model._forward_hooks and not model._forward_pre_hooks
    assert labkit.runs(tmp_path / "bert")[0].source == "transformers"


def test_hugging_face_trainer_stops_and_fails_as_recorded(tmp_path):
    from transformers import (
        BertConfig,
        BertForSequenceClassification,
        Trainer,
        TrainerCallback,
        TrainingArguments,
    )

    from labkit.train.guards import NonFiniteError

    class StopAt(TrainerCallback):
        def __init__(self, cb):
            self.cb = cb

        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 3:  # what the server extension does for the Stop button
                self.cb.session.stop_file.touch()

    def trainer(cb, extra=()):
        torch.manual_seed(0)
        cfg = BertConfig(
            vocab_size=64,
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=16,
            num_labels=2,
        )
        args = TrainingArguments(
            output_dir=str(tmp_path / "out"),
            per_device_train_batch_size=4,
            num_train_epochs=1,
            report_to=[],
            use_cpu=True,
            disable_tqdm=True,
            save_strategy="no",
        )
        model = BertForSequenceClassification(cfg)
        return model, Trainer(
            model=model, args=args, train_dataset=Tokens(800, 1), callbacks=[cb, *extra]
        )

    cb = labkit.watch.transformers(logdir=tmp_path / "stop", dashboard=False)
    _, tr = trainer(cb)
    tr.add_callback(StopAt(cb))  # after labkit's: the stop file is seen at a later step
    tr.train()  # 200 steps unless stopped
    assert cb.run.status == "stopped" and 4 <= tr.state.global_step < 200
    assert len(cb.run.steps) == tr.state.global_step

    cb = labkit.watch.transformers(logdir=tmp_path / "nan", dashboard=False)
    model, tr = trainer(cb)
    with torch.no_grad():
        model.bert.encoder.layer[0].intermediate.dense.weight[0, 0] = float("nan")
    with pytest.raises(NonFiniteError) as info:
        tr.train()
    assert info.value.step == 1 and info.value.where == "output"
    assert info.value.module == "bert.encoder.layer.0.intermediate.dense"
    assert cb.run.status == "failed" and labkit.runs(tmp_path / "nan")[0].status == "failed"
