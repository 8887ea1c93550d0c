"""Fault table, command-line outputs: ``labkit run -o`` and ``labkit promote -o`` check the
output path before any work (no kernel starts: the notebook's marker cell never runs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from labkit.cli import main
from tests.promote._notebooks import code, write_notebook


def _marking_notebook(folder: Path) -> Path:
    return write_notebook(folder / "nb.ipynb", [code("open('ran.txt', 'w').write('yes')")])


def test_run_into_a_missing_folder_fails_before_a_kernel_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nb = _marking_notebook(tmp_path)
    out = tmp_path / "missing" / "dir" / "out.ipynb"
    assert main(["run", str(nb), "-o", str(out), "-q"]) == 1
    err = capsys.readouterr().err
    assert f"folder of the output notebook {out.parent} does not exist" in err
    assert not (tmp_path / "ran.txt").exists()


def test_run_never_overwrites_without_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nb = _marking_notebook(tmp_path)
    out = tmp_path / "existing.ipynb"
    out.write_text("keep me")
    assert main(["run", str(nb), "-o", str(out), "-q"]) == 1
    assert f"the output notebook {out} exists; pass --force" in capsys.readouterr().err
    assert out.read_text() == "keep me" and not (tmp_path / "ran.txt").exists()
    assert main(["run", str(nb), "-o", str(out), "-q", "--force"]) == 0
    assert (tmp_path / "ran.txt").read_text() == "yes" and '"cells"' in out.read_text()


def test_run_into_a_folder_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nb = _marking_notebook(tmp_path)
    (tmp_path / "outdir").mkdir()
    assert main(["run", str(nb), "-o", str(tmp_path / "outdir"), "-q", "--force"]) == 1
    assert f"{tmp_path / 'outdir'} is a folder; give a file name" in capsys.readouterr().err
    assert not (tmp_path / "ran.txt").exists()


def test_promote_into_a_folder_with_force_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nb = _marking_notebook(tmp_path)
    (tmp_path / "some_dir").mkdir()
    assert main(["promote", str(nb), "-o", str(tmp_path / "some_dir"), "--force"]) == 1
    err = capsys.readouterr().err
    assert f"the script (-o) {tmp_path / 'some_dir'} is a folder; give a file name " in err
    assert f"(e.g. {tmp_path / 'some_dir' / 'nb.py'})" in err
    assert "Traceback" not in err and list((tmp_path / "some_dir").iterdir()) == []


def test_promote_library_call_into_a_folder_is_a_clear_error(tmp_path: Path) -> None:
    from labkit._paths import OutputPathError
    from labkit.promote import promote

    nb = _marking_notebook(tmp_path)
    (tmp_path / "some_dir").mkdir()
    with pytest.raises(OutputPathError, match=r"the script .*some_dir is a folder; give a file"):
        promote(nb, tmp_path / "some_dir", force=True)
    assert list((tmp_path / "some_dir").iterdir()) == []


@pytest.mark.parametrize("command", ["promote", "run"])
def test_a_300_character_output_name_is_an_output_path_error_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    nb = _marking_notebook(tmp_path)
    out = tmp_path / ("n" * 300 + (".py" if command == "promote" else ".ipynb"))
    assert main([command, str(nb), "-o", str(out), *(["-q"] if command == "run" else [])]) == 1
    err = capsys.readouterr().err
    assert "bytes long and this filesystem allows 255 per name; choose a shorter name" in err
    assert "Traceback" not in err and "Errno 36" not in err
    assert not (tmp_path / "ran.txt").exists() and sorted(p.name for p in tmp_path.iterdir()) == [
        "nb.ipynb"
    ]
