"""Steps a person takes in JupyterLab, as Playwright calls (used by the browser fixtures)."""

from __future__ import annotations

import re

from tests.jupyter_process import JupyterProcess

RUN_TIMEOUT_MS = 120_000


def open_lab(page, server: JupyterProcess, path: str = "") -> None:
    """Load JupyterLab (optionally at ``lab/tree/<path>``) and wait until it is ready."""
    page.goto(server.url(f"lab/tree/{path}" if path else "lab"))
    page.wait_for_selector("#jp-main-dock-panel", state="visible")
    page.wait_for_selector(".jp-LabShell:not(.jp-mod-devMode)", state="attached")


def run_all_cells(page, timeout_ms: int = RUN_TIMEOUT_MS) -> None:
    """Run > Run All Cells in the menu bar, then wait for every cell and an idle kernel."""
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
    page.wait_for_function(
        """() => {
            const nb = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
            if (!nb) return false;
            const prompts = [...nb.querySelectorAll('.jp-CodeCell .jp-InputPrompt')];
            const done = prompts.every(p => /\\[\\d+\\]/.test(p.textContent));
            const status = nb.querySelector('.jp-Notebook-ExecutionIndicator');
            const idle = !status || status.getAttribute('data-status') === 'idle';
            return prompts.length > 0 && done && idle;
        }""",
        timeout=timeout_ms,
    )
