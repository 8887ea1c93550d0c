"""The live training dashboard in a real JupyterLab, driven by Chromium.

A notebook fits a tiny MLP on CPU in the background (``lab.fit(background=True)``, so the
kernel stays free for the widget's messages) with the dashboard showing; the test watches
the loss curve and the progress move, clicks Stop, and reads back in the kernel that the
run stopped and kept a checkpoint.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.browser._notebook import cell, notebook, open_and_run, rerun_cell, save_shot

pytestmark = pytest.mark.browser

DOCS = Path(__file__).resolve().parents[2] / "docs" / "images"

SETUP = """\
import os
import torch
from torch import nn
from torch.utils.data import TensorDataset
import labkit

torch.manual_seed(0)
x = torch.randn(512, 8)
y = (x.sum(1) > 0).long()
data = (TensorDataset(x[:384], y[:384]), TensorDataset(x[384:], y[384:]))
model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))
acc = lambda out, t: (out.argmax(1) == t).float().mean()
lab = labkit.Lab(model, data, loss=nn.functional.cross_entropy, lr=1e-2, batch_size=4,
                 metrics={"acc": acc}, logdir="runs/dashboard")
"""
FIT = "run = lab.fit(max_epochs=200, seed=0, background=True)"
# harmless while the run goes on (Run All); after Stop, waits for the run to end
READBACK = """\
if lab.dashboard.stop_requested:
    run.wait(timeout=60)
ckpt = run.last_checkpoint
print("STATUS", run.status, "CKPT", bool(ckpt) and os.path.exists(ckpt))
"""
FIT_CELL, READBACK_CELL = 1, 2


def _step(dash) -> int:
    m = re.search(r"step (\d+)", dash.locator(".lk-dash-progress").inner_text())
    return int(m.group(1)) if m else 0


def test_dashboard_updates_and_stop_keeps_a_checkpoint(browser, lab_server):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(30_000)
    try:
        open_and_run(page, lab_server, notebook(SETUP, FIT, READBACK), "dashboard.ipynb")
        dash = cell(page, FIT_CELL).locator(".lk-dashboard")
        dash.wait_for()
        dash.locator(".lk-dash-status[data-status='running']").wait_for(timeout=60_000)

        # the loss curve and the progress appear ...
        loss = dash.locator(".lk-dash-chart[data-title='loss']")
        page.wait_for_function(
            "el => (JSON.parse(el.querySelector(\".lk-dash-chart[data-title='loss']\")"
            "?.dataset.series || '{}').train_loss || 0) > 5",
            arg=dash.element_handle(),
            timeout=60_000,
        )
        first_step, first_d = _step(dash), loss.get_attribute("data-last-x")
        assert first_step > 0
        assert re.search(r"step \d+/\d+ · epoch \d+/200", dash.inner_text())
        # ... and keep moving while the kernel is free
        page.wait_for_function(
            "([el, n]) => { const m = el.querySelector('.lk-dash-progress').textContent"
            ".match(/step (\\d+)/); return m && +m[1] > n; }",
            arg=[dash.element_handle(), first_step + 20],
            timeout=60_000,
        )
        assert _step(dash) > first_step and loss.get_attribute("data-last-x") != first_d
        bar = dash.locator(".lk-dash-bar").evaluate("el => parseFloat(el.style.width)")
        assert bar > 0
        loss_stat = dash.locator("[data-stat='loss']").inner_text()
        assert re.search(r"loss: \d", loss_stat), loss_stat
        save_shot(dash, "dashboard-running", also=DOCS / "dashboard.png")

        # Stop: the step finishes, a checkpoint is kept, the run says "stopped"
        dash.evaluate("el => { el.__lkMark = 1; }")
        dash.locator("button.lk-dash-stop").click()
        dash.locator(".lk-dash-status[data-status='stopped']").wait_for(timeout=60_000)
        assert dash.locator("button.lk-dash-stop").inner_text() == "Stopped"
        stopped_at = _step(dash)
        assert 0 < stopped_at < 200 * 96
        save_shot(dash, "dashboard-stopped")

        out = rerun_cell(page, READBACK_CELL, "STATUS stopped", timeout_ms=90_000)
        assert "STATUS stopped CKPT True" in out, out
        # the final picture reached the output (for a saved notebook) ...
        output = cell(page, FIT_CELL).locator(".lk-output")
        output.locator(".lk-static img").wait_for(state="attached")  # the stopped picture
        # ... without re-creating the live view the user is looking at
        assert dash.evaluate("el => el.__lkMark") == 1
        assert output.get_attribute("data-labkit") == "live"
        _check_chart_controls(page, dash)
    finally:
        context.close()


def _check_chart_controls(page, dash) -> None:
    """uPlot chart: axes from the data, hover values, smoothing, log scale, zoom, resize."""
    chart = dash.locator(".lk-dash-chart[data-title='loss']")
    lo, hi = json.loads(chart.get_attribute("data-y-range"))
    assert 0 <= lo < hi, (lo, hi)  # cross-entropy >= 0: the axis does not dip below zero
    # the drawn axis follows the data as it grows (not the first update's range)
    assert json.loads(chart.get_attribute("data-y-scale")) == pytest.approx([lo, hi], rel=1e-3)
    labels = chart.locator(".u-legend .u-label").all_inner_texts()
    assert labels[:3] == ["step", "train_loss (raw)", "train_loss"], labels  # smoothed + raw
    over = chart.locator(".u-over")
    box = over.bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.5)
    values = chart.locator(".u-legend .u-value").all_inner_texts()
    assert re.fullmatch(r"[\d.,]+", values[0]) and re.search(r"\d", values[2]), values
    dash.locator("input.lk-dash-log").check()
    page.wait_for_function("el => el.dataset.log === 'true'", arg=chart.element_handle())
    page.mouse.move(box["x"] + box["width"] * 0.2, box["y"] + 20)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + 20, steps=5)
    page.mouse.up()
    zoom = [float(v) for v in chart.get_attribute("data-zoom").split(",")]
    assert zoom[0] < zoom[1]
    over.dblclick()
    page.wait_for_function("el => !el.dataset.zoom", arg=chart.element_handle())
    save_shot(dash, "dashboard-log-scale")
    dash.locator("input.lk-dash-log").uncheck()
    width = chart.locator("canvas").first.bounding_box()["width"]
    page.set_viewport_size({"width": 1000, "height": 1000})
    page.wait_for_function(
        "([el, w]) => Math.abs(el.querySelector('canvas').getBoundingClientRect().width - w) > 40",
        arg=[chart.element_handle(), width],
    )


DDP_SETUP = """\
import torch, torch.nn.functional as F
from torch import nn
from torch.utils.data import TensorDataset
import labkit

torch.manual_seed(0)
x = torch.randn(1024, 8)
y = (x.sum(1) > 0).long()
class Net(nn.Module):  # defined in the notebook: cannot be pickled by reference
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    def forward(self, x):
        return self.body(x)
lab = labkit.Lab(Net(), (TensorDataset(x[:768], y[:768]), TensorDataset(x[768:], y[768:])),
                 loss=F.cross_entropy, lr=1e-2, batch_size=4, logdir="runs/dashboard-ddp")
"""
DDP_FIT = "run = lab.fit(max_epochs=2, devices=2, accelerator='cpu')"
DDP_READBACK = "print('DDP', run.status, run.config['launch'], len(run.steps))"

# every progress text the page shows, recorded as it changes (set before Run All)
_WATCH_PROGRESS = """() => {
    window.__lkProgress = [];
    new MutationObserver(() => {
        for (const el of document.querySelectorAll('.lk-dash-progress')) {
            const t = el.textContent;
            if (window.__lkProgress[window.__lkProgress.length - 1] !== t)
                window.__lkProgress.push(t);
        }
    }).observe(document.body, {subtree: true, childList: true, characterData: true});
}"""


@pytest.mark.slow
def test_ddp_two_cpu_processes_stream_rank0_metrics(browser, lab_server):
    import nbformat

    from tests.browser.conftest import open_lab, run_all_cells

    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(30_000)
    try:
        nb = notebook(DDP_SETUP, DDP_FIT, DDP_READBACK)
        nbformat.write(nb, Path(lab_server.root_dir) / "dashboard-ddp.ipynb")
        open_lab(page, lab_server, "dashboard-ddp.ipynb")
        page.evaluate(_WATCH_PROGRESS)
        page.locator(".jp-NotebookPanel .jp-Cell").first.click()
        run_all_cells(page)

        # 768 samples / 2 ranks / 4 per batch = 96 steps per epoch, 2 epochs, seen from rank 0
        out = cell(page, 2).locator(".jp-OutputArea").inner_text()
        assert "DDP finished fork 192" in out, out
        dash = cell(page, 1).locator(".lk-dashboard")
        dash.locator(".lk-dash-status[data-status='finished']").wait_for()
        assert "processes: 2" in dash.locator("[data-stat='processes']").inner_text()
        assert "step 192/192" in dash.locator(".lk-dash-progress").inner_text()
        counts = json.loads(
            dash.locator(".lk-dash-chart[data-title='loss']").get_attribute("data-series")
        )
        assert counts["train_loss"] >= 20 and counts["val_loss"] == 2, counts
        # the dashboard moved while the processes trained, not only at the end
        seen = page.evaluate("window.__lkProgress")
        steps = [int(m.group(1)) for t in seen if (m := re.search(r"step (\d+)/192", t))]
        assert any(0 < s < 192 for s in steps), seen
        save_shot(dash, "dashboard-ddp")
    finally:
        context.close()
