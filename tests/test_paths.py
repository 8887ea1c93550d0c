"""labkit._paths: output checks up front, atomic writes with the umask's mode, errors that
name the target. Real files only; a really full or read-only filesystem is in tests/faults."""

from __future__ import annotations

import os
import resource
import shutil
import signal
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from labkit._paths import (
    DiskFullError,
    OutputPathError,
    atomic_writer,
    check_folder,
    check_free_space,
    check_output_file,
    file_mode,
)


@pytest.fixture
def umask() -> Iterator[None]:
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_check_folder_creates_or_names_what_is_in_the_way(tmp_path: Path) -> None:
    assert check_folder(tmp_path / "a" / "b", what="logdir").is_dir()
    (tmp_path / "f").write_text("x")
    with pytest.raises(OutputPathError, match=rf"the logdir {tmp_path / 'f'} is a file"):
        check_folder(tmp_path / "f", what="logdir")
    f_is_a_file = rf"logdir {tmp_path / 'f' / 'sub'}: {tmp_path / 'f'} is a file"
    with pytest.raises(OutputPathError, match=f_is_a_file):
        check_folder(tmp_path / "f" / "sub", what="logdir")
    with pytest.raises(OutputPathError, match=rf"{tmp_path / 'nope'} does not exist; create it"):
        check_folder(tmp_path / "nope", create=False)
    assert [p.name for p in (tmp_path / "a" / "b").iterdir()] == []  # the probe is removed


def test_check_output_file(tmp_path: Path) -> None:
    out = tmp_path / "out.ipynb"
    assert check_output_file(out) == out
    out.write_text("old")
    with pytest.raises(OutputPathError, match=rf"the output {out} exists; pass --force"):
        check_output_file(out)
    assert check_output_file(out, force=True) == out and out.read_text() == "old"
    with pytest.raises(OutputPathError, match=rf"{tmp_path} is a folder; .*{tmp_path / 'x.py'}"):
        check_output_file(tmp_path, force=True, file_name="x.py")
    missing = tmp_path / "missing" / "dir" / "out.ipynb"
    with pytest.raises(OutputPathError, match=rf"folder of the output {missing.parent} does not"):
        check_output_file(missing)
    assert check_output_file(missing, create_folder=True).parent.is_dir()


def test_free_space_is_compared_with_the_filesystem(tmp_path: Path) -> None:
    free = shutil.disk_usage(tmp_path).free
    check_free_space(tmp_path / "f", 1024)
    with pytest.raises(DiskFullError, match=rf"the checkpoint {tmp_path / 'f'}: it needs") as info:
        check_free_space(tmp_path / "f", free + (1 << 30), what="checkpoint")
    err = info.value
    assert err.needed == free + (1 << 30) and abs(err.free - free) < (256 << 20)
    assert f"({err.needed} bytes)" in str(err) and f"({err.free} bytes) free" in str(err)
    assert isinstance(err, OSError)  # code catching OSError keeps working


@pytest.mark.parametrize("mask", [0o022, 0o027, 0o002])
def test_atomic_writer_gives_the_umask_mode(tmp_path: Path, umask: None, mask: int) -> None:
    os.umask(mask)
    assert file_mode() == 0o666 & ~mask
    with atomic_writer(tmp_path / "t.json") as f:
        f.write("{}")
    with open(tmp_path / "plain", "w") as f:  # the reference: what open() gives
        f.write("{}")
    mode = stat.S_IMODE((tmp_path / "t.json").stat().st_mode)
    assert mode == stat.S_IMODE((tmp_path / "plain").stat().st_mode) == 0o666 & ~mask


def test_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "t.json"
    target.write_text("old")
    with pytest.raises(ZeroDivisionError), atomic_writer(target) as f:
        f.write("half")
        raise ZeroDivisionError
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["t.json"]


def test_errors_name_the_target_not_the_temporary(tmp_path: Path) -> None:
    target = tmp_path / "missing" / "t.json"
    with (
        pytest.raises(OutputPathError, match=rf"{target}: its folder") as info,
        atomic_writer(target, what="trace file"),
    ):
        pass
    assert ".tmp" not in str(info.value)
    (tmp_path / "d").mkdir()
    with (
        pytest.raises(OutputPathError, match=r"the run record .*/d is a folder"),
        atomic_writer(tmp_path / "d", what="run record"),
    ):
        pass


def test_a_write_cut_short_names_the_target_and_keeps_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "t.json"
    target.write_text("old")
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # else the kernel kills us
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 16, hard))
    try:
        with (
            pytest.raises(OutputPathError, match=rf"cannot write the file {target}: File too"),
            atomic_writer(target) as f,
        ):
            f.write("x" * (1 << 17))
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["t.json"]
