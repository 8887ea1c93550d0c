"""The live diff view in a real JupyterLab, in Light and Dark: the graph coloured by each
module's change with its legend, a table row selecting (and revealing) its module's box,
the metric toggle recolouring the boxes, and every text meeting WCAG AA."""

from __future__ import annotations

import pytest

from tests.browser._contrast import ratio, text_contrast
from tests.browser._notebook import cell, notebook, open_and_run, rerun_cell, save_shot, set_theme

pytestmark = pytest.mark.browser

AA = 4.5
SETUP = """\
import torch
from torch import nn
import labkit
class Net(nn.Module):
    def __init__(self, hidden=(8, 8, 8)):
        super().__init__()
        self.blocks = nn.Sequential(*[nn.Sequential(nn.Linear(4, h), nn.ReLU(), nn.Linear(h, 4))
                                      for h in hidden])
    def forward(self, x):
        return self.blocks(x)
torch.manual_seed(0)
x = torch.randn(2, 4)
a = labkit.trace(Net(), x, repeat=3)
b = labkit.trace(Net((8, 24, 8)), x, repeat=3)
"""
SHOW = """\
from labkit.views.diff import DiffView
view = DiffView(labkit.diff(a, b), metric="params", depth=1)
view"""
CELLS = [
    SETUP,
    SHOW,
    "print('SELECTED', view.selected, view.metric)",
    "DiffView(labkit.diff(a, a), metric='time', depth=1)",
]
VIEW, READBACK, SAME = 1, 2, 3


@pytest.fixture(scope="module")
def page(browser, lab_server):
    context = browser.new_context(viewport={"width": 1300, "height": 1100})
    pg = context.new_page()
    pg.set_default_timeout(30_000)
    open_and_run(pg, lab_server, notebook(*CELLS), "diff_view.ipynb")
    yield pg
    set_theme(pg, "JupyterLab Light")  # the server's settings outlive this module
    context.close()


def _fills(view) -> dict[str, str]:
    return dict(
        view.locator("g.lk-node[data-k]").evaluate_all(
            "ns => ns.map(n => [n.dataset.k, n.dataset.fill])"
        )
    )


def _failures(view) -> tuple[int, list[dict]]:
    items = text_contrast(view)
    bad = [it for it in items if ratio(it["fg"], it["bg"]) < AA]
    return len(items), bad


def test_diff_view_colours_links_and_toggles(page):
    view = cell(page, VIEW).locator(".lk-diff").first
    view.wait_for()
    page.wait_for_function("el => el.dataset.ready === '1'", arg=view.element_handle())
    # the legend says what the colours mean, and within noise is shown
    legend = view.locator(".lk-diff-legend").inner_text()
    assert "more" in legend and "fewer" in legend and "within noise" in legend, legend
    assert view.locator(".lk-diff-head").inner_text().startswith("params +")
    # depth=1: the blocks are collapsed into one box, coloured red (it holds the change)
    fills = _fills(view)
    assert "rgb(178,24,43)" in fills.values(), fills
    # the first row is a Linear inside blocks.1: selecting it opens the frames around it,
    # draws its own box and highlights it
    first = view.locator("tbody tr").first
    module = first.get_attribute("data-module")
    node = first.get_attribute("data-node")
    assert module.startswith("blocks.1.") and node not in fills
    first.click()
    box = view.locator(f"g.lk-node[data-k='{node}']")
    box.wait_for()
    assert "lk-selected" in box.get_attribute("class")
    assert "lk-selected" in first.get_attribute("class")
    assert view.get_attribute("data-centered") == node
    # the kernel knows the selection
    out = rerun_cell(page, READBACK, "SELECTED")
    assert f"SELECTED {module} params" in out, out
    save_shot(view, "diff-view-params")
    # the toggle: FLOPs colour the same widened block by another measure; an unchanged
    # block's box keeps its neutral fill; the table follows
    before = _fills(view)
    view.locator(".lk-diff-metric[data-metric='flops']").click()
    page.wait_for_function(
        "el => el.querySelector('.lk-diff-head').textContent.startsWith('FLOPs')",
        arg=view.element_handle(),
    )
    after = _fills(view)
    assert after != before and after[node] != "var(--lk-bg2, #eee)"
    assert (
        view.locator(".lk-diff-metric[data-metric='flops']").get_attribute("aria-pressed") == "true"
    )
    out = rerun_cell(page, READBACK, "flops")
    assert "flops" in out, out


def test_a_trace_against_itself_is_hatched_within_noise(page):
    view = cell(page, SAME).locator(".lk-diff").first
    view.wait_for()
    assert "no change beyond noise" in view.locator(".lk-diff-head").inner_text()
    modules = view.locator("g.lk-node.lk-kind-m")
    assert modules.count() >= 1
    shown = modules.evaluate_all(
        "ns => ns.map(n => getComputedStyle(n.querySelector('.lk-hatch')).display)"
    )
    assert all(d != "none" for d in shown), shown
    hidden = view.locator("g.lk-node:not(.lk-kind-m) rect.lk-hatch").evaluate_all(
        "rs => rs.map(r => getComputedStyle(r).display)"
    )
    assert all(d == "none" for d in hidden), hidden  # input and output: no change to hatch
    save_shot(view, "diff-view-noise")


def test_diff_view_meets_wcag_aa_in_light_and_dark(page):
    view = cell(page, VIEW).locator(".lk-diff").first
    view.wait_for()
    report = {}
    for theme in ("JupyterLab Light", "JupyterLab Dark"):
        set_theme(page, theme)
        count, bad = _failures(view)
        assert count >= 10, (theme, count)
        same = cell(page, SAME).locator(".lk-diff").first
        more, worse = _failures(same)  # text over hatched boxes too
        assert more >= 10, (theme, more)
        report[theme] = bad + worse
        save_shot(view, f"diff-view-{theme.split()[-1].lower()}")
    failing = {k: v for k, v in report.items() if v}
    assert not failing, "\n".join(
        f"{t}: {len(b)} texts under {AA}:1, e.g. {b[:3]}" for t, b in failing.items()
    )
