"""The runs view in a real JupyterLab: two runs overlaid, one hover cursor shared by the
charts (the validation chart's legend shows a value while the loss chart is hovered), the
wall-time axis, and the table's sort, filter and run choice. And its defaults (issue 37):
the best ten runs by the ranking metric drawn first and said so, one legend entry per run,
a filter that says what is wrong with it; in Light and Dark."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.browser._contrast import ratio, text_contrast
from tests.browser._notebook import cell, notebook, open_and_run, save_shot, set_theme

DOCS = Path(__file__).resolve().parents[2] / "docs" / "images"

pytestmark = pytest.mark.browser

SETUP = """\
import tempfile, pathlib
import labkit
from labkit.train.run import Run

root = pathlib.Path(tempfile.mkdtemp())
for name, lr, t0 in (("a", 0.1, 1000.0), ("b", 0.01, 5000.0)):
    run = Run(logdir=str(root / name), config={"lr": lr, "seed": 0})
    run.add_event({"type": "start", "t": t0})
    run.add_event({"type": "steps", "steps": [
        {"step": s, "epoch": (s - 1) // 50, "loss": 1.0 / s ** (lr * 5), "t": t0 + 0.1 * s}
        for s in range(1, 201)]})
    for e in range(4):
        run.add_event({"type": "epoch", "epoch": e, "step": 50 * (e + 1),
                       "val_loss": 0.9 - e * lr, "t": t0 + 5.0 * (e + 1)})
    run.add_event({"type": "end", "status": "finished", "t": t0 + 21.0})
    run.save()
view = labkit.runs(root).show(metrics=["loss", "val_loss"])
view
"""
READ = "print('SELECTED', view.selected, 'X', view.x_axis)"


def test_runs_overlay_share_one_cursor_and_the_table_chooses(browser, lab_server):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(30_000)
    try:
        open_and_run(page, lab_server, notebook(SETUP, READ), "runs.ipynb")
        view = cell(page, 0).locator(".lk-runs")
        view.wait_for()
        loss = view.locator(".lk-chart[data-metric='loss']")
        val = view.locator(".lk-chart[data-metric='val_loss']")
        loss.wait_for()
        assert '"a":200' in loss.get_attribute("data-series").replace(" ", "")
        assert val.get_attribute("data-series").replace(" ", "") == '{"a":4,"b":4}'

        # hover the loss chart between two epoch ends: the val chart's legend has numbers
        over = loss.locator(".u-over")
        box = over.bounding_box()
        page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + box["height"] * 0.5)
        page.wait_for_timeout(300)

        def legend(chart):  # [[label, value], ...] of the curves (not the x row)
            return chart.locator(".u-legend tr.u-series").evaluate_all(
                "rs => rs.slice(1).map(r => [r.querySelector('th').textContent.trim(),"
                " r.querySelector('td').textContent.trim()])"
            )

        assert [k for k, _ in legend(val)] == ["a", "b"]
        assert all(re.fullmatch(r"[-\d.e]+", v) for _, v in legend(val)), legend(val)
        assert all(re.fullmatch(r"[-\d.e]+", v) for _, v in legend(loss)), legend(loss)

        # wall-time axis
        view.locator(".lk-runs-x").select_option("time")
        page.wait_for_function("el => el.dataset.x === 'time'", arg=loss.element_handle())

        # the table: sort by lr, filter, and drop run b from the charts
        def rows() -> list[str]:
            return view.locator(".lk-runs-table tbody tr").evaluate_all(
                "rs => rs.map(r => r.dataset.run)"
            )

        assert rows() == ["a", "b"]
        view.locator("th[data-key='hp:lr']").click()
        assert rows() == ["b", "a"]
        view.locator(".lk-runs-filter").fill("lr>0.05")
        page.wait_for_function(
            "el => el.querySelectorAll('.lk-runs-table tbody tr').length === 1",
            arg=view.element_handle(),
        )
        assert rows() == ["a"]
        view.locator(".lk-runs-filter").fill("")
        view.locator(".lk-runs-table input[data-run='b']").uncheck()
        only_a = "el => el.querySelector(\".lk-chart[data-metric='loss']\").dataset.series"
        page.wait_for_function(f"{only_a} === '{{\"a\":200}}'", arg=view.element_handle())
    finally:
        context.close()


N_RUNS = 14
RANKED = f"""\
import tempfile, pathlib
import labkit
from labkit.train.run import Run

root = pathlib.Path(tempfile.mkdtemp())
for i in range({N_RUNS}):
    best = 0.5 + ((5 * i) % {N_RUNS}) / 40  # not in name order
    run = Run(logdir=str(root / f"lr{{i:02d}}"), config={{"lr": 0.001 * (i + 1), "seed": 0}})
    run.add_event({{"type": "start", "t": 0.0}})
    run.add_event({{"type": "steps", "steps": [
        {{"step": s, "epoch": (s - 1) // 40, "t": 0.1 * s,
         "loss": best + 1.0 / s + 0.03 * ((s * 7 + i) % 3)}} for s in range(1, 121)]}})
    for e in range(3):
        run.add_event({{"type": "epoch", "epoch": e, "step": 40 * (e + 1),
                       "val_loss": best + 0.2 / (e + 1), "t": 4.0 * (e + 1)}})
    run.add_event({{"type": "end", "status": "finished", "t": 13.0}})
    run.save()
view = labkit.runs(root).show()
view
"""
READ_RANKED = "print('DRAWN', view.selected, view.rank_by)"


def test_the_best_runs_are_drawn_first_with_one_legend_entry_each(browser, lab_server):
    bests = {f"lr{i:02d}": 0.5 + ((5 * i) % N_RUNS) / 40 for i in range(N_RUNS)}
    best10 = sorted(bests, key=bests.__getitem__)[:10]
    context = browser.new_context(viewport={"width": 1400, "height": 1100})
    page = context.new_page()
    page.set_default_timeout(30_000)
    try:
        open_and_run(page, lab_server, notebook(RANKED, READ_RANKED), "runs_ranked.ipynb")
        assert f"DRAWN {best10} val_loss" in cell(page, 1).locator(".jp-OutputArea").inner_text()
        view = cell(page, 0).locator(".lk-runs")
        view.wait_for()
        note = view.locator(".lk-runs-note").inner_text()
        assert note.startswith(
            f"drawn: the best 10 of {N_RUNS} runs, ranked by best val_loss (lower is better)"
        ), note
        loss = view.locator(".lk-chart[data-metric='loss']")
        val = view.locator(".lk-chart[data-metric='val_loss']")
        loss.wait_for()
        assert sorted(json.loads(val.get_attribute("data-series"))) == sorted(best10)
        # one legend entry per run on the smoothed chart: the raw rows are hidden
        shown = loss.locator(".u-legend tr.u-series").evaluate_all(
            "rs => rs.filter(r => r.offsetParent !== null)"
            ".map(r => r.querySelector('th').textContent.trim())"
        )
        assert shown[1:] == best10, shown
        # the table lists the runs as ranked, best first
        order = view.locator(".lk-runs-table tbody tr").evaluate_all(
            "rs => rs.map(r => r.dataset.run)"
        )
        assert order[:10] == best10, order
        # hiding a run's entry hides its raw curve with it
        loss.locator(".u-legend tr.u-series").nth(2).click()  # the first run's smoothed row
        hidden = loss.locator(".u-legend tr.u-series").evaluate_all(
            "rs => rs.map(r => r.classList.contains('u-off'))"
        )
        assert hidden[1] and hidden[2], hidden  # raw (hidden row) and smoothed, both off
        loss.locator(".u-legend tr.u-series").nth(2).click()
        # a bare metric name filters by its last value; an unknown column says so
        filt = view.locator(".lk-runs-filter")
        filt.fill("val_loss<0.7")
        want = [n for n in order if bests[n] + 0.2 / 3 < 0.7]
        page.wait_for_function(
            "([el, n]) => el.querySelectorAll('.lk-runs-table tbody tr').length === n",
            arg=[view.element_handle(), len(want)],
        )
        assert view.locator(".lk-runs-filter-error").inner_text() == ""
        filt.fill("acc>0.8")
        error = view.locator(".lk-runs-filter-error")
        error.filter(has_text='no column "acc"').wait_for()
        assert filt.get_attribute("aria-invalid") == "true"
        for theme, shot in (("JupyterLab Light", "runs"), ("JupyterLab Dark", "runs-dark")):
            set_theme(page, theme)
            low = [
                (it["text"], round(ratio(it["fg"], it["bg"]), 2))
                for it in text_contrast(view)
                if ratio(it["fg"], it["bg"]) < 4.5
            ]
            assert not low, (theme, low[:5])
            filt.fill("")
            save_shot(view, shot, also=DOCS / f"{shot}.png")
            filt.fill("acc>0.8")
    finally:
        set_theme(page, "JupyterLab Light")  # the server's settings outlive this test
        context.close()


STATES = """\
import tempfile, pathlib, json
import labkit
from labkit.train.run import Run

root = pathlib.Path(tempfile.mkdtemp())
run = Run(logdir=str(root / "done"), config={"lr": 0.1})
run.add_event({"type": "start", "t": 0.0})
run.add_event({"type": "steps", "steps": [
    {"step": s, "epoch": 0, "loss": 1.0 / s, "t": 0.1 * s} for s in range(1, 21)]})
run.add_event({"type": "end", "status": "finished", "t": 3.0})
run.save()
# a fit killed mid-way: its events, no final record, no lock holder
(root / "killed").mkdir()
events = [{"type": "start", "t": 0.0}, {"type": "steps", "steps": [
    {"step": s, "epoch": 0, "loss": 1.0 / s, "t": 0.1 * s} for s in range(1, 11)]}]
(root / "killed" / "events.jsonl").write_text("".join(json.dumps(e) + "\\n" for e in events))
labkit.runs(root).show()
"""


def test_each_run_shows_its_state_as_a_badge(browser, lab_server):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(30_000)
    try:
        open_and_run(page, lab_server, notebook(STATES), "runs_states.ipynb")
        view = cell(page, 0).locator(".lk-runs")
        view.locator(".lk-runs-table tbody tr").first.wait_for()
        badges = view.locator(".lk-runs-table tbody tr").evaluate_all(
            "rs => rs.map(r => [r.dataset.run, r.querySelector('.lk-state')?.dataset.state,"
            " r.querySelector('.lk-state')?.title])"
        )
        got = {run: state for run, state, _ in badges}
        assert got == {"done": "finished", "killed": "crashed"}, badges
        note = next(title for run, _, title in badges if run == "killed")
        assert "last step 10" in note, note  # the badge's title says what is known of it
        assert view.locator("th[data-key='status']").inner_text().startswith("state")
        view.locator(".lk-runs-filter").fill("state=crashed")
        page.wait_for_function(
            "el => el.querySelectorAll('.lk-runs-table tbody tr').length === 1",
            arg=view.element_handle(),
        )
    finally:
        context.close()
