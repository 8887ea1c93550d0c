"""GraphView at 10,000 nodes in a fresh page (a cold layout worker, the view's code never
run): its first toggles, made at once after the first paint, while the layout worker
rehearses toggles on a small graph and the view paints its first drawing again when idle
(widgets/src/_graph_runner.js warmUp, graph.js rehearse), lay out what was asked, the
kernel hears of them, and the rehearsals leave the drawing as it was.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.browser._notebook import cell, notebook, open_and_run, rerun_cell

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
SHOW = f"""\
import sys
sys.path.insert(0, {str(REPO)!r})  # the repository: benchmarks
from benchmarks.widget_layout import synthetic_trace
from labkit.views import GraphView
t = synthetic_trace(10000)
block = next(n.id for n in t.nodes if n.name == "layers.1000")
v = GraphView(t, expanded=[n.id for n in t.nodes if n.kind == "module"], rolled=False, height=500)
v"""
READ = "print('OPEN', len(v.expanded), block in v.expanded)"
VIEW, READBACK = 0, 1
DRAWN = "el => el.dataset.painted && el.dataset.painted === el.dataset.laidOut"


@pytest.fixture(scope="module")
def page(browser, lab_server):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    pg.set_default_timeout(60_000)
    open_and_run(pg, lab_server, notebook(SHOW, READ), "graph_scale.ipynb")
    yield pg
    context.close()


def opened(page) -> tuple[int, bool]:
    m = re.search(r"OPEN (\d+) (True|False)", rerun_cell(page, READBACK, re.compile(r"OPEN \d+")))
    assert m
    return int(m.group(1)), m.group(2) == "True"


def test_first_toggles_of_a_fresh_big_view_lay_out_and_reach_the_kernel(page):
    g = cell(page, VIEW).locator(".lk-graph")
    el = g.element_handle()
    page.wait_for_function(DRAWN, arg=el)
    first = {k: g.get_attribute(f"data-{k}") for k in ("boxes", "groups", "size")}
    n_open, has = opened(page)
    assert has
    # at once, as a user would: search the block, then its collapse toggle (top left of the
    # frame, where the benchmark clicks it)
    g.locator("input.lk-search").fill("layers.1000")
    g.locator("input.lk-search").press("Enter")
    page.wait_for_function("el => el.dataset.centered", arg=el)
    k = float(g.get_attribute("data-scale"))
    sx, sy = map(float, g.get_attribute("data-centered").split(",")[:2])
    box = g.locator(".lk-canvas").bounding_box()
    assert box
    laid = g.get_attribute("data-laid-out")
    page.mouse.click(box["x"] + sx + 10 * k, box["y"] + sy + 11 * k)
    page.wait_for_function("([el, old]) => el.dataset.laidOut !== old", arg=[el, laid])
    # the block is a box now: its frame and its two Linear calls' frames are gone
    assert int(g.get_attribute("data-groups")) == int(first["groups"]) - 3
    assert opened(page) == (n_open - 1, False)
    # open it again with the box's toggle (top right): the very layout the view opened with
    ax, ay, aw = map(float, g.get_attribute("data-anchored").split(",")[:3])
    laid = g.get_attribute("data-laid-out")
    page.mouse.click(box["x"] + ax + aw - 9 * k, box["y"] + ay + 9 * k)
    page.wait_for_function("([el, old]) => el.dataset.laidOut !== old", arg=[el, laid])
    assert {key: g.get_attribute(f"data-{key}") for key in first} == first
    assert opened(page) == (n_open, True)


def test_rehearsing_the_first_drawing_leaves_it_as_it_was(page):
    c = cell(page, VIEW)
    old = c.locator(".lk-graph").get_attribute("data-painted")
    c.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Control+Enter")  # a fresh view of the same graph
    page.wait_for_function(
        "([el, old]) => { const g = el.querySelector('.lk-graph');"
        " return g && g.dataset.painted && g.dataset.painted !== old"
        " && g.dataset.painted === g.dataset.laidOut; }",
        arg=[c.element_handle(), old],
    )
    g = c.locator(".lk-graph")
    shown = "el => [el.dataset.boxes, el.dataset.groups, el.dataset.size, el.dataset.scale," + (
        " JSON.stringify(el.querySelector('canvas.lk-canvas2d').dataset)]"
    )
    first = g.evaluate(shown)
    # painted again twice when the page is idle, the same picture each time
    page.wait_for_function("el => el.dataset.rehearsed === '2'", arg=g.element_handle())
    assert g.evaluate(shown) == first
