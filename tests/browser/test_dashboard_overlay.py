"""Earlier runs are overlaid on the live dashboard only when asked, dimmed (issue 37 item 4).

Two runs are fitted first in sibling logdirs of one family; then a fit with the defaults
shows its own curves only (the earlier runs offered behind a toggle), and a fit with
``compare_with=True`` overlays them. In JupyterLab Light and Dark alike, an overlaid
curve stands out less from the chart's background than the current run's own curve
(contrast measured on the colours drawn, with their opacity over the background).
"""

from __future__ import annotations

import json

import pytest

from tests.browser._notebook import cell, notebook, open_and_run, save_shot, set_theme

pytestmark = pytest.mark.browser

SETUP = """\
import torch
from torch import nn
from torch.utils.data import TensorDataset
import labkit

torch.manual_seed(0)
x = torch.randn(512, 8)
y = (x.sum(1) > 0).long()
data = (TensorDataset(x[:384], y[:384]), TensorDataset(x[384:], y[384:]))

def make(name, lr):
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    return labkit.Lab(model, data, loss=nn.functional.cross_entropy, lr=lr, batch_size=32,
                      logdir=f"runs/overlay/{name}")

for name, lr in (("lr-0.1", 0.1), ("lr-0.001", 0.001)):
    make(name, lr).fit(max_epochs=2, dashboard=False)
"""
PLAIN = "plain = make('lr-0.01', 0.01).fit(max_epochs=2)"
COMPARED = "compared = make('lr-0.03', 0.03).fit(max_epochs=2, compare_with=True)"
PLAIN_CELL, COMPARED_CELL = 1, 2

# a CSS colour as drawn: [r, g, b, a] (the canvas parses any CSS colour form)
_RGBA = """c => { const x = document.createElement('canvas').getContext('2d');
  x.fillStyle = '#000'; x.fillStyle = c; const s = x.fillStyle;
  if (s.startsWith('#')) return [1, 3, 5].map(i => parseInt(s.slice(i, i + 2), 16)).concat([1]);
  return s.match(/[\\d.]+/g).map(Number); }"""


def _luminance(rgb: list[float]) -> float:
    def lin(c: float) -> float:
        c /= 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (lin(v) for v in rgb[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def _contrast(page, stroke: str, background: str) -> float:
    """WCAG contrast of ``stroke`` drawn (with its opacity) over ``background``."""
    fg, bg = page.evaluate(_RGBA, stroke), page.evaluate(_RGBA, background)
    a = fg[3] if len(fg) > 3 else 1.0
    seen = [a * f + (1 - a) * b for f, b in zip(fg[:3], bg[:3], strict=True)]
    hi, lo = sorted((_luminance(seen), _luminance(bg)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def _loss_chart(page, index: int):
    return cell(page, index).locator(".lk-dashboard .lk-dash-chart[data-title='loss']")


def test_earlier_runs_are_overlaid_only_when_asked_and_dimmed(page, lab_server):
    open_and_run(page, lab_server, notebook(SETUP, PLAIN, COMPARED), "overlay.ipynb")
    plain, compared = _loss_chart(page, PLAIN_CELL), _loss_chart(page, COMPARED_CELL)
    compared.wait_for()
    # by default: this run's curves only; the earlier runs are offered behind the toggle
    assert json.loads(plain.get_attribute("data-dim")) == []
    assert all(" · " not in k for k in json.loads(plain.get_attribute("data-series")))
    toggle = cell(page, PLAIN_CELL).locator(".lk-dash-compare-label")
    assert toggle.is_visible() and "earlier runs (2)" in toggle.inner_text()
    assert not toggle.locator("input").is_checked()
    # compare_with=True: the three earlier runs of the family (lr-0.01 finished by then)
    dim = json.loads(compared.get_attribute("data-dim"))
    assert {k.split(" · ")[1] for k in dim} == {"lr-0.1", "lr-0.001", "lr-0.01"}, dim
    assert cell(page, COMPARED_CELL).locator("input.lk-dash-compare").is_checked()

    for theme in ("JupyterLab Light", "JupyterLab Dark"):
        set_theme(page, theme)
        page.wait_for_timeout(1500)  # the canvas is redrawn with the new theme's colours
        strokes = json.loads(compared.get_attribute("data-strokes"))
        dim = json.loads(compared.get_attribute("data-dim"))
        bg = compared.evaluate("e => getComputedStyle(e).getPropertyValue('--lk-bg').trim()")
        own = _contrast(page, strokes["train_loss"], bg)
        faint = max(_contrast(page, strokes[k], bg) for k in dim)
        print(f"{theme}: current run {own:.2f}:1, earlier runs at most {faint:.2f}:1")
        assert faint < own and faint < 3.0, (theme, strokes, bg)
        save_shot(
            cell(page, COMPARED_CELL).locator(".lk-dashboard"),
            f"dashboard-compare-{theme.split()[-1].lower()}",
        )

    # the toggle overlays them on the plain dashboard too, with the kernel idle or busy
    set_theme(page, "JupyterLab Light")
    toggle.locator("input").check()
    page.wait_for_function(
        "el => new Set(JSON.parse(el.dataset.dim).map(k => k.split(' · ')[1])).size === 2",
        arg=plain.element_handle(),
    )
