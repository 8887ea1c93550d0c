"""Browser-test harness: a real ``jupyter lab`` driven by Debian's Chromium.

Fixtures:
    lab_server: ``jupyter lab`` on a free 127.0.0.1 port with a token, rooted in a
        temporary directory; started once per session, stopped (whole process
        group, kernels included) at the end.
    browser: Chromium from ``/usr/bin/chromium`` through Playwright (sync API).
    page: a fresh page per test, on a 1400x900 viewport.
    open_and_run: ``open_and_run(notebook) -> page`` copies a notebook into the
        server root, opens it in JupyterLab, runs all cells through the Run menu
        and waits until the kernel is idle and every cell has run.

A failing browser test saves a screenshot under ``test-artifacts/`` and prints
its path.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import nbformat
import pytest

from tests.browser.lab_page import ARTIFACTS, RUN_TIMEOUT_MS, open_lab, run_all_cells

# helpers (tests/browser/_notebook.py) import these from here
__all__ = ["ARTIFACTS", "CHROMIUM", "CHROMIUM_ARGS", "RUN_TIMEOUT_MS", "open_lab", "run_all_cells"]
from tests.jupyter_process import JupyterProcess

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
PYTHON3_KERNELSPEC = {"name": "python3", "display_name": "Python 3", "language": "python"}


@pytest.fixture(scope="session")
def lab_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterProcess]:
    root = tmp_path_factory.mktemp("lab-root")
    server = JupyterProcess(root, app="lab", log_path=root.parent / "jupyter-lab.log")
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def browser():
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: run `make test` (it installs Debian's chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser, lab_server: JupyterProcess):
    """A fresh page; kernels its notebooks started are shut down afterwards."""
    before = {s["id"] for s in lab_server.get_json("api/sessions")}
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(30_000)
    yield page
    context.close()
    for session in lab_server.get_json("api/sessions"):
        if session["id"] not in before:  # each idle kernel holds torch: free it
            lab_server.request(f"api/sessions/{session['id']}", method="DELETE").close()


@pytest.fixture
def open_and_run(page, lab_server: JupyterProcess) -> Callable[..., object]:
    """``open_and_run(notebook_path_or_NotebookNode, name=None) -> page``."""

    def _open_and_run(notebook: Path | nbformat.NotebookNode, name: str | None = None):
        if not isinstance(notebook, nbformat.NotebookNode):
            name = name or Path(notebook).name
            notebook = nbformat.read(notebook, as_version=4)
        name = name or "notebook.ipynb"
        # without a kernelspec JupyterLab asks which kernel to start
        notebook.metadata.setdefault("kernelspec", PYTHON3_KERNELSPEC)
        nbformat.write(notebook, lab_server.root_dir / name)
        open_lab(page, lab_server, name)  # waits for the kernel
        page.locator(".jp-NotebookPanel .jp-Cell").first.click()
        run_all_cells(page)
        return page

    return _open_and_run


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    outcome = yield
    report = outcome.get_result()
    page = getattr(item, "funcargs", {}).get("page")
    if report.when in ("setup", "call") and report.failed and page is not None:
        ARTIFACTS.mkdir(exist_ok=True)
        safe = re.sub(r"[^\w.-]+", "_", item.nodeid)
        path = ARTIFACTS / f"{safe}.png"
        try:
            page.screenshot(path=str(path), full_page=True)
        except Exception as exc:  # the page may be gone; the failure itself matters more
            report.sections.append(("browser screenshot", f"could not save: {exc}"))
        else:
            print(f"\nscreenshot of the failing page: {path}")
            report.sections.append(("browser screenshot", str(path)))
