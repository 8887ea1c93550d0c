"""A watched plain loop's live dashboard in JupyterLab, and its Stop while the cell runs.

The loop is the user's own ``for`` loop with ``labkit.watch`` added. The kernel is busy
in the cell and reads no widget messages, so the dashboard's Stop posts to labkit's
server extension, which creates the stop file ``run.step`` polls; the next ``run.step``
raises ``RunStopped`` and the ``with`` block ends the run as ``stopped``.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import nbformat
import pytest

from tests.browser._notebook import cell, notebook, output_text
from tests.browser.lab_page import open_lab, start_run_all, wait_all_ran

pytestmark = pytest.mark.browser

SETUP = """\
import torch
import torch.nn.functional as F
from torch import nn
import labkit

torch.manual_seed(0)
x = torch.randn(256, 8)
y = (x.sum(1) > 0).long()
model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
"""
LOOP = """\
done = 0
with labkit.watch(model, opt, logdir="runs/watch-stop", total_steps=100_000) as run:
    for i in range(100_000):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        run.step(loss=loss)
        done += 1
"""
READBACK = (
    'print("STATUS", run.status, "STEPS", len(run.steps), "DONE", done, "SOURCE", run.source)'
)


def test_stop_reaches_a_watched_loop(browser, lab_server):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(30_000)
    try:
        nbformat.write(notebook(SETUP, LOOP, READBACK), Path(lab_server.root_dir) / "watch.ipynb")
        open_lab(page, lab_server, "watch.ipynb")
        page.locator(".jp-NotebookPanel .jp-Cell").first.click()
        start_run_all(page)
        dash = cell(page, 1).locator(".lk-dashboard")
        dash.locator(".lk-dash-status[data-status='running']").wait_for(timeout=90_000)
        page.wait_for_function(
            "el => +(el.querySelector('.lk-dash-progress').textContent.match(/step (\\d+)/)"
            " || [0, 0])[1] >= 20",
            arg=dash.element_handle(),
            timeout=60_000,
        )
        assert "*" in cell(page, 1).locator(".jp-InputPrompt").inner_text()  # still running
        with page.expect_response(re.compile(r"/labkit/api/stop$")) as answer:
            dash.locator("button.lk-dash-stop").click()
        clicked = time.monotonic()
        assert answer.value.status == 200, answer.value.text()
        dash.locator(".lk-dash-status[data-status='stopped']").wait_for(timeout=60_000)
        seconds = time.monotonic() - clicked
        wait_all_ran(page)
        assert seconds < 20, f"the loop took {seconds:.1f} s to stop after the click"
        m = re.search(r"STATUS (\w+) STEPS (\d+) DONE (\d+) SOURCE (\w+)", output_text(page, 2))
        assert m, output_text(page, 2)
        status, steps, done, source = m.groups()
        # the step that saw the Stop is recorded; its run.step raised before `done += 1`
        assert (status, source) == ("stopped", "loop") and int(steps) == int(done) + 1, m.group()
        assert int(steps) < 100_000
    finally:
        context.close()
