"""The browser harness itself: a widget renders, and no server process leaks."""

from __future__ import annotations

from pathlib import Path

import nbformat
import psutil
import pytest

from tests.jupyter_process import JupyterProcess

pytestmark = pytest.mark.browser


def test_ipywidgets_slider_renders(open_and_run):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("import ipywidgets as w\nx = 21 * 2"),
        nbformat.v4.new_code_cell("w.IntSlider(value=x, min=0, max=100, description='answer')"),
    ]
    page = open_and_run(nb, "slider.ipynb")
    slider = page.locator(".jupyter-widgets.widget-slider")
    slider.wait_for(state="visible")
    assert slider.locator(".widget-readout").inner_text().strip() == "42"
    assert "answer" in slider.inner_text()


def test_kernels_of_earlier_pages_are_shut_down(lab_server):
    """Runs after the slider test: its page's teardown ended the notebook's kernel.

    The server is shared by the whole browser suite, so pages that other modules keep
    open for all their tests may still hold kernels: only the slider's must be gone.
    """
    paths = [s["path"] for s in lab_server.get_json("api/sessions")]
    assert not [p for p in paths if p.endswith("slider.ipynb")], paths


def test_server_stop_leaves_no_process(tmp_path: Path):
    """A server with a running kernel stops without leaving a child behind."""
    server = JupyterProcess(tmp_path / "root", app="lab", log_path=tmp_path / "lab.log")
    (tmp_path / "root").mkdir()
    server.start()
    try:
        kernel = server.get_json("api/kernels", method="POST", body={"name": "python3"})
        assert kernel["id"]
        children = server.descendants()
        assert children, "the kernel should be a descendant of the server"
        pid = server.proc.pid
    finally:
        server.stop()
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    survivors = [p for p in children if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert survivors == []


def test_run_all_names_the_cell_that_raised(open_and_run):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("a = 1"),
        nbformat.v4.new_code_cell("raise ValueError('planted failure')"),
        nbformat.v4.new_code_cell("b = 2"),
    ]
    with pytest.raises(AssertionError, match=r"stopped after cell 1 \(0-based\) of 3") as info:
        open_and_run(nb, "raises.ipynb")
    assert "planted failure" in str(info.value)
    assert "screenshot: " in str(info.value)
