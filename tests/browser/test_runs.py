"""The runs view in a real JupyterLab: two runs overlaid, one hover cursor shared by the
charts (the validation chart's legend shows a value while the loss chart is hovered), the
wall-time axis, and the table's sort, filter and run choice."""

from __future__ import annotations

import re

import pytest

from tests.browser._notebook import cell, notebook, open_and_run

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
                " r.querySelector('td').textContent.trim()])")  # fmt: skip

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
        page.wait_for_function("el => el.querySelectorAll('.lk-runs-table tbody tr').length === 1",
                               arg=view.element_handle())  # fmt: skip
        assert rows() == ["a"]
        view.locator(".lk-runs-filter").fill("")
        view.locator(".lk-runs-table input[data-run='b']").uncheck()
        only_a = "el => el.querySelector(\".lk-chart[data-metric='loss']\").dataset.series"
        page.wait_for_function(f"{only_a} === '{{\"a\":200}}'", arg=view.element_handle())
    finally:
        context.close()
