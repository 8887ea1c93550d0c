"""GraphView, ProfileView and MemoryTimeline in a real JupyterLab, driven by Chromium.

One notebook traces a residual CNN and shows the views; the tests share the executed
page (module scope) and look at, click and hover what the widgets drew.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.browser._contrast import ink_for_theme
from tests.browser._notebook import (
    cell,
    notebook,
    open_and_run,
    output_text,
    rerun_cell,
    save_shot,
    set_theme,
)

pytestmark = pytest.mark.browser

DOCS = Path(__file__).resolve().parents[2] / "docs" / "images"

SETUP = """\
import torch, torch.nn.functional as F
from torch import nn
import labkit
from labkit.trace.graph import visible_graph
from labkit.views import GraphView, MemoryTimeline, ProfileView

class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)
    def forward(self, x):
        return F.relu(self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x))))) + x)

class ResCNN(nn.Module):
    def __init__(self, c=8):
        super().__init__()
        self.stem = nn.Conv2d(3, c, 3, padding=1)
        self.blocks = nn.Sequential(*[Block(c) for _ in range(3)])
        self.head = nn.Linear(c, 10)
    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))

torch.manual_seed(0)
t = labkit.trace(ResCNN(), torch.randn(2, 3, 16, 16))
g = visible_graph(t)
block = next(i for i in g.boxes if t.nodes[i].type == "Block")
opened = visible_graph(t, expanded=set(g.groups) | {block})
print("EXPECT", len(g.boxes), len(g.groups), len(opened.boxes), block)
"""
# graph breaks as labkit.compare reports them (tests/views/test_graph_marks.py maps
# Dynamo's real ones): one in a call rolled into the "x3" block, one in the head
MARKED = """\
brk = dict(module_type="Conv2d", source="net.py:9: print(x)", count=1)
marked = GraphView(t, height=420, breaks=[
    dict(brk, reason="print() is not traced", module="blocks.1.conv1"),
    dict(brk, reason="Tensor.item() call", module="head", module_type="Linear"),
])
marked"""
# a GPT-shaped stack of six identical blocks: rolled into one "x6" frame by default
SIX = """\
class Mlp(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc, self.proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
    def forward(self, x):
        return self.proj(torch.relu(self.fc(x)))

class Layer(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln, self.mlp = nn.LayerNorm(d), Mlp(d)
    def forward(self, x):
        return x + self.mlp(self.ln(x))

class Six(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.emb, self.out = nn.Linear(d, d), nn.Linear(d, 2)
        self.blocks = nn.ModuleList(Layer(d) for _ in range(6))
    def forward(self, x):
        x = self.emb(x)
        for b in self.blocks:
            x = b(x)
        return self.out(x)

torch.manual_seed(0)
six = labkit.trace(Six(), torch.randn(64, 16)).show()
six"""
# 10,000 nodes, every call open, nothing rolled: drawn on a canvas
HUGE = f"""\
import sys
sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})  # the repository: benchmarks
from benchmarks.widget_layout import synthetic_trace
huge_t = synthetic_trace(10000)
huge = GraphView(huge_t, expanded=[n.id for n in huge_t.nodes if n.kind == "module"],
                 rolled=False, height=500)
huge"""
CELLS = [
    SETUP,
    "gv = GraphView(t, height=520)\ngv",
    "pv = ProfileView(t)\npv",
    "mv = MemoryTimeline(t)\nmv",
    "view = t.show()\nview",
    "print('SELECTED', repr(gv.selected), gv.selected_node)",
    "big = GraphView(t, height=420, depth=8)  # every call expanded: taller than the view\nbig",
    "big.selected = None\nbig.selected = 'head'\nprint('PICKED', big.selected)",
    MARKED,
    SIX,
    "print('SIX', six.graph.selected, six.graph.unrolled, six.graph.rolled)",
    HUGE,
]
GRAPH, PROFILE, MEMORY, TABS, READBACK, BIG, PICK, MARKS, SIXES, SIX_READ, HUGES = range(1, 12)


@pytest.fixture(scope="module")
def page(browser, lab_server):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    pg.set_default_timeout(30_000)
    open_and_run(pg, lab_server, notebook(*CELLS), "widgets.ipynb")
    yield pg
    context.close()


@pytest.fixture(scope="module")
def expect(page) -> dict[str, int]:
    m = re.search(r"EXPECT (\d+) (\d+) (\d+) (\d+)", output_text(page, 0))
    assert m, output_text(page, 0)
    boxes, groups, opened, block = map(int, m.groups())
    return {"boxes": boxes, "groups": groups, "opened": opened, "block": block}


def graph(page):
    return cell(page, GRAPH).locator(".lk-graph")


def test_graph_draws_the_visible_nodes(page, expect):
    g = graph(page)
    g.locator(".lk-node").first.wait_for()
    assert g.locator(".lk-node").count() == expect["boxes"]
    assert g.locator(".lk-group").count() == expect["groups"]
    assert g.locator(".lk-edge").count() >= expect["boxes"] - 1
    save_shot(g, "graph-default")


def test_hover_shows_shapes(page):
    g = graph(page)
    stem = g.locator(".lk-node", has_text="stem")
    stem.hover()
    tip = g.locator(".lk-tip")
    tip.wait_for(state="visible")
    text = tip.inner_text()
    assert "stem" in text and "Conv2d" in text
    assert "2x3x16x16 float32" in text  # input
    assert "2x8x16x16 float32" in text  # output


def test_clicking_a_group_expands_it(page, expect):
    g = graph(page)
    rolled = g.locator(".lk-node", has_text="\N{MULTIPLICATION SIGN}3")
    rolled.locator(".lk-toggle").click()
    page.wait_for_function(
        "([el, n]) => el.querySelectorAll('.lk-node').length === n",
        arg=[g.element_handle(), expect["opened"]],
    )
    assert g.locator(".lk-node", has_text="conv1").count() == 1
    assert g.locator(".lk-group").count() == expect["groups"] + 1
    save_shot(g, "graph-expanded", also=DOCS / "graph.png")


def test_clicking_a_node_sets_selected_in_the_kernel(page):
    g = graph(page)
    # the expanded graph is taller than the view (it pans rather than shrink text): find it
    g.locator("input.lk-search").fill("head")
    g.locator("input.lk-search").press("Enter")
    g.locator(".lk-node", has_text="head").locator("rect.lk-box").click()
    g.locator(".lk-node.lk-selected", has_text="head").wait_for()
    out = rerun_cell(page, READBACK, "SELECTED 'head'")
    assert re.search(r"SELECTED 'head' \d+", out), out


def test_sorting_the_profile_reorders_rows(page):
    p = cell(page, PROFILE).locator(".lk-profile")
    rows = p.locator("tbody tr")
    rows.first.wait_for()
    before = rows.evaluate_all("rs => rs.map(r => r.dataset.path)")
    p.locator("th", has_text=re.compile(r"^Params")).click()
    p.locator("th.lk-sorted", has_text="Params").wait_for()
    by_params = rows.evaluate_all("rs => rs.map(r => r.dataset.path)")
    assert by_params != before
    assert by_params[0] == ""  # the root holds every parameter
    p.locator("th", has_text=re.compile(r"^Params")).click()
    p.locator("th.lk-sorted.lk-asc", has_text="Params").wait_for()
    ascending = rows.evaluate_all("rs => rs.map(r => r.dataset.path)")
    assert ascending[-1] == "" and ascending != by_params
    save_shot(p, "profile", also=DOCS / "profile.png")


def test_memory_timeline_marks_the_peak(page):
    m = cell(page, MEMORY).locator(".lk-memory")
    m.wait_for()
    if m.locator(".lk-empty").count():
        assert "no memory samples" in m.inner_text()
    else:
        assert m.locator(".lk-area").count() >= 1
        assert "peak" in m.locator(".lk-peak-label").text_content()
        live = m.locator(".lk-mem-live")
        assert "largest storages live at the peak" in live.inner_text()
        assert "KiB" in live.inner_text() or "MiB" in live.inner_text()
        m.locator("svg").hover()
        assert "total" in m.locator(".lk-tip").inner_text()
        # drag across the second half: zoomed in time, the byte axis follows what is shown
        full = float(m.get_attribute("data-ymax"))
        box = m.locator("svg").bounding_box()
        y = box["y"] + box["height"] / 2
        page.mouse.move(box["x"] + box["width"] * 0.75, y)
        page.mouse.down()
        page.mouse.move(box["x"] + box["width"] * 0.95, y, steps=5)
        page.mouse.up()
        t0, t1 = (float(v) for v in m.get_attribute("data-zoom").split(","))
        assert t0 < t1 and float(m.get_attribute("data-ymax")) <= full
        assert "largest storages live in" in live.inner_text()
        m.locator("svg").dblclick()
        assert m.get_attribute("data-zoom") is None
        assert float(m.get_attribute("data-ymax")) == full
    save_shot(m, "memory", also=DOCS / "memory.png")


def test_show_links_graph_and_profile(page):
    tabs = cell(page, TABS)
    tabs.locator(".lk-graph .lk-node").first.wait_for()
    save_shot(tabs.locator(".jupyter-widgets.widget-tab"), "trace-show")
    tabs.locator(".lk-graph .lk-node", has_text="stem").locator("rect.lk-box").click()
    tabs.locator(".lm-TabBar-tab", has_text="Profile").click()
    row = tabs.locator(".lk-profile tr.lk-selected")
    row.wait_for()
    assert row.get_attribute("data-path") == "stem"
    # and back: a row picked in the profile selects the node and brings it into sight in
    # the graph, though the graph's tab was hidden when it happened
    g = tabs.locator(".lk-graph")
    tabs.locator(".lm-TabBar-tab", has_text="Graph").click()
    for _ in range(5):  # zoom in on the middle: the head is out of sight
        g.locator("button[title='zoom in']").click()
    head_y = _box(g.locator(".lk-node", has_text="head"))["y"]
    assert head_y > _box(g.locator(".lk-canvas"))["y"] + 420
    tabs.locator(".lm-TabBar-tab", has_text="Profile").click()
    tabs.locator(".lk-profile tbody tr[data-path='head']").click()
    tabs.locator(".lm-TabBar-tab", has_text="Graph").click()
    head = g.locator(".lk-node.lk-selected", has_text="head")
    head.wait_for()
    c, r = _box(g.locator(".lk-canvas")), _box(head)
    assert c["x"] <= r["x"] and r["x"] + r["w"] <= c["x"] + c["w"], (c, r)
    assert c["y"] <= r["y"] and r["y"] + r["h"] <= c["y"] + c["h"], (c, r)
    # the memory tab shades where the selection ran; a click there selects what ran then
    tabs.locator(".lm-TabBar-tab", has_text="Memory").click()
    mem = tabs.locator(".lk-memory")
    mem.locator(".lk-sel-span").first.wait_for()
    assert mem.locator(".lk-mem-sel").inner_text().startswith("head ran in ")
    tabs.locator(".lm-TabBar-tab", has_text="Profile").click()
    tabs.locator(".lk-profile tbody tr[data-path='blocks']").click()
    tabs.locator(".lm-TabBar-tab", has_text="Memory").click()
    page.wait_for_function(
        "el => el.textContent.startsWith('blocks ran in ')",
        arg=mem.locator(".lk-mem-sel").element_handle(),
    )
    # drawn at the width it is shown at, though the selection came while it was hidden
    drawn = mem.locator("svg").evaluate("el => [el.viewBox.baseVal.width, el.clientWidth]")
    assert drawn[0] == drawn[1], f"drawn {drawn[0]} px wide, shown {drawn[1]} px wide"
    # the x axis is measured time, so where a child of the blocks ran inside their span
    # differs run to run: move along the span until the tooltip names one, click there
    x, y = _inside_call(page, mem, "blocks.")
    page.mouse.click(x, y)
    picked = mem.locator(".lk-mem-sel b")
    inside = "el => el.textContent.startsWith('blocks.')"  # a call inside the blocks
    page.wait_for_function(inside, arg=picked.element_handle())
    tabs.locator(".lm-TabBar-tab", has_text="Profile").click()
    row = tabs.locator(".lk-profile tr.lk-selected")
    assert row.get_attribute("data-path") == picked.inner_text()


def _inside_call(page, mem, prefix: str) -> tuple[float, float]:
    """A point of the memory chart inside `span` whose sample ran a module named `prefix...`.

    The chart is scrolled to the middle of the view first: at its natural place its lower
    half can sit under JupyterLab's status bar, where a pointer never reaches the chart."""
    mem.locator("svg").evaluate("el => el.scrollIntoView({block: 'center'})")
    span = _box(mem.locator(".lk-sel-span").first)
    y = span["y"] + span["h"] / 2
    hit = "([x, y]) => !!document.elementFromPoint(x, y)?.closest('.lk-memory svg')"
    assert page.evaluate(hit, [span["x"] + span["w"] / 2, y]), f"the chart is covered at {span}"
    seen = []
    for k in range(1, 40):
        x = span["x"] + span["w"] * k / 40
        page.mouse.move(x, y)
        head = mem.locator(".lk-tip div").first.inner_text()
        seen.append(head)
        if head.split(" · ")[-1].startswith(prefix):
            return x, y
    raise AssertionError(f"no sample of a module {prefix}... under the span: {seen}")


def _box(locator) -> dict:
    return locator.evaluate(
        "el => { const r = el.getBoundingClientRect();"
        " return {x: r.x, y: r.y, w: r.width, h: r.height}; }"
    )


def test_big_graph_stays_legible_pans_to_a_selection_and_keeps_place_on_toggle(page):
    g = cell(page, BIG).locator(".lk-graph")
    g.locator(".lk-node").first.wait_for()
    canvas = _box(g.locator(".lk-canvas"))
    drawing = _box(g.locator(".lk-viewport"))
    scale = float(g.get_attribute("data-scale"))
    # it opens with 11 px labels (scale >= 1) and is scrolled for the rest
    assert drawing["h"] > canvas["h"] and scale >= 1, (drawing, canvas, scale)
    label = g.locator(".lk-node text.lk-label").first
    assert float(label.evaluate("el => getComputedStyle(el).fontSize")[:-2]) * scale >= 11
    minimap = g.locator("canvas.lk-minimap")
    assert minimap.is_visible()
    assert minimap.get_attribute("data-boxes") == g.get_attribute("data-boxes")
    head = g.locator(".lk-node", has_text="head")
    # Fit shows the whole graph
    g.locator("button.lk-fit").click()
    whole, c = _box(g.locator(".lk-viewport")), _box(g.locator(".lk-canvas"))
    assert whole["y"] >= c["y"] - 1 and whole["y"] + whole["h"] <= c["y"] + c["h"] + 1, whole
    assert whole["x"] >= c["x"] - 1 and whole["x"] + whole["w"] <= c["x"] + c["w"] + 1, whole

    # a selection made in Python pans (and zooms) the view to the node
    rerun_cell(page, PICK, "PICKED head")
    g.locator(".lk-node.lk-selected", has_text="head").wait_for()
    page.wait_for_function(
        "([el, c]) => { const r = el.getBoundingClientRect();"
        " return r.y >= c.y && r.y + r.height <= c.y + c.h; }",
        arg=[head.element_handle(), _box(g.locator(".lk-canvas"))],
    )
    assert float(g.get_attribute("data-scale")) >= 1
    save_shot(g, "graph-big-selected")

    # collapsing a group keeps it where it was on screen, at the same scale
    # a search jump to a frame taller than the view shows its header
    g.locator("input.lk-search").fill("blocks")
    g.locator("input.lk-search").press("Enter")
    g.locator(".lk-group.lk-selected").wait_for()
    k = g.evaluate(
        "el => { const c = el.querySelector('.lk-canvas').getBoundingClientRect();"
        " const t = [...el.querySelectorAll(\".lk-group .lk-toggle[data-act='collapse']\")]"
        ".find(t => { const r = t.getBoundingClientRect();"
        " return r.y > c.y && r.y + r.height < c.y + c.height && r.x > c.x; });"
        " return t ? t.dataset.k : null; }"
    )
    assert k is not None, "no group's toggle is in sight"
    toggle = g.locator(f".lk-toggle[data-act='collapse'][data-k='{k}']")
    before = _box(g.locator(f".lk-group[data-k='{k}'] rect.lk-frame"))
    scale = g.get_attribute("data-scale")
    toggle.click()
    after_box = g.locator(f".lk-node[data-k='{k}'] rect.lk-box")
    after_box.wait_for()
    after = _box(after_box)
    assert abs(after["x"] - before["x"]) < 2 and abs(after["y"] - before["y"]) < 2, (before, after)
    assert g.get_attribute("data-scale") == scale


def test_graph_breaks_show_as_badges_and_move_down_when_a_call_opens(page):
    g = cell(page, MARKS).locator(".lk-graph")
    g.locator(".lk-node").first.wait_for()
    head = g.locator(".lk-node.lk-broken", has_text="head")
    assert head.locator(".lk-mark").get_attribute("data-breaks") == "1"
    # blocks.1 is rolled into the x3 box, collapsed: the box counts the break inside it
    rolled = g.locator(".lk-node", has_text="\N{MULTIPLICATION SIGN}3")
    assert "lk-broken-inside" in rolled.get_attribute("class")
    assert rolled.locator(".lk-mark").get_attribute("data-breaks") == "1"
    rolled.locator("rect.lk-box").hover()
    tip = g.locator(".lk-tip")
    tip.wait_for(state="visible")
    text = tip.inner_text()
    assert "1 graph break inside" in text
    assert "print() is not traced in module 'blocks.1.conv1' (Conv2d) at net.py:9" in text
    save_shot(g, "graph-breaks")
    rolled.locator(".lk-toggle").click()
    conv = g.locator(".lk-node.lk-broken", has_text="conv1")
    conv.wait_for()
    assert conv.count() == 1 and conv.locator(".lk-mark").get_attribute("data-breaks") == "1"
    assert g.locator(".lk-broken-inside").count() == 0


def test_each_graph_view_has_its_own_arrow_marker(page):
    cell(page, MARKS).locator(".lk-graph .lk-edge").first.wait_for(state="attached")
    views = page.locator(".lk-graph[data-renderer='svg'] svg").evaluate_all(
        "svgs => svgs.map(s => ({ids: [...s.querySelectorAll('marker')].map(m => m.id),"
        " refs: [...new Set([...s.querySelectorAll('.lk-edge')]"
        ".map(e => e.getAttribute('marker-end')))]}))"
    )
    assert len(views) >= 2, views
    ids = [i for v in views for i in v["ids"]]
    assert len(ids) == len(views) and len(set(ids)) == len(ids), views  # page-wide unique
    for v in views:  # every edge of a view ends in that view's marker
        assert v["refs"] == [f"url(#{v['ids'][0]})"], v


def test_svg_export_is_the_whole_drawing_with_its_marks(page):
    g = cell(page, MARKS).locator(".lk-graph")
    g.locator(".lk-node").first.wait_for()
    with page.expect_download() as download:
        g.locator("button[title='export SVG']").click()
    assert download.value.suggested_filename == "ResCNN.svg"
    text = Path(download.value.path()).read_text()
    assert text.startswith("<svg") and 'xmlns="http://www.w3.org/2000/svg"' in text
    assert 'transform="translate(20,20)"' in text  # not the view's pan and zoom
    assert text.count("<marker ") == 1 and text.count('class="lk-mark"') == 2
    assert text.count('class="lk-node ') == g.locator(".lk-node").count()


def test_a_later_call_of_a_rolled_block_selects_the_rolled_box_and_says_which(page):
    tabs = cell(page, SIXES)
    g = tabs.locator(".lk-graph")
    g.locator(".lk-node").first.wait_for()
    crumb = g.locator(".lk-crumb")
    mlp = g.locator(".lk-node", has_text="mlp")
    assert mlp.count() == 1  # six blocks, one rolled frame: one mlp box
    # the rolled box's tooltip names the range and gives one call's figures and the total
    mlp.locator("rect.lk-box").hover()
    tip = g.locator(".lk-tip")
    tip.wait_for(state="visible")
    text = tip.inner_text()
    assert "blocks.0-5.mlp" in text and "\N{MULTIPLICATION SIGN}6 total" in text, text
    assert "blocks.0.mlp" not in text
    # picked in the profile: the rolled box is selected, the breadcrumb names the call
    tabs.locator(".lm-TabBar-tab", has_text="Profile").click()
    tabs.locator(".lk-profile tbody tr[data-path='blocks.4.mlp']").click()
    tabs.locator(".lm-TabBar-tab", has_text="Graph").click()
    g.locator(".lk-node.lk-selected", has_text="mlp").wait_for()
    assert "blocks.4.mlp - instance 5 of 6" in crumb.inner_text()
    # that call's own parameters: Linear(16, 64) + Linear(64, 16), by arithmetic
    assert "parameters 2.13K" in crumb.inner_text(), crumb.inner_text()
    save_shot(tabs.locator(".jupyter-widgets.widget-tab"), "graph-rolled-instance")
    # picked on the memory timeline, inside blocks.4's span: the same rolled box, the call
    tabs.locator(".lm-TabBar-tab", has_text="Memory").click()
    mem = tabs.locator(".lk-memory")
    span = mem.locator(".lk-sel-span").first
    span.wait_for()
    box = _box(span)
    page.mouse.click(box["x"] + box["w"] / 2, box["y"] + box["h"] / 2)
    picked = mem.locator(".lk-mem-sel b")
    page.wait_for_function(
        "el => el.textContent.startsWith('blocks.4.mlp')", arg=picked.element_handle()
    )
    name = picked.inner_text()
    tabs.locator(".lm-TabBar-tab", has_text="Graph").click()
    page.wait_for_function(
        "([el, n]) => el.textContent.includes(n + ' - instance 5 of 6')",
        arg=[crumb.element_handle(), name],
    )
    assert g.locator(".lk-node.lk-selected", has_text="mlp").count() == 1
    # Unroll: each call drawn, the choice kept in the kernel and on re-render
    crumb.locator("button.lk-unroll").click()
    page.wait_for_function(
        "el => el.querySelectorAll('.lk-group').length >= 7", arg=g.element_handle()
    )
    assert "instance" not in crumb.inner_text()
    assert g.locator(".lk-node.lk-selected").count() == 1
    out = rerun_cell(page, SIX_READ, "SIX")
    assert "['blocks.0-5'] True" in out, out
    g.locator("button.lk-roll", has_text="Roll").click()
    page.wait_for_function(
        "el => el.querySelectorAll('.lk-group').length === 2", arg=g.element_handle()
    )
    assert g.locator("button.lk-roll").inner_text() == "Unroll all"


def test_ten_thousand_nodes_draw_on_a_canvas_and_stay_interactive(page):
    g = cell(page, HUGES).locator(".lk-graph")
    g.locator("canvas.lk-canvas2d").wait_for()
    page.wait_for_function("el => el.dataset.laidOut", arg=g.element_handle())
    assert g.get_attribute("data-renderer") == "canvas"
    drawn = int(g.get_attribute("data-boxes")) + int(g.get_attribute("data-groups"))
    assert drawn > 9900  # every node: 5,714 boxes (ops, inputs) and 4,285 frames (calls)
    assert g.locator(".lk-node").count() == 0  # no SVG element per box
    g.locator(".lk-canvas").scroll_into_view_if_needed()
    canvas = _box(g.locator(".lk-canvas"))
    assert float(g.get_attribute("data-scale")) >= 1  # opens legible, at the top
    save_shot(g, "graph-10k-zoomed-in", also=DOCS / "graph-10k-zoomed-in.png")
    # hover a box: the tooltip; click it: selected in the kernel's trait
    for x, y in (
        (canvas["x"] + dx, canvas["y"] + dy)
        for dy in range(60, 300, 8)
        for dx in range(40, 400, 12)
    ):
        page.mouse.move(x, y)  # the first column's boxes, top left
        if g.locator(".lk-tip").is_visible():
            break
    assert g.locator(".lk-tip").is_visible()
    page.mouse.click(x, y)
    crumb = "el => el.querySelector('.lk-crumb').dataset.text"
    page.wait_for_function(crumb, arg=g.element_handle())
    # search and jump to the last block: centred, selected
    last = "layers.1427"  # synthetic_trace(10000): 1,428 blocks of 7 nodes
    g.locator("input.lk-search").fill(last)
    g.locator("input.lk-search").press("Enter")
    page.wait_for_function(
        f"el => el.querySelector('.lk-crumb').dataset.text.startsWith('{last}')",
        arg=g.element_handle(),
    )
    # Fit: the whole graph, wrapped into columns (not a 1-px line), boxes as blocks without
    # text, and labels only where legible: each column says which blocks it holds
    g.locator("button.lk-fit").click()
    assert float(g.get_attribute("data-scale")) < 0.1
    cv = g.locator("canvas.lk-canvas2d")
    page.wait_for_function("el => el.dataset.lod === '2'", arg=cv.element_handle())
    assert int(cv.get_attribute("data-labels")) >= 5
    # each frame drawn as one block is coloured by its hottest box (every block holds timed
    # ops), on the legend's scale: the map still shows where the time goes
    blocks = int(cv.get_attribute("data-blocks"))
    assert blocks > 100 and int(cv.get_attribute("data-heated-blocks")) == blocks
    width = float(g.get_attribute("data-size").split(",")[0])
    scale = float(g.get_attribute("data-scale"))
    assert width * scale > 0.5 * canvas["w"]  # the drawing spans the view, not a line down it
    save_shot(g, "graph-10k-zoomed-out", also=DOCS / "graph-10k-zoomed-out.png")
    # a canvas reads no CSS: on a switch to Dark it repaints in Dark's ink, and back
    for theme, dark in (("JupyterLab Dark", True), ("JupyterLab Light", False)):
        set_theme(page, theme)
        follows, ink = ink_for_theme(page, cv, dark=dark)
        assert follows, (theme, ink)
        assert float(g.get_attribute("data-scale")) < 0.1  # still fitted: the switch re-laid
        if dark:  # the page out, and a view placed by Fit is fitted again, not sent home
            save_shot(g, "graph-10k-dark", also=DOCS / "graph-10k-dark.png")
