"""Steps a person takes in JupyterLab, as Playwright calls (used by the browser fixtures)."""

from __future__ import annotations

import re
import time
import uuid
from pathlib import Path

from tests.jupyter_process import JupyterProcess

RUN_TIMEOUT_MS = 120_000
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"

# State of the visible notebook: code cells, how many ran, how many are queued or
# running, whether the kernel is idle, and the output text of the last cell that ran.
_NOTEBOOK_STATE = """() => {
    const nb = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
    if (!nb) return null;
    const cells = [...nb.querySelectorAll('.jp-CodeCell')];
    const prompt = c => (c.querySelector('.jp-InputPrompt') || {}).textContent || '';
    const ran = cells.filter(c => /\\[\\d+\\]/.test(prompt(c)));
    const kernel = [...document.querySelectorAll('.jp-StatusBar-TextItem')]
        .map(e => e.textContent.trim()).find(t => / \\| \\w+$/.test(t)) || '';
    const last = ran.length ? ran[ran.length - 1] : null;
    const output = last ? last.querySelector('.jp-OutputArea') : null;
    return {
        cells: cells.length,
        ran: ran.length,
        running: cells.filter(c => prompt(c).includes('*')).length,
        idle: kernel.endsWith('| Idle'),
        kernel: kernel,
        lastRan: last ? cells.indexOf(last) : -1,
        lastOutput: output ? output.innerText.slice(-2000) : '',
    };
}"""


def open_lab(page, server: JupyterProcess, path: str = "") -> None:
    """Load JupyterLab in a fresh workspace (optionally opening ``path``) and wait for it.

    A fresh workspace per call keeps tabs of earlier tests from being restored. When
    ``path`` is a notebook, also waits until its kernel is started and idle.
    """
    workspace = f"lab/workspaces/test-{uuid.uuid4().hex[:12]}"
    page.goto(server.url(f"{workspace}/tree/{path}" if path else workspace))
    page.wait_for_selector("#jp-main-dock-panel", state="visible")
    if path.endswith(".ipynb"):
        wait_kernel_idle(page)


def wait_kernel_idle(page, timeout_ms: int = RUN_TIMEOUT_MS) -> None:
    """Wait until the status bar says the active notebook's kernel is idle."""
    page.locator(".jp-StatusBar-TextItem", has_text=re.compile(r" \| Idle$")).wait_for(
        timeout=timeout_ms
    )


def run_all_cells(page, timeout_ms: int = RUN_TIMEOUT_MS) -> None:
    """Run > Run All Cells in the menu bar, then wait for every cell and an idle kernel.

    Raises:
        AssertionError: when Run All stopped early (a cell raised): names the cell
            and quotes its output; or on timeout. Either way a screenshot is saved
            under ``test-artifacts/`` and its path is in the message.
    """
    start_run_all(page, timeout_ms)
    wait_all_ran(page, timeout_ms)


def start_run_all(page, timeout_ms: int = RUN_TIMEOUT_MS) -> None:
    """Run > Run All Cells in the menu bar, without waiting for the cells."""
    wait_kernel_idle(page, timeout_ms)
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()


def wait_all_ran(page, timeout_ms: int = RUN_TIMEOUT_MS) -> None:
    """Wait until every cell ran and the kernel is idle (see :func:`run_all_cells`)."""
    deadline = time.monotonic() + timeout_ms / 1000
    stopped_since: float | None = None
    state = None
    while time.monotonic() < deadline:
        state = page.evaluate(_NOTEBOOK_STATE)
        if state and state["cells"] and state["idle"] and not state["running"]:
            if state["ran"] == state["cells"]:
                return
            if state["ran"] == 0:  # Run All not started yet
                time.sleep(0.25)
                continue
            # idle with cells left unrun: Run All stopped at an error (confirm it stays so)
            stopped_since = stopped_since or time.monotonic()
            if time.monotonic() - stopped_since > 1.5:
                shot = _screenshot(page, "run-all-stopped")
                raise AssertionError(
                    f"Run All Cells stopped after cell {state['lastRan']} (0-based) of "
                    f"{state['cells']}; its output:\n{state['lastOutput']}\nscreenshot: {shot}"
                )
        else:
            stopped_since = None
        time.sleep(0.25)
    shot = _screenshot(page, "run-all-timeout")
    raise AssertionError(
        f"Run All Cells did not finish within {timeout_ms / 1000:.0f} s; "
        f"notebook state: {state}; screenshot: {shot}"
    )


def _screenshot(page, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}-{time.strftime('%H%M%S')}.png"
    page.screenshot(path=str(path), full_page=True)
    print(f"\nscreenshot: {path}")
    return path
