"""Fault table, logdir: a wrong logdir is named before training starts (the model never
runs), and a disk that fills up during training is named with the bytes needed and free,
leaving the previous checkpoint intact."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from labkit._paths import DiskFullError, OutputPathError
from labkit.train.checkpoint import load_checkpoint
from tests.faults._fs import remount_readonly
from tests.faults._lab import FIT, Counting, FillDisk, lab


def _refused_before_training(logdir: Path, error: type[Exception], match: str) -> None:
    model = Counting()
    the_lab = lab(logdir, model)
    with pytest.raises(error, match=match):
        the_lab.fit(max_epochs=1, **FIT)
    assert model.calls == 0  # no batch, not even the dry run's
    assert the_lab.runs == []
    assert not (logdir / "events.jsonl").exists()


def test_checkpoints_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "checkpoints").write_text("not a folder")
    _refused_before_training(
        tmp_path / "run", OutputPathError, r"holds a file 'checkpoints' where labkit keeps"
    )


def test_last_ckpt_is_a_directory(tmp_path: Path) -> None:
    (tmp_path / "run" / "checkpoints" / "last.ckpt").mkdir(parents=True)
    _refused_before_training(
        tmp_path / "run",
        OutputPathError,
        r"holds a folder 'checkpoints/last.ckpt' where labkit writes",
    )


def test_read_only_filesystem_names_the_logdir(tmpfs: Callable[..., Path]) -> None:
    folder = tmpfs("1m")
    (folder / "run").mkdir()
    remount_readonly(folder)
    _refused_before_training(
        folder / "run", OutputPathError, rf"the logdir {folder / 'run'} is not writable: Read-only"
    )
    _refused_before_training(
        folder / "new", OutputPathError, rf"cannot create the logdir {folder / 'new'}: Read-only"
    )


@pytest.mark.parametrize(("optimizer", "states"), [("sgd", 0), ("adam", 2)])
def test_too_little_space_for_the_first_checkpoint_is_refused_up_front(
    tmpfs: Callable[..., Path], optimizer: str, states: int
) -> None:
    folder = tmpfs("1m")
    model = Counting(width=512, d_in=512)  # 1 MiB of weights: more than the 1 MiB tmpfs holds
    the_lab = lab(folder / "run", model)
    the_lab.optimizer = optimizer
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    with pytest.raises(DiskFullError, match=r"first checkpoint .*last\.ckpt: it needs") as info:
        the_lab.fit(max_epochs=1, **FIT)
    assert info.value.needed == weights * (1 + states)  # weights + the optimizer's state
    assert info.value.free <= 1 << 20
    assert model.calls == 0


@pytest.mark.parametrize("full_in_epoch", [0, 1])
def test_disk_full_at_a_checkpoint_names_path_bytes_and_keeps_the_previous(
    tmpfs: Callable[..., Path], full_in_epoch: int
) -> None:
    folder = tmpfs("1m")
    the_lab = lab(folder / "run")
    fit = {
        **FIT,
        "trainer_kwargs": {
            **FIT["trainer_kwargs"],
            "callbacks": [FillDisk(folder, epoch=full_in_epoch)],
        },
    }
    last = folder / "run" / "checkpoints" / "last.ckpt"
    with pytest.raises(
        DiskFullError,
        match=rf"checkpoint {last}: it needs .* bytes\), "
        r"8\.00 KiB \(8192 bytes\) free",
    ) as info:
        the_lab.fit(max_epochs=2, **fit)
    assert info.value.free == 8192 and info.value.needed > info.value.free
    assert the_lab.runs[-1].status == "failed"
    assert [p.name for p in last.parent.iterdir()] == ([] if full_in_epoch == 0 else ["last.ckpt"])
    if full_in_epoch == 1:  # the epoch-0 checkpoint is whole
        ckpt = load_checkpoint(last)
        assert ckpt["epoch"] == 0
        assert ckpt["state_dict"]["net.fc.weight"].shape == (1, 4)


@pytest.mark.parametrize("umask", [0o022, 0o002])
def test_checkpoint_and_run_record_modes_follow_the_umask(tmp_path: Path, umask: int) -> None:
    old = os.umask(umask)
    try:
        lab(tmp_path / "run").fit(max_epochs=1, **FIT)
    finally:
        os.umask(old)
    for name in ("checkpoints/last.ckpt", "run.json"):
        assert stat.S_IMODE((tmp_path / "run" / name).stat().st_mode) == 0o666 & ~umask, name
