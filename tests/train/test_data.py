from __future__ import annotations

import lightning.pytorch as pl
import pytest
from torch.utils.data import DataLoader

from labkit.train.data import EpochShuffleSampler, PairDataModule, as_datamodule, resumable
from tests.train._helpers import datasets, loaders


def test_pair_of_datasets_and_loaders():
    train, val = datasets()
    dm = as_datamodule((train, val), batch_size=8, seed=3)
    assert isinstance(dm, PairDataModule)
    assert isinstance(dm.train_dataloader().sampler, EpochShuffleSampler)
    assert len(dm.train_dataloader()) == 12 and len(dm.val_dataloader()) == 4
    assert repr(dm) == (
        "PairDataModule(train=DataLoader(batches=12, batch_size=8), "
        "val=DataLoader(batches=4, batch_size=8))"
    )
    tl, vl = loaders()
    dm = as_datamodule((tl, vl))
    assert dm.train_dataloader() is tl and dm.val_dataloader() is vl
    only = as_datamodule(train)
    assert repr(only) == "TrainDataModule(train=DataLoader(batches=3, batch_size=32))"


def test_train_only_fit_warns_nothing(tmp_path):
    from labkit.train import Lab
    from tests.train._helpers import LOSS, mlp

    run = Lab(mlp(), datasets()[0], loss=LOSS, logdir=tmp_path).fit(dashboard=False)
    assert run.status == "finished" and len(run.steps) == 3 and "val_loss" not in run.epochs[0]


def test_shuffling_loader_made_resumable_and_datamodule_kept():
    train, _ = datasets()
    loader = DataLoader(train, batch_size=4, shuffle=True)
    new = resumable(loader, seed=1)
    assert isinstance(new.sampler, EpochShuffleSampler) and new.batch_size == 4
    dm = pl.LightningDataModule()
    assert as_datamodule(dm) is dm


def test_epoch_shuffle_depends_only_on_seed_and_epoch():
    a, b = EpochShuffleSampler(10, seed=5), EpochShuffleSampler(10, seed=5)
    a.set_epoch(2)
    list(b)  # drawing epoch 0 first changes nothing for epoch 2
    b.set_epoch(2)
    assert list(a) == list(b) and sorted(a) == list(range(10))
    b.set_epoch(3)
    assert list(a) != list(b)
    assert repr(a) == "EpochShuffleSampler(n=10, seed=5, epoch=2)"


def test_bad_data_is_named():
    with pytest.raises(TypeError, match="the train part is a int"):
        as_datamodule(3)
