"""promote computes the statements a script keeps once and passes them on: the check, the
report and the script all read the same list (issue 40 item 3)."""

from __future__ import annotations

from pathlib import Path

import labkit.promote.checks as checks
import labkit.promote.pipeline as pipeline
import labkit.promote.plain as plain
import labkit.promote.report as report
import labkit.promote.script as script
from labkit.promote import promote, read_notebook
from labkit.promote.analysis import analyze
from labkit.promote.checks import kept_statements
from labkit.promote.plain import render_plain_script
from labkit.promote.report import promotion_report
from tests.promote._notebooks import code, write_notebook


def _notebook(tmp_path: Path) -> Path:
    return write_notebook(
        tmp_path / "nb.ipynb",
        [
            code("import torch", 1),
            code("x = torch.ones(3)\nprint('kept', x.sum().item())", 2),
            code("y = x * 2\nprint('also', y.sum().item())", 3),
        ],
    )


def test_promote_computes_the_kept_statements_once(tmp_path: Path, monkeypatch) -> None:
    calls = []
    real = checks.kept_statements

    def counted(analysis):  # the real function, counted wherever a module imported it
        calls.append(analysis)
        return real(analysis)

    for module in (checks, pipeline, plain, report, script):
        if hasattr(module, "kept_statements"):
            monkeypatch.setattr(module, "kept_statements", counted)
    result = promote(_notebook(tmp_path), tmp_path / "nb.py", dry_run=True)
    assert "print('also'" in result.source
    assert len(calls) == 1


def test_the_kept_statements_given_are_the_ones_used(tmp_path: Path) -> None:
    analysis = analyze(read_notebook(_notebook(tmp_path)))
    kept = kept_statements(analysis)
    fewer = [s for s in kept if "also" not in s.source]
    assert len(fewer) == len(kept) - 1
    source, _ = render_plain_script(analysis, script_name="nb.py", kept=fewer)
    assert "print('kept'" in source and "print('also'" not in source
    assert promotion_report(analysis, kept=fewer).dropped > promotion_report(analysis).dropped
    assert checks.check(analysis, kept=kept) == checks.check(analysis)
