from __future__ import annotations

import pickle

import pytest
import torch

from labkit.train.checkpoint import (
    AtomicCheckpointIO,
    CheckpointError,
    load_checkpoint,
    recipe_of,
    save_checkpoint,
)


def test_atomic_save_and_weights_only_load(tmp_path):
    target = tmp_path / "ck" / "last.ckpt"
    (tmp_path / "ck").mkdir()
    stale = tmp_path / "ck" / ".last.ckpt.abc.tmp"
    stale.write_bytes(b"half a checkpoint")  # left by a killed save
    save_checkpoint({"w": torch.ones(3), "labkit": {"recipe": {"precision": "32"}}}, target)
    assert not stale.exists()
    assert [p.name for p in target.parent.iterdir()] == ["last.ckpt"]
    ck = load_checkpoint(target)
    assert torch.equal(ck["w"], torch.ones(3)) and recipe_of(ck) == {"precision": "32"}


def test_unsafe_or_missing_checkpoint_is_named(tmp_path):
    with pytest.raises(CheckpointError, match="no checkpoint at"):
        load_checkpoint(tmp_path / "missing.ckpt")
    bad = tmp_path / "bad.ckpt"
    torch.save({"obj": pickle.dumps}, bad)  # a callable: not loadable with weights_only=True
    with pytest.raises(CheckpointError, match=r"bad\.ckpt could not be loaded with weights_only"):
        load_checkpoint(bad)


def test_checkpoint_io(tmp_path):
    io = AtomicCheckpointIO()
    assert repr(io) == "AtomicCheckpointIO(atomic=True, weights_only=True)"
    io.save_checkpoint({"x": torch.zeros(1)}, tmp_path / "a.ckpt")
    assert torch.equal(io.load_checkpoint(tmp_path / "a.ckpt")["x"], torch.zeros(1))
    with pytest.raises(TypeError):
        io.save_checkpoint({}, tmp_path / "b.ckpt", storage_options={"x": 1})
