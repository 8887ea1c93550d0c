"""The model you gave is the model trained (issue 30, item 1).

Optimizers that refer to the user's model (nanoGPT's ``configure_optimizers`` factory with
decay / no-decay AdamW groups, PyG ``gcn.py``'s per-layer groups, an optimizer instance),
with a frozen submodule, and with a Recipe (the trained copy's parameters mapped): each is
checked against a plain PyTorch loop's weights after the same steps, bit for bit on CPU.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from labkit.optimize import Recipe
from labkit.train import Lab
from tests.realworld.models import GPT, GPTConfig, pyg_gcn
from tests.train._helpers import LOSS, loaders, mlp

StepLoss = Callable[[torch.nn.Module, Any], torch.Tensor]


def plain_loop(
    model: torch.nn.Module,
    batches: Iterable[Any],
    opt: torch.optim.Optimizer,
    step_loss: StepLoss,
    *,
    epochs: int,
    seed: int,
) -> list[float]:
    """The hand-written loop, seeded as Lab.fit's determinism contract says."""
    torch.manual_seed(seed)
    losses = []
    for epoch in range(epochs):
        model.train()
        for i, batch in enumerate(batches):
            if i == 0:
                torch.manual_seed(seed + epoch)
            opt.zero_grad()
            loss = step_loss(model, batch)
            loss.backward()
            opt.step()
            losses.append(loss.item())
    return losses


def assert_same_weights(a: torch.nn.Module, b: torch.nn.Module) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert list(sa) == list(sb)
    for name in sa:
        assert torch.equal(sa[name], sb[name]), name


def _xy(model: torch.nn.Module, batch: Any) -> torch.Tensor:
    x, y = batch
    return LOSS(model(x), y)


FIT = {"dashboard": False, "launch": "inline"}


def test_nanogpt_configure_optimizers_factory_trains_the_model(tmp_path: Any) -> None:
    torch.manual_seed(0)
    model = GPT(GPTConfig(block_size=8, vocab_size=32, n_layer=2, n_head=2, n_embd=16, dropout=0.1))
    reference = copy.deepcopy(model)
    g = torch.Generator().manual_seed(3)
    x, y = torch.randint(0, 32, (24, 8), generator=g), torch.randint(0, 32, (24, 8), generator=g)
    train = DataLoader(TensorDataset(x, y), batch_size=8)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    lab = Lab(
        model,
        train,
        step=lambda net, batch: (net(*batch), None),
        loss=lambda out, _: out[1],
        logdir=tmp_path,
        # nanoGPT's train.py: the factory reaches the model it built, not `params`
        optimizer=lambda params: model.configure_optimizers(0.1, 1e-2, (0.9, 0.95), "cpu"),
    )
    run = lab.fit(max_epochs=2, seed=5, **FIT)
    opt = reference.configure_optimizers(0.1, 1e-2, (0.9, 0.95), "cpu")
    losses = plain_loop(reference, train, opt, lambda m, b: m(*b)[1], epochs=2, seed=5)
    assert run.losses == losses and len(losses) == 6
    assert_same_weights(lab.model, reference)
    assert lab.model is model and lab.trained_model is model
    changed = [k for k, v in model.state_dict().items() if not torch.equal(v, before[k])]
    assert len(changed) == len(before)  # every parameter (decay and no-decay groups) moved


def test_pyg_gcn_per_layer_groups_train_the_model(tmp_path: Any) -> None:
    with warnings.catch_warnings():  # PyG's import-time jit.script deprecation (see models.py)
        warnings.filterwarnings("ignore", "`torch.jit.script` is deprecated", DeprecationWarning)
        case = pyg_gcn(seed=0)
    model, (x, edge_index) = case.model, case.args
    reference = copy.deepcopy(model)
    from labkit.gnn.data import _as_graph

    data = _as_graph(__import__("torch_geometric").datasets.KarateClub())

    def groups(m: torch.nn.Module) -> torch.optim.Optimizer:
        return torch.optim.Adam(
            [
                dict(params=m.conv1.parameters(), weight_decay=5e-4),
                dict(params=m.conv2.parameters(), weight_decay=0),
            ],
            lr=0.01,
        )

    lab = Lab(
        model, data, loss=F.cross_entropy, optimizer=lambda ps: groups(model), logdir=tmp_path
    )
    run = lab.fit(max_epochs=20, seed=2, **FIT)
    mask = data.train_mask

    def gcn_loss(m: torch.nn.Module, _: Any) -> torch.Tensor:
        return F.cross_entropy(m(x, edge_index)[mask], data.y[mask])

    losses = plain_loop(reference, [None], groups(reference), gcn_loss, epochs=20, seed=2)
    assert run.losses == losses
    assert losses[-1] < losses[0]
    assert_same_weights(lab.model, reference)


def test_an_optimizer_instance_with_weight_decay_groups_trains_the_model(tmp_path: Any) -> None:
    model = mlp(dropout=0.2)
    reference = copy.deepcopy(model)

    def build(m: torch.nn.Module) -> torch.optim.Optimizer:
        return torch.optim.SGD(
            [
                {"params": m[0].parameters(), "weight_decay": 0.1},
                {"params": m[3].parameters(), "weight_decay": 0.0},
            ],
            lr=0.05,
            momentum=0.9,
        )

    opt = build(model)
    train, val = loaders()
    lab = Lab(model, (train, val), loss=LOSS, optimizer=opt, logdir=tmp_path)
    run = lab.fit(max_epochs=2, seed=1, **FIT)
    losses = plain_loop(reference, train, build(reference), _xy, epochs=2, seed=1)
    assert run.losses == losses
    assert_same_weights(lab.model, reference)
    assert opt.state[model[0].weight]["momentum_buffer"] is not None  # the instance stepped


def test_a_frozen_submodule_stays_as_it_was(tmp_path: Any) -> None:
    model = mlp()
    model[0].requires_grad_(False)
    frozen = model[0].weight.clone()
    reference = copy.deepcopy(model)
    train, val = loaders()
    lab = Lab(model, (train, val), loss=LOSS, optimizer="adam", lr=1e-2, logdir=tmp_path)
    run = lab.fit(max_epochs=2, seed=0, **FIT)
    opt = torch.optim.Adam(reference.parameters(), lr=1e-2)
    assert run.losses == plain_loop(reference, train, opt, _xy, epochs=2, seed=0)
    assert_same_weights(lab.model, reference)
    assert torch.equal(model[0].weight, frozen)
    assert not torch.equal(model[3].weight, mlp()[3].weight)


def test_with_a_recipe_the_copy_is_trained_by_the_optimizer_that_named_the_model(
    tmp_path: Any,
) -> None:
    model = mlp()
    reference = copy.deepcopy(model)
    train, val = loaders()
    factory = lambda ps: torch.optim.AdamW(model.parameters(), lr=1e-2)  # noqa: E731
    lab = Lab(
        model,
        (train, val),
        loss=LOSS,
        optimizer=factory,
        logdir=tmp_path,
        recipe=Recipe(checkpoint=("0",)),
    )  # a copy with block 0 checkpointed
    run = lab.fit(max_epochs=2, seed=0, **FIT)
    assert lab.trained_model is not model  # a Recipe applies to a copy
    opt = torch.optim.AdamW(reference.parameters(), lr=1e-2)
    assert run.losses == plain_loop(reference, train, opt, _xy, epochs=2, seed=0)
    assert_same_weights(lab.model, reference)  # the trained weights came back


def test_the_training_flags_are_kept(tmp_path: Any) -> None:
    model = mlp()
    model[2].eval()  # a dropout the user switched off: nothing labkit runs switches it on
    with pytest.warns(UserWarning, match=r"Found 1 module\(s\) in eval mode"):  # Lightning's
        Lab(model, loaders(), loss=LOSS, logdir=tmp_path).fit(max_epochs=1, **FIT)
    assert [m.training for m in model.modules()] == [True, True, True, False, True]
