"""Fault table, verify: imports like the notebook, and timings named (issue 35, item 7).

Every nanoGPT notebook (``from model import GPT``) failed under ``--verify`` with
``ModuleNotFoundError: No module named 'model'`` while its script ran on its own: the runner
put its temporary folder first on the import path. And printed wall times (``time
1821.78ms`` vs ``time 3068.49ms``) were differences with no way to mask them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from labkit.cli import main
from tests.promote._notebooks import numbered, write_notebook

MODEL = '''
import torch
from torch import nn


class GPT(nn.Module):
    """A stand-in for nanoGPT's model.py, next to the notebook."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        return self.head(x)
'''


def _verify(capsys: pytest.CaptureFixture[str], nb: Path, *args: str) -> tuple[int, str, str]:
    status = main(["promote", str(nb), "--verify", "-q", "--force", "--timeout", "120", *args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_a_module_next_to_the_notebook_imports_on_both_sides(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "model.py").write_text(MODEL)
    nb = write_notebook(
        tmp_path / "gpt.ipynb",
        numbered(
            "import sys\nimport torch\nfrom model import GPT",
            "model = GPT()\nprint(model(torch.ones(1, 4)).shape)",
            "import os\nprint(os.path.abspath(sys.path[0]) == os.getcwd())",
        ),
    )
    status, out, err = _verify(capsys, nb)
    assert status == 0, err
    assert "verify: identical (2 lines)" in out  # the shape, then True on both sides
    assert "ModuleNotFoundError" not in err


TIMED = "import time\nfor i in range(3):\n    t = time.perf_counter()\n    sum(range(10_000))\n"


def test_printed_times_are_named_and_ignore_masks_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    took = "(time.perf_counter() - t) * 1e6"
    cell = TIMED + f"    print(f'iter {{i}}: loss 4.4654, time {{{took}:.2f}}ms')"
    nb = write_notebook(tmp_path / "timed.ipynb", numbered(cell))
    status, out, _ = _verify(capsys, nb)
    assert status == 1
    assert "verify: different: line 1 differs" in out
    assert (
        "verify: only times differ (numbers followed by ms): --ignore '[0-9.]+ ?ms' leaves them out"
    ) in out
    status, out, err = _verify(capsys, nb, "--ignore", "[0-9.]+ ?ms")
    assert status == 0, out + err
    assert "verify: identical (3 lines)" in out


def test_a_difference_that_is_not_a_time_gets_no_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cell = TIMED + "    print(f'iter {i}: {time.perf_counter() - t:.9f}')"
    nb = write_notebook(tmp_path / "untimed.ipynb", numbered(cell))
    status, out, _ = _verify(capsys, nb)
    assert status == 1 and "verify: different" in out
    assert "only times differ" not in out


def test_an_ignore_that_is_not_a_regular_expression_is_refused_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nb = write_notebook(tmp_path / "x.ipynb", numbered("print(1)"))
    status, out, err = _verify(capsys, nb, "--ignore", "([0-9")
    assert status == 2
    assert err.startswith("labkit promote: error: --ignore '([0-9' is not a regular expression")
    assert not (tmp_path / "x.py").exists() and out == ""
