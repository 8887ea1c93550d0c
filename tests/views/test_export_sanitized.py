"""Every labkit view's picture survives an HTML export with sanitizing on, and shows in a
static renderer (nbconvert without JavaScript): issue 37, item 1.

A notebook holding each view (and a displayed Trace) is executed by nbclient without
saving widget state (JupyterLab's default), then exported by nbconvert's HTMLExporter
with ``sanitize_html=True`` (JupyterLab's "Sanitize HTML output", File > Save and Export
As > HTML) and without. Each view's output must be an ``<img>`` in both, never the
escaped text of one (``&lt;img src="data:...``) or of a table.
"""

from __future__ import annotations

import re

import nbformat
import pytest
from nbclient import NotebookClient
from nbconvert import HTMLExporter

SETUP = """\
import warnings
warnings.filterwarnings("ignore", "`torch.jit.script` is deprecated", DeprecationWarning)
import pathlib, tempfile
import torch
from torch import nn
import labkit
from labkit.panels import AttentionView, OptimizePanel
from labkit.views import Dashboard, GraphView, MemoryTimeline, ProfileView
from labkit.train.run import Run
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4))
x = torch.randn(8, 16)
t = labkit.memory(model, x).trace
"""
RUNS = """\
root = pathlib.Path(tempfile.mkdtemp())
for name, lr in (("a", 0.1), ("b", 0.01)):
    run = Run(logdir=str(root / name), config={"lr": lr})
    run.add_event({"type": "start", "t": 0.0})
    run.add_event({"type": "steps", "steps": [
        {"step": s, "epoch": 0, "loss": 1.0 / s ** lr, "t": 0.1 * s} for s in range(1, 41)]})
    run.add_event({"type": "epoch", "epoch": 0, "step": 40, "val_loss": 0.5 + lr, "t": 4.0})
    run.add_event({"type": "end", "status": "finished", "t": 5.0})
    run.save()
labkit.runs(root).show()"""
DASHBOARD = """\
dash = Dashboard(throttle=0.0)
dash.push({"type": "start", "total_steps": 4, "max_epochs": 1, "world_size": 1, "t": 0.0})
dash.push({"type": "steps", "memory": 0, "steps": [
    {"step": s, "epoch": 0, "loss": 1.0 / s, "compute_time": 0.01, "data_time": 0.0,
     "samples": 8, "t": float(s)} for s in range(1, 5)]})
dash.flush()
dash"""
OPTIMIZE = """\
from labkit.optimize import Recipe
panel = OptimizePanel(model.eval(), x, recipe=Recipe(channels_last=True), mode="inference",
                      steps=2, warmup=0, memory=False, drift=False)
panel.measure().join()
panel"""
ATTENTION = """\
from labkit.gnn import GAT, karate
data = karate()
AttentionView(GAT(data.num_features, 4, 4, heads=2), data, node=0, hops=1)"""

# cell source -> what it shows
VIEWS = {
    "t": "a displayed Trace",
    "GraphView(t)": "GraphView",
    "ProfileView(t)": "ProfileView",
    "MemoryTimeline(t)": "MemoryTimeline",
    "t.show()": "TraceView",
    DASHBOARD: "Dashboard",
    OPTIMIZE: "OptimizePanel",
    ATTENTION: "AttentionView",
    RUNS: "RunsView",
}
IMG = re.compile(r'<img [^>]*src="data:image/(png|svg\+xml);base64,[A-Za-z0-9+/=]{200,}"')
ESCAPED = re.compile(r"&lt;(img|div|pre|table|th|tr|td)\b")


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(SETUP), *map(nbformat.v4.new_code_cell, VIEWS)]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    path = tmp_path_factory.mktemp("export")
    NotebookClient(
        nb,
        timeout=300,
        kernel_name="python3",
        store_widget_state=False,
        resources={"metadata": {"path": str(path)}},
    ).execute()
    return nb


def _cells(page: str) -> list[str]:
    """The exported page cut into its code cells (in order)."""
    return re.split(r'<div[^>]*class="jp-Cell jp-CodeCell', page)[1:]


@pytest.mark.parametrize("sanitize", [True, False], ids=["sanitized", "static"])
def test_every_view_exports_as_an_image(executed: nbformat.NotebookNode, sanitize: bool) -> None:
    for cell in executed.cells:
        errors = [o for o in cell.outputs if o.output_type == "error"]
        assert not errors, (cell.source[:40], errors)
    page, _ = HTMLExporter(sanitize_html=sanitize).from_notebook_node(executed)
    cells = _cells(page)
    assert len(cells) == 1 + len(VIEWS)
    for (source, name), html in zip(VIEWS.items(), cells[1:], strict=True):
        escaped = ESCAPED.findall(html)
        assert not escaped, f"{name}: escaped markup {escaped[:3]} shows as text"
        assert "data:image/png;base64," not in re.sub(
            r'<img [^>]*src="data:image/[^"]+"', "", html
        ), f"{name}: a base64 picture outside an <img>"
        images = IMG.findall(html)
        assert len(images) == 1, f"{name} ({source[:30]!r}): {len(images)} pictures, want 1"


def test_the_pictures_are_the_views(executed: nbformat.NotebookNode) -> None:
    """Each output: the widget, its picture as image/png, and its figures as text."""
    import base64

    outputs = {
        name: c.outputs[-1] for c, name in zip(executed.cells[1:], VIEWS.values(), strict=True)
    }
    for name, out in outputs.items():
        assert "text/html" not in out.data, name
        assert base64.b64decode(out.data["image/png"]).startswith(b"\x89PNG"), name
    assert "ranked by best val_loss" in outputs["RunsView"].data["text/plain"]
    assert "Attention into node 0" in outputs["AttentionView"].data["text/plain"]
    assert "channels_last" in outputs["OptimizePanel"].data["text/plain"]
    assert "step 4 of 4" in outputs["Dashboard"].data["text/plain"]
    assert "image/svg+xml" in outputs["ProfileView"].data  # a small chart: SVG too
    assert outputs["GraphView"].metadata["image/png"]["width"] > 100  # 2x, shown at 1x
