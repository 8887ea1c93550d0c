"""OptimizePanel in a real JupyterLab: set toggles in the page, read the recipe in the kernel;
the results table fits an 820 px output (main columns, the rest under each row's toggle),
every speed-up shows its interval and the status says what ended measuring (issue 37)."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.browser._contrast import ratio, text_contrast
from tests.browser._notebook import cell, notebook, open_and_run, rerun_cell, save_shot, set_theme

pytestmark = pytest.mark.browser
DOCS = Path(__file__).resolve().parents[2] / "docs" / "images"

CELLS = [
    """\
import torch
from torch import nn
from labkit.optimize import Recipe
from labkit.panels import OptimizePanel
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4)).eval()
class Lab:
    recipe = Recipe()
lab = Lab()
panel = OptimizePanel(model, torch.randn(8, 16), mode="inference", steps=2, warmup=0,
                      target=lab, memory=False, drift=False, speedup_target=None)
panel""",
    "print('RECIPE', panel.recipe.to_json(), 'LAB', lab.recipe.label)",
]


@pytest.fixture(scope="module")
def page(browser, lab_server):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    pg.set_default_timeout(30_000)
    open_and_run(pg, lab_server, notebook(*CELLS), "optimize_panel.ipynb")
    yield pg
    context.close()


def test_toggles_set_the_recipe_in_the_kernel(page):
    panel = cell(page, 0).get_by_test_id("optimize-panel")
    panel.wait_for()
    assert panel.get_by_test_id("opt-checkpoint").is_disabled()  # inference: no backward
    panel.get_by_test_id("opt-mode").select_option("train")
    panel.get_by_test_id("opt-precision").select_option("bf16-mixed")
    panel.get_by_test_id("opt-quantization").select_option("int8-weight-only")
    panel.get_by_test_id("opt-channels_last").check()
    ckpt = panel.get_by_test_id("opt-checkpoint")
    ckpt.fill("0, 2")
    ckpt.press("Enter")
    panel.get_by_test_id("opt-matmul_precision").click()  # blur the text box
    panel.get_by_test_id("opt-mode").select_option("inference")
    text = rerun_cell(page, 1, "RECIPE")
    assert '"precision": "bf16-mixed"' in text
    assert '"quantization": "int8-weight-only"' in text
    assert '"channels_last": true' in text
    assert '"checkpoint": ["0", "2"]' in text


def _facts(panel, label: str) -> dict[str, str]:
    """A row's figures outside the main columns: opened with its toggle, read, closed."""
    row = panel.locator(f"tr[data-row='{label}']")
    more = row.get_by_test_id("opt-row-more")
    more.click()
    detail = panel.locator(f"tr[data-row='{label}'] + tr.lk-detail")
    detail.wait_for()
    names = detail.locator(".lk-fact-name").all_inner_texts()
    values = detail.locator(".lk-fact-value").all_inner_texts()
    # each figure on one line (a narrow output wraps between figures, not inside one)
    tall = detail.locator(".lk-fact:not(.lk-long)").evaluate_all(
        "fs => fs.filter(f => f.getBoundingClientRect().height > 30).map(f => f.textContent)"
    )
    assert not tall, tall
    more = panel.locator(f"tr[data-row='{label}']").get_by_test_id("opt-row-more")
    more.click()
    detail.wait_for(state="detached")
    return dict(zip(names, values, strict=True))


def test_measure_and_apply_from_the_page(page):
    panel = cell(page, 0).get_by_test_id("optimize-panel")
    panel.get_by_test_id("opt-measure").click()
    panel.get_by_test_id("opt-table").wait_for(timeout=120_000)
    rows = panel.get_by_test_id("opt-table").locator("tr")
    assert rows.count() == 3  # header, fp32, the recipe
    heads = rows.first.locator("th").all_inner_texts()
    assert heads[1:3] == ["latency (median)", "speed-up (95%)"], heads
    assert "loss" not in " ".join(heads)  # inference without a loss: no loss column
    for label in ("fp32", "bf16-mixed + int8-weight-only + ckpt(0,2) + channels_last"):
        facts = _facts(panel, label)  # the spread and the rounds, under the row
        assert re.fullmatch(r"\S+ \S+ \u2013 \S+ \S+", facts["IQR"]), facts
        assert facts["steps"] == "2" and "first drift" in facts, facts
    assert panel.get_by_test_id("opt-chart").locator(".lk-bar").count() == 2
    # speedup_target=None: the status says the fixed number of rounds ended measuring
    status = panel.get_by_test_id("opt-status").inner_text()
    assert re.search(
        r"2 rounds: steps=2, no interval target .*; measuring took [\d.]+ m?s in all", status
    ), status
    panel.get_by_test_id("opt-apply").click()
    panel.get_by_test_id("opt-status").filter(has_text="applied:").wait_for()
    text = rerun_cell(page, 1, "LAB bf16-mixed")
    assert "LAB bf16-mixed + int8-weight-only" in text
    save_shot(panel, "optimize_panel")


def test_export_choice_measures_an_export_row(page):
    panel = cell(page, 0).get_by_test_id("optimize-panel")
    options = panel.get_by_test_id("opt-export").locator("option").all_inner_texts()
    assert options[:2] == ["none", "torch.export"] and options[2].startswith("onnxruntime"), options
    panel.get_by_test_id("opt-export").select_option("torch.export")
    panel.get_by_test_id("opt-notice").filter(has_text="reset to the default").wait_for()
    assert panel.get_by_test_id("opt-precision").is_disabled()  # an export runs fp32 as is
    panel.get_by_test_id("opt-measure").click()
    row = panel.get_by_test_id("opt-table").locator("tr", has_text="torch.export")
    row.wait_for(timeout=120_000)
    heads = panel.get_by_test_id("opt-table").locator("th").all_inner_texts()
    cells = row.locator("td").all_inner_texts()
    assert cells[0].endswith("torch.export") and len(cells) == len(heads), (heads, cells)
    facts = _facts(panel, "channels_last + torch.export")
    assert re.fullmatch(r"[\d.]+ m?s", facts["export"]), facts  # the export time
    assert float(facts["rel"]) <= 1e-4  # fp32 export: eager's numbers
    save_shot(panel, "optimize_panel_export")


def test_rows_accumulate_and_the_table_fits_the_output(page):
    panel = cell(page, 0).get_by_test_id("optimize-panel")
    table = panel.get_by_test_id("opt-table")
    # after two Measures in inference mode: fp32 once, then both recipes (not replaced)
    labels = table.get_by_test_id("opt-row-label").all_inner_texts()
    first = "bf16-mixed + int8-weight-only + ckpt(0,2) + channels_last"
    assert labels == ["fp32", first, "channels_last + torch.export"], labels
    page.set_viewport_size({"width": 960, "height": 1000})
    scroll = panel.get_by_test_id("opt-scroll")
    # JupyterLab lays the notebook out again on the next frames after a resize: the table's
    # scroll box was once measured at the old width right after it (a flaky failure)
    fits = "([s, p]) => s.getBoundingClientRect().right <= p.getBoundingClientRect().right + 1"
    with contextlib.suppress(PlaywrightTimeout):  # the assert below says what did not fit
        page.wait_for_function(
            fits, arg=[scroll.element_handle(), panel.element_handle()], timeout=5000
        )
    box, out = scroll.bounding_box(), panel.bounding_box()
    assert box["x"] + box["width"] <= out["x"] + out["width"] + 1, (box, out)
    _fits_without_scrolling(page, panel)
    first = table.locator("td").first.evaluate("e => getComputedStyle(e).position")
    assert first == "sticky"  # the recipe name stays in view while the columns scroll
    # two rows side by side with their differences
    names = table.get_by_test_id("opt-row-label")
    names.nth(0).click()
    names.nth(2).click()
    pair = panel.get_by_test_id("opt-pair")
    pair.locator("th", has_text="channels_last + torch.export vs fp32").wait_for()
    assert "latency (median)" in pair.inner_text()
    save_shot(panel, "optimize_panel_rows")
    panel.get_by_test_id("opt-clear").click()
    table.wait_for(state="detached")
    page.set_viewport_size({"width": 1400, "height": 1000})


def _fits_without_scrolling(page, panel) -> None:
    """The table, every row open, needs no horizontal scroll in the output (issue 37)."""
    out = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output").first
    width = out.evaluate("e => e.getBoundingClientRect().width")
    assert width <= 830, width  # a 960 px window: JupyterLab's output is ~820 px wide
    panel.get_by_test_id("opt-details-all").click()
    panel.get_by_test_id("opt-detail").first.wait_for()
    scroll = panel.get_by_test_id("opt-scroll")
    sizes = scroll.evaluate("e => [e.scrollWidth, e.clientWidth]")
    assert sizes[0] <= sizes[1] + 1, f"the table is {sizes[0]} px in a {sizes[1]} px box"
    panel.get_by_test_id("opt-details-all").click()
    panel.get_by_test_id("opt-detail").first.wait_for(state="detached")


def test_intervals_status_and_width_in_both_themes(page):
    """A Measure with an interval target and a budget: every speed-up (the "within noise"
    ones too) shows its interval, the status names what ended the rounds and the time
    spent, the table fits at 960 px; Light and Dark, text at WCAG AA."""
    c = cell(page, 1)
    c.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Control+a")
    page.keyboard.type(
        "panel.speedup_target, panel.budget_s = 0.005, 0.5; panel._bench = None; "
        "panel.recipe = Recipe(channels_last=True); panel.measure().join(); print('DONE')"
    )
    page.keyboard.press("Control+Enter")
    c.locator(".jp-OutputArea-output", has_text="DONE").wait_for(timeout=120_000)
    panel = cell(page, 0).get_by_test_id("optimize-panel")
    status = panel.get_by_test_id("opt-status").inner_text()
    # a 0.5 s budget against a +-0.5% target: one of the two ended it, said with its times
    ended = (
        r"\d+ rounds: (every interval within \+-0.5%, the target|the 0.5 s budget of "
        r"timed rounds \([\d.]+ m?s spent\) ran out before every interval was "
        r"within \+-0.5%).*; measuring took [\d.]+ m?s in all"
    )
    assert re.search(ended, status), status
    speed = panel.get_by_test_id("opt-table").locator("td.lk-speedup").all_inner_texts()
    assert speed[0] == "1.00x" and len(speed) == 2, speed
    assert re.fullmatch(r"[\d.]+x( within noise)? \([\d.]+x\u2013[\d.]+x\)", speed[1]), speed
    bars = panel.get_by_test_id("opt-chart").locator(".lk-bar").all_inner_texts()
    assert re.search(r"\([\d.]+x\u2013[\d.]+x\)", bars[1]), bars
    try:
        page.set_viewport_size({"width": 960, "height": 1000})
        page.wait_for_timeout(500)  # JupyterLab lays the notebook out again
        for theme, shot in (
            ("JupyterLab Light", "optimize-panel"),
            ("JupyterLab Dark", "optimize-panel-dark"),
        ):
            set_theme(page, theme)
            _fits_without_scrolling(page, panel)
            panel.get_by_test_id("opt-row-more").first.click()
            low = [
                (it["text"], round(ratio(it["fg"], it["bg"]), 2))
                for it in text_contrast(panel)
                if ratio(it["fg"], it["bg"]) < 4.5
            ]
            assert not low, (theme, low[:5])
            save_shot(panel, shot, also=DOCS / f"{shot}.png")
            panel.get_by_test_id("opt-row-more").first.click()
    finally:
        set_theme(page, "JupyterLab Light")
        page.set_viewport_size({"width": 1400, "height": 1000})


def test_python_side_changes_show_in_the_page(page):
    c = cell(page, 1)
    c.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Control+a")
    page.keyboard.type("panel.recipe = Recipe(compile='default'); print('SET')")
    page.keyboard.press("Control+Enter")
    c.locator(".jp-OutputArea-output", has_text="SET").wait_for()
    panel = cell(page, 0).get_by_test_id("optimize-panel")
    sel = panel.get_by_test_id("opt-compile")
    page.wait_for_function("(el) => el.value === 'default'", arg=sel.element_handle())
    assert panel.get_by_test_id("opt-precision").input_value() == "32"
