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
    with pytest.raises(
        CheckpointError, match=r"bad\.ckpt cannot be loaded: .*pickle\.dumps.*weights_only=True"
    ):
        load_checkpoint(bad)


def test_checkpoint_io(tmp_path):
    io = AtomicCheckpointIO()
    assert repr(io) == "AtomicCheckpointIO(atomic=True, weights_only=True)"
    io.save_checkpoint({"x": torch.zeros(1)}, tmp_path / "a.ckpt")
    assert torch.equal(io.load_checkpoint(tmp_path / "a.ckpt")["x"], torch.zeros(1))
    with pytest.raises(TypeError):
        io.save_checkpoint({}, tmp_path / "b.ckpt", storage_options={"x": 1})


def test_checkpoint_bytes_covers_the_file_written(tmp_path):
    from labkit.train.checkpoint import checkpoint_bytes

    w = torch.randn(256, 256)
    state = {
        "state_dict": {"w": w, "tied": w, "view": w[:10]},
        "opt": [torch.ones(1000)],
        "labkit": {"recipe": {"precision": "32"}},
    }
    save_checkpoint(state, tmp_path / "c.ckpt")
    written = (tmp_path / "c.ckpt").stat().st_size  # the reference: the real file
    estimate = checkpoint_bytes(state)
    assert written <= estimate <= written + (64 << 10)  # each storage once, plus 64 KiB


def test_failed_save_keeps_the_previous_checkpoint(tmp_path):
    target = tmp_path / "last.ckpt"
    save_checkpoint({"w": torch.ones(3)}, target)
    with pytest.raises(Exception, match=r"lambda|pickle|Can.t"):
        save_checkpoint({"w": torch.zeros(3), "bad": lambda: 0}, target)
    assert torch.equal(load_checkpoint(target)["w"], torch.ones(3))
    assert [p.name for p in tmp_path.iterdir()] == ["last.ckpt"]


def test_a_write_cut_short_names_the_checkpoint(tmp_path):
    """torch.save reports a short write as a bare 'unexpected pos'; labkit names the file."""
    import resource
    import signal

    from labkit._paths import OutputPathError

    target = tmp_path / "last.ckpt"
    save_checkpoint({"w": torch.ones(3)}, target)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 16, hard))  # a file size limit
    try:
        with pytest.raises(OutputPathError, match=rf"cannot write the checkpoint {target}"):
            save_checkpoint({"w": torch.zeros(1 << 16)}, target)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)
    assert torch.equal(load_checkpoint(target)["w"], torch.ones(3))
    assert [p.name for p in tmp_path.iterdir()] == ["last.ckpt"]


def test_random_bytes_are_never_read_as_anything_but_not_a_checkpoint(tmp_path) -> None:
    # about 7% of random files once failed in torch's unpickler with an IndexError or a
    # KeyError, which came out as "IndexError: pop from empty list" (and a warning about
    # the pickle protocol their first bytes named)
    import random

    rng = random.Random(0)
    path = tmp_path / "last.ckpt"
    for _ in range(300):
        path.write_bytes(rng.randbytes(4096))
        with pytest.raises(CheckpointError, match=r"it is not a file torch\.save wrote"):
            load_checkpoint(path)
