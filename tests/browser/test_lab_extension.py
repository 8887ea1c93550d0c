"""labkit's JupyterLab extension: Help > labkit: Check environment."""

from __future__ import annotations

import re

import pytest

from tests.browser.lab_page import open_lab

pytestmark = pytest.mark.browser


def test_check_environment_dialog_lists_torch(page, lab_server):
    open_lab(page, lab_server)
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Help$")).click()
    page.locator(".lm-Menu-itemLabel", has_text="labkit: Check environment").click()
    dialog = page.locator(".jp-Dialog")
    dialog.wait_for(state="visible")
    assert dialog.locator(".jp-Dialog-header").inner_text() == "labkit: environment ready"
    torch_row = dialog.locator("tr[data-name='torch']")
    assert torch_row.get_attribute("data-status") == "ok"
    cells = torch_row.locator("td").all_inner_texts()
    assert cells[:2] == ["ok", "torch"]
    assert re.match(r"\d+\.\d+", cells[2])
    for name in ("lightning", "widget assets", "lab extension", "server extension"):
        assert dialog.locator(f"tr[data-name='{name}']").get_attribute("data-status") == "ok"
    dialog.get_by_role("button", name="Ok").click()
    dialog.wait_for(state="detached")
