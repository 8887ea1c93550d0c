"""Outputs keep the final state: a real kernel (nbclient) shows a dashboard and an optimize
panel, later cells change them, and the saved outputs hold the final picture."""

from __future__ import annotations

import base64

import nbformat
from nbclient import NotebookClient

from labkit.train.run import Run
from labkit.views._final_state import dashboard_status
from labkit.views._keep import LABKIT_MIME
from labkit.views.dashboard import Dashboard

PNG = b"\x89PNG"
STEPS = [
    {
        "step": s,
        "epoch": 0,
        "loss": 1.0 / s,
        "compute_time": 0.01,
        "data_time": 0.002,
        "samples": 32,
    }
    for s in range(1, 4)
]
CELLS = [
    "from labkit.views import Dashboard\n"
    "from labkit.train.run import Run\n"
    "dash = Dashboard(throttle=0.0)\n"
    "dash.push({'type': 'start', 'total_steps': 30, 'max_epochs': 3, 'world_size': 1})\n"
    "dash",
    f"dash.push({{'type': 'steps', 'memory': 2048, 'steps': {STEPS!r}}})\n"
    "dash.push({'type': 'end', 'status': 'stopped'})\n"
    "dash.finish(Run(status='stopped', notes=['one process']))",
    "import torch\n"
    "from torch import nn\n"
    "from labkit.optimize import Recipe\n"
    "from labkit.panels import OptimizePanel\n"
    "torch.manual_seed(0)\n"
    "panel = OptimizePanel(nn.Linear(8, 4).eval(), torch.randn(4, 8), mode='inference',\n"
    "    recipe=Recipe(channels_last=True), steps=2, warmup=0, memory=False, drift=False)\n"
    "panel",
    "panel.measure().join()",
]


def test_outputs_are_replaced_by_the_final_picture(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in CELLS]
    NotebookClient(
        nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    dash_out, panel_out = nb.cells[0].outputs, nb.cells[2].outputs
    assert len(dash_out) == 1 and nb.cells[1].outputs == [] and nb.cells[3].outputs == []
    data = dash_out[0]["data"]
    assert data[LABKIT_MIME] == {"version": 1, "view": "Dashboard"}
    assert "text/html" not in data  # a sanitizer would show it as source (issue 37)
    text = data["text/plain"]
    # the state after the second cell, not the idle dashboard the first one showed
    assert "stopped at step 3 of 30 · epoch 1 of 3" in text, text
    assert f"{1 / 3:.4g}" in text and "- one process" in text
    assert base64.b64decode(data["image/png"]).startswith(PNG)
    assert "status='stopped'" in text
    data = panel_out[0]["data"]
    assert data[LABKIT_MIME]["view"] == "OptimizePanel"
    assert "text/html" not in data
    assert "channels_last" in data["text/plain"] and "speedup" in data["text/plain"]
    assert "not measured" not in data["text/plain"]
    assert base64.b64decode(data["image/png"]).startswith(PNG)


def test_dashboard_status_table_matches_the_events():
    dash = Dashboard(throttle=0.0)
    dash.push({"type": "start", "total_steps": 30, "max_epochs": 3, "world_size": 2})
    dash.push({"type": "steps", "memory": 3 * 2**20, "steps": STEPS})
    dash.finish(Run(status="stopped"))
    text = dashboard_status(dash.stats, dash.status)
    lines = text.splitlines()
    assert lines[0] == "stopped at step 3 of 30 · epoch 1 of 3"
    figures = dict(line.split(None, 1) for line in lines[1:] if not line.startswith(("s", "d")))
    assert figures["loss"].strip() == f"{1 / 3:.4g}"
    assert figures["memory"].strip() == "3.00 MiB" and figures["processes"].strip() == "2"
    # samples/s over the window: 2 processes x 3 x 32 samples / 3 x 12 ms
    assert f"samples/s  {2 * 96 / 0.036:.1f}" in text
    picture = dash._picture()
    assert base64.b64decode(picture["image/png"]).startswith(PNG)
    assert picture["text/html"].count("<pre") == 1
