"""Atomic writes: no partial file, no clobbering without force."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from labkit.promote import TargetExistsError, write_atomic
from labkit.promote.write import temporary_sibling


def test_writes_new_file(tmp_path: Path):
    out = write_atomic(tmp_path / "a.py", "x = 1\n")
    assert out.read_text() == "x = 1\n"
    assert [p.name for p in tmp_path.iterdir()] == ["a.py"]


def test_refuses_to_overwrite_without_force(tmp_path: Path):
    target = tmp_path / "a.py"
    target.write_text("mine")
    with pytest.raises(TargetExistsError, match="pass --force"):
        write_atomic(target, "new")
    assert target.read_text() == "mine"
    write_atomic(target, "new", force=True)
    assert target.read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["a.py"]


def test_missing_folder(tmp_path: Path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        write_atomic(tmp_path / "no" / "a.py", "x")


def test_temporary_file_is_removed_on_error(tmp_path: Path):
    with pytest.raises(RuntimeError), temporary_sibling(tmp_path / "a.py", "x") as tmp:
        assert tmp.exists() and tmp.parent == tmp_path and tmp.name.startswith(".a.")
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_file_mode(tmp_path: Path):
    out = write_atomic(tmp_path / "run.py", "x", mode=0o755)
    assert os.stat(out).st_mode & 0o777 == 0o755
