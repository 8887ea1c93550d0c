"""Clean output: what third-party imports print when labkit triggers them is filtered
(issue 26: importing torchao for an int8 compare printed its extension loader's
'Failed to load ..._C_mxfp8...so' and an Enum register_constant deprecation warning)."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("torchao")

INT8_COMPARE = """
import torch, labkit
from labkit.optimize import Recipe
from labkit.optimize.apply import apply, applied
model = torch.nn.Sequential(torch.nn.Linear(8, 8)).eval()
report = applied(apply(model, Recipe(quantization="int8-dynamic")))
assert report.ok, report.notes
"""


def _run(code: str) -> None:
    """Run ``code`` in a fresh interpreter (torchao not yet imported) on this test's fds."""
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)


def test_an_int8_recipe_imports_torchao_silently(capfd: pytest.CaptureFixture[str]) -> None:
    _run(INT8_COMPARE)
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_the_filter_is_labkits_alone(capfd: pytest.CaptureFixture[str]) -> None:
    _run("import torchao")  # what torchao prints by itself on this machine
    _, alone = capfd.readouterr()
    _run("import labkit.optimize.apply\nimport torchao")  # the user's own import
    _, user = capfd.readouterr()
    for said in ("Failed to load", "register_constant"):  # as torchao says it, if it does
        assert (said in user) == (said in alone)
