"""Every labkit output survives without its kernel: execute, save, reopen, export.

One notebook shows every view (graph, profile, memory, dashboard after a finished fit,
optimize panel after a measurement, attention, the tabbed trace view). It is run and
saved in JupyterLab; its kernel is shut down and the notebook reopened with a new kernel,
where no widget model exists: each labkit output must show labkit's final-state picture
(the extension's static fallback), never "model not found" or the first, stale state.
The saved file is then exported with ``jupyter nbconvert --to html``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from labkit.views._keep import LABKIT_MIME
from tests.browser._notebook import cell, notebook, open_and_run, save_shot
from tests.browser._views import CELLS
from tests.browser.lab_page import open_lab

pytestmark = pytest.mark.browser

DOCS = Path(__file__).resolve().parents[2] / "docs" / "images"
NAME = "keep.ipynb"
KEEP_CELLS = [*CELLS, "t.show()"]
DASHBOARD = 4


@pytest.fixture(scope="module")
def saved(browser, lab_server) -> Path:
    """The notebook run once and saved from JupyterLab; its kernel shut down."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(30_000)
    try:
        open_and_run(page, lab_server, notebook(*KEEP_CELLS), NAME)
        cell(page, DASHBOARD).locator(".lk-dash-status[data-status='finished']").wait_for()
        # while the kernel lives, the extension shows the live widgets, not the pictures
        states = page.locator(".lk-output").evaluate_all("els => els.map(e => e.dataset.labkit)")
        assert states == ["live"] * 7, states
        path = Path(lab_server.root_dir) / NAME
        page.keyboard.press("Control+s")
        deadline = time.monotonic() + 30
        while len(_labkit_outputs(path)) < len(KEEP_CELLS) - 1:
            assert time.monotonic() < deadline, "JupyterLab did not save the outputs"
            time.sleep(0.25)
    finally:
        context.close()
    for session in lab_server.get_json("api/sessions"):
        if session["path"].endswith(NAME):
            lab_server.request(f"api/sessions/{session['id']}", method="DELETE").close()
    return path


def _labkit_outputs(path: Path) -> list[tuple[int, dict]]:
    nb = json.loads(path.read_text())
    join = lambda v: "".join(v) if isinstance(v, list) else v  # noqa: E731  (lines on disk)
    return [
        (i, {k: join(v) for k, v in out["data"].items()})
        for i, c in enumerate(nb["cells"])
        for out in c.get("outputs", [])
        if LABKIT_MIME in out.get("data", {})
    ]


def test_saved_file_holds_final_pictures(saved):
    outs = _labkit_outputs(saved)
    assert [i for i, _ in outs] == [1, 2, 3, 4, 5, 6, 7], [i for i, _ in outs]
    views = [d[LABKIT_MIME]["view"] for _, d in outs]
    assert views == [
        "GraphView",
        "ProfileView",
        "MemoryTimeline",
        "Dashboard",
        "OptimizePanel",
        "AttentionView",
        "TraceView",
    ]
    for _, data in outs:  # issue 37: images and text, no HTML a sanitizer would escape
        assert "text/html" not in data and "image/png" in data, data.keys()
    dash = dict(outs)[DASHBOARD]
    text = dash["text/plain"]
    assert "finished at step 12 of 12 · epoch 2 of 2" in text, text[:400]
    assert "status='finished'" in dash["text/plain"]


def test_reopened_with_a_new_kernel_shows_the_pictures(browser, lab_server, saved):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(30_000)
    try:
        open_lab(page, lab_server, NAME)  # a new kernel: no widget model exists
        outputs = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .lk-output")
        page.wait_for_function(
            "() => [...document.querySelectorAll('.lk-output')]"
            ".filter(e => e.dataset.labkit === 'static').length >= 7",
            timeout=30_000,
        )
        assert outputs.count() == 7
        text = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)").inner_text()
        assert "model not found" not in text and "status='idle'" not in text
        for k in range(7):  # each picture drawn (an image, not its source as text)
            static = outputs.nth(k).locator(".lk-static")
            assert static.is_visible() and static.locator("img").count() == 1, k
            assert static.locator("img").evaluate("i => i.complete && i.naturalWidth > 100"), k
        save_shot(
            cell(page, DASHBOARD).locator(".lk-output"),
            "dashboard-reopened",
            also=DOCS / "dashboard-reopened.png",
        )
    finally:
        context.close()


def test_html_export_shows_the_final_state(saved, tmp_path):
    out = tmp_path / "keep.html"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "jupyter",
            "nbconvert",
            "--to",
            "html",
            str(saved),
            "--output",
            str(out),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    html = out.read_text()
    assert "status=&#x27;idle&#x27;" not in html and "status='idle'" not in html
    # one picture per view (PNG, or SVG where small): 7 views
    assert len(re.findall(r'<img [^>]*src="data:image/(?:png|svg\+xml);base64,', html)) == 7
    assert "&lt;img" not in html and "&lt;pre" not in html


RELOAD_CELLS = [
    "import torch, labkit, ipywidgets\n"
    "torch.manual_seed(0)\n"
    "net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))\n"
    "t = labkit.trace(net, torch.randn(3, 4))",
    "t.show()",
    "from labkit.views import GraphView\nGraphView(t)",
    "ipywidgets.IntSlider(3)",
]


def test_reload_with_the_kernel_alive_is_live_and_a_restart_shows_pictures(browser, lab_server):
    """Run, save, reload with the kernel alive: the labkit views re-attach to their live
    models as an IntSlider does (within 10 s); after a kernel restart, the pictures."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(30_000)
    try:
        open_and_run(page, lab_server, notebook(*RELOAD_CELLS), "reload.ipynb")
        outputs = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .lk-output")
        assert outputs.evaluate_all("els => els.map(e => e.dataset.labkit)") == ["live"] * 2
        page.keyboard.press("Control+s")
        time.sleep(1.5)
        page.reload()
        start = time.monotonic()
        page.wait_for_function(
            "() => { const o = [...document.querySelectorAll('.lk-output')];"
            " return o.length === 2 && o.every(e => e.dataset.labkit === 'live'"
            " && e.querySelector('.lk-live .lk-view')); }",
            timeout=10_000,
        )
        live_s = time.monotonic() - start
        slider = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .widget-slider")
        slider.first.wait_for()
        assert live_s < 10, live_s
        print(f"live again {live_s:.1f} s after the reload")
        text = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)").inner_text()
        assert "model not found" not in text
        # the kernel restarted: the models are gone for good, the pictures stand in
        page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)").click()
        page.keyboard.press("Escape")
        page.keyboard.press("0")
        page.keyboard.press("0")
        page.locator(".jp-Dialog-button.jp-mod-accept").click()
        page.reload()
        page.wait_for_function(
            "() => { const o = [...document.querySelectorAll('.lk-output')];"
            " return o.length === 2 && o.every(e => e.dataset.labkit === 'static'); }",
            timeout=30_000,
        )
    finally:
        context.close()
