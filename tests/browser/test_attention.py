"""AttentionView in a real JupyterLab: KarateClub, pick another node by clicking it."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from tests.browser.lab_page import ARTIFACTS, open_lab, run_all_cells

pytestmark = pytest.mark.browser

SETUP = """\
import warnings
warnings.filterwarnings("ignore", "`torch.jit.script` is deprecated", DeprecationWarning)
import torch
from labkit.gnn import GAT, karate
from labkit.panels import AttentionView
torch.manual_seed(0)
data = karate()
model = GAT(data.num_features, 4, 4, heads=2, out_heads=2)
"""
CELLS = [
    SETUP,
    "av = AttentionView(model, data, node=0, hops=2)\nav",
    "print('PICKED', av.node, [round(s, 4) for s in av.head_sums()])",
]
VIEW, READBACK = 1, 2


def _cell(page, index):
    return page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell").nth(index)


def _rerun(page, index, expect):
    """Run one cell again and wait for ``expect`` in its output; return the output text."""
    c = _cell(page, index)
    c.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Control+Enter")
    c.locator(".jp-OutputArea-output", has_text=expect).first.wait_for()
    return c.locator(".jp-OutputArea").inner_text()


def _shot(locator, name):
    ARTIFACTS.mkdir(exist_ok=True)
    locator.screenshot(path=str(ARTIFACTS / f"{name}.png"))


@pytest.fixture
def page(browser, lab_server):
    context = browser.new_context(viewport={"width": 1300, "height": 1000})
    pg = context.new_page()
    pg.set_default_timeout(30_000)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in CELLS]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(nb, Path(lab_server.root_dir) / "attention.ipynb")
    open_lab(pg, lab_server, "attention.ipynb")
    pg.locator(".jp-NotebookPanel .jp-Cell").first.click()
    run_all_cells(pg)
    yield pg
    context.close()


def _radius(av, node: int) -> float:
    return float(av.locator(f".lk-att-node[data-node='{node}'] circle").get_attribute("r"))


def test_attention_view_draws_karate_and_picks_another_node(page):
    av = _cell(page, VIEW).locator(".lk-attention")
    av.locator(".lk-att-node").first.wait_for()
    # node 0 of the karate club has 16 neighbours plus its self loop; the picked node is
    # drawn larger than the others
    assert _radius(av, 0) > _radius(av, 1)
    # node ids read at 12 px on screen (issue 37: they were ~6 px), and a legend says what
    # the colours are: the node classes drawn and the edge weight scale
    sizes = av.locator(".lk-att-id").evaluate_all(
        "ts => ts.map(t => t.getBoundingClientRect().height)"
    )
    assert min(sizes) >= 11, sizes
    classes = av.locator(".lk-att-class").all_inner_texts()
    assert classes == sorted(classes) and len(classes) >= 2, classes
    assert av.locator(".lk-att-scale").inner_text().startswith("edge weight 0")
    hop1 = av.locator(".lk-att-edge[data-hop='1']")
    assert hop1.count() == 17
    weights = [float(w) for w in hop1.evaluate_all("es => es.map(e => e.dataset.weight)")]
    assert sum(weights) == pytest.approx(1.0, abs=1e-3)  # the mean of per-head sums of 1
    assert "head sums 1.000 / 1.000" in av.locator(".lk-att-info").inner_text()
    _shot(av, "attention-node0")

    # click a neighbour: the kernel picks it and sends its neighbourhood
    target = av.locator(".lk-att-node[data-node='33']")
    target.click()
    av.locator(".lk-att-info", has_text="node 33:").wait_for()
    assert _radius(av, 33) > _radius(av, 0)
    dsts = av.locator(".lk-att-edge[data-hop='1']").evaluate_all("es => es.map(e => e.dataset.dst)")
    assert set(dsts) == {"33"}
    out = _rerun(page, READBACK, "PICKED 33")
    assert re.search(r"PICKED 33 \[1\.0, 1\.0\]", out), out

    # one head instead of the mean: the drawn weights change, and still sum to 1
    av.locator(".lk-att-head").select_option("1")
    page.wait_for_function(
        "el => el.querySelector('.lk-att-head').value === '1'", arg=av.element_handle()
    )
    head1 = av.locator(".lk-att-edge[data-hop='1']").evaluate_all(
        "es => es.map(e => Number(e.dataset.weight))"
    )
    assert sum(head1) == pytest.approx(1.0, abs=1e-3)
    _shot(av, "attention-node33-head1")
