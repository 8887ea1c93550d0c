"""Stop works while the fit's cell runs: the README's ``lab.fit(max_epochs=3)``, foreground.

The kernel is busy in the cell and reads no widget messages, so the dashboard's Stop
posts to labkit's server extension, which creates the stop file the trainer polls. The
test clicks Stop a few steps in and checks that the fit ends within seconds, in the first
epoch, as "stopped" with a checkpoint, and that the request went through the server.
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
import os
import torch
from torch import nn
from torch.utils.data import TensorDataset
import labkit

torch.manual_seed(0)
x = torch.randn(4096, 8)
y = (x.sum(1) > 0).long()
data = (TensorDataset(x[:3072], y[:3072]), TensorDataset(x[3072:], y[3072:]))
model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))
lab = labkit.Lab(model, data, loss=nn.functional.cross_entropy, batch_size=4,
                 logdir="runs/stop-foreground")
"""
FIT = "run = lab.fit(max_epochs=3)"  # the README's call: 3 x 768 steps if nothing stops it
READBACK = """\
ckpt = run.last_checkpoint
print("STATUS", run.status, "LAST", run.steps[-1]["step"], "OF", 3 * 768,
      "CKPT", bool(ckpt) and os.path.exists(ckpt))
"""


def test_stop_reaches_a_foreground_fit(browser, lab_server):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(30_000)
    try:
        nbformat.write(notebook(SETUP, FIT, READBACK), Path(lab_server.root_dir) / "stop.ipynb")
        open_lab(page, lab_server, "stop.ipynb")
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
        # the cell is still running: the kernel cannot read a widget message now
        assert "*" in cell(page, 1).locator(".jp-InputPrompt").inner_text()
        with page.expect_response(re.compile(r"/labkit/api/stop$")) as answer:
            dash.locator("button.lk-dash-stop").click()
        clicked = time.monotonic()
        assert answer.value.status == 200, answer.value.text()
        dash.locator(".lk-dash-status[data-status='stopped']").wait_for(timeout=60_000)
        seconds = time.monotonic() - clicked
        wait_all_ran(page)

        button = dash.locator("button.lk-dash-stop")
        assert button.inner_text() == "Stopped" and button.get_attribute("data-via") == "server"
        assert seconds < 20, f"the fit took {seconds:.1f} s to stop after the click"
        m = re.search(r"STATUS (\w+) LAST (\d+) OF (\d+) CKPT (\w+)", output_text(page, 2))
        assert m, output_text(page, 2)
        status, last, total, ckpt = m.groups()
        assert status == "stopped" and ckpt == "True" and int(last) < int(total) // 3, m.group()
        # the counter names the epoch the fit stopped in
        assert re.search(r"epoch 1/3", dash.locator(".lk-dash-progress").inner_text())
        assert dash.locator(".lk-dash-stopnote").inner_text() == ""
    finally:
        context.close()
