"""Every labkit view follows JupyterLab's theme live and meets WCAG AA in Light and Dark.

One notebook shows each view (graph, profile, memory, dashboard, optimize panel,
attention). In JupyterLab Light, then after switching to Dark through the Settings menu
(no re-run, the same DOM), the test computes the contrast of every visible text against
what it is painted on and requires >= 4.5:1; the views' backgrounds must follow the
theme. The ratio computed in the page is checked against an independent Python one.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.browser._contrast import ink_for_theme, luminance, ratio, text_contrast
from tests.browser._notebook import cell, notebook, open_and_run, save_shot, set_theme
from tests.browser._views import CELLS, VIEWS

pytestmark = pytest.mark.browser

DOCS = Path(__file__).resolve().parents[2] / "docs" / "images"
AA = 4.5


@pytest.fixture(scope="module")
def page(browser, lab_server):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    pg.set_default_timeout(30_000)
    open_and_run(pg, lab_server, notebook(*CELLS), "views.ipynb")
    yield pg
    set_theme(pg, "JupyterLab Light")  # the server's settings outlive this module
    context.close()


def _view(page, index: int):
    loc = cell(page, index).locator(f".{VIEWS[index]}").first
    loc.wait_for()
    return loc


def _background(view) -> list[int]:
    css = view.evaluate("el => getComputedStyle(el).backgroundColor")
    return [int(float(v)) for v in re.findall(r"[\d.]+", css)[:3]]


def _failures(view) -> tuple[int, list[dict]]:
    items = text_contrast(view)
    bad = []
    for it in items:
        mine = ratio(it["fg"], it["bg"])  # independent of the page's arithmetic
        assert abs(mine - it["ratio"]) < 0.05, (it, mine)
        if mine < AA:
            bad.append(it)
    return len(items), bad


def test_views_meet_wcag_aa_in_light_and_dark_and_follow_a_live_switch(page):
    set_theme(page, "JupyterLab Light")
    views = {i: _view(page, i) for i in VIEWS}
    for v in views.values():  # mark the DOM: a live switch must not need a re-render
        v.evaluate("el => { el.__lkMark = 1; }")
    # the checker finds a bad pair: grey on grey, inside a view, on top of its own box
    probe = views[2].evaluate_handle(
        "el => { const d = document.createElement('div'); d.textContent = 'probe';"
        " d.style.cssText = 'color:#777;background:#888;position:relative';"
        " el.prepend(d); return d; }"
    )
    found = [it for it in text_contrast(views[2]) if it["text"] == "probe"]
    probe.evaluate("d => d.remove()")
    assert found and found[0]["ratio"] == pytest.approx(ratio([119] * 3, [136] * 3), abs=0.01)
    assert found[0]["ratio"] < AA
    report = {}
    for theme, dark in (("JupyterLab Light", False), ("JupyterLab Dark", True)):
        set_theme(page, theme)
        for i, v in views.items():
            assert v.evaluate("el => el.__lkMark") == 1, f"{VIEWS[i]} was re-rendered"
            bg = luminance(_background(v))
            assert (bg < 0.05) if dark else (bg > 0.8), (theme, VIEWS[i], _background(v))
            count, bad = _failures(v)
            assert count >= 3, (theme, VIEWS[i], count)
            report[(theme, VIEWS[i])] = (count, bad)
        # the dashboard's canvas axes are redrawn in the theme's ink (canvas reads no CSS)
        chart = views[4].locator(".lk-dash-chart").first
        follows, ink = ink_for_theme(page, chart, dark=dark)
        assert follows, (theme, ink)
        if dark:
            save_shot(_view(page, 1), "graph-dark", also=DOCS / "graph-dark.png")
            save_shot(_view(page, 4), "dashboard-dark", also=DOCS / "dashboard-dark.png")
    failing = {k: v for k, v in report.items() if v[1]}
    assert not failing, "\n".join(
        f"{theme} {view}: {len(bad)}/{n} texts under {AA}:1, e.g. {bad[:3]}"
        for (theme, view), (n, bad) in failing.items()
    )
