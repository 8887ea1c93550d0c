"""Helpers for browser tests that share one executed notebook across a module.

The harness fixtures in ``conftest.py`` give a fresh page per test; widget tests run
one notebook once and then look at its outputs from several tests, so they need a
module-scoped page. These helpers reuse the harness's ``open_lab`` / ``run_all_cells``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import nbformat

from tests.browser.conftest import ARTIFACTS, RUN_TIMEOUT_MS, open_lab, run_all_cells


def notebook(*sources: str) -> nbformat.NotebookNode:
    """A notebook of code cells."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    return nb


def open_and_run(page, server, nb: nbformat.NotebookNode, name: str):
    """Write ``nb`` into the server root, open it, run all cells, return the page."""
    nbformat.write(nb, Path(server.root_dir) / name)
    open_lab(page, server, name)
    page.wait_for_selector(
        ".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=RUN_TIMEOUT_MS
    )
    page.locator(".jp-NotebookPanel .jp-Cell").first.click()
    run_all_cells(page)
    return page


def cell(page, index: int):
    """The ``index``-th cell of the visible notebook."""
    return page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell").nth(index)


def output_text(page, index: int) -> str:
    """Text of a cell's output area."""
    return cell(page, index).locator(".jp-OutputArea").inner_text()


def rerun_cell(page, index: int, expect: str | re.Pattern[str], timeout_ms: int = 30_000) -> str:
    """Run one cell again (click its prompt, Ctrl+Enter) and wait for ``expect`` in its output."""
    c = cell(page, index)
    c.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Control+Enter")
    pattern = expect if isinstance(expect, re.Pattern) else re.compile(re.escape(expect))
    loc = c.locator(".jp-OutputArea-output", has_text=pattern)
    loc.first.wait_for(timeout=timeout_ms)
    return c.locator(".jp-OutputArea").inner_text()


def save_shot(locator, name: str, also: Path | None = None) -> Path:
    """Screenshot ``locator`` to ``test-artifacts/<name>.png``.

    With ``LABKIT_UPDATE_SCREENSHOTS=1`` it is also copied to ``also`` (the README's
    images under docs/), so a plain test run never rewrites tracked files.
    """
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    locator.screenshot(path=str(path))
    if also is not None and os.environ.get("LABKIT_UPDATE_SCREENSHOTS") == "1":
        also.parent.mkdir(parents=True, exist_ok=True)
        also.write_bytes(path.read_bytes())
    return path


def set_theme(page, name: str) -> None:
    """Settings > Theme > ``name``, as a person picks it; waits until it applies."""
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Settings$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Theme$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{name}$")).click()
    page.wait_for_selector(f"body[data-jp-theme-name='{name}']", state="attached")
    page.keyboard.press("Escape")
    page.wait_for_timeout(300)  # theme stylesheet swap settles
