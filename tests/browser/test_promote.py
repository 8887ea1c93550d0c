"""'Promote to script' in a real JupyterLab: the toolbar button and the file browser's
context menu write the script through the server extension and open it in an editor tab."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import expect

from tests.browser.lab_page import open_lab
from tests.promote._notebooks import numbered, write_notebook
from tests.promote.test_analyze import FIT, HEAD, LAB, MODEL

pytestmark = pytest.mark.browser

COMMAND = "labkit:promote-to-script"


@pytest.fixture(autouse=True)
def _clean_workspace(page):
    """Close every tab afterwards: the session's JupyterLab restores open tabs in later tests."""
    yield
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^File$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Close All Tabs$")).click()
    for _ in range(4):  # a notebook the kernel marked modified asks first
        discard = page.locator(".jp-Dialog button", has_text=re.compile("Discard|Don't Save"))
        try:
            discard.first.click(timeout=1500)
        except PlaywrightTimeout:
            break
    # (an empty dock shows the launcher again)
    documents = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab:not([data-id^='launcher'])")
    documents.first.wait_for(state="detached")


def _editor_tab_shows_script(page, name: str) -> None:
    page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current", has_text=name).wait_for()
    editor = page.locator(".jp-FileEditor .cm-content").last
    editor.wait_for()
    # the tab shows before the file's text arrives: wait for the text, not the widget
    # (CodeMirror renders only the lines in view, so look for the first one)
    expect(editor).to_contain_text("#!/usr/bin/env python", timeout=30_000)


def _confirm(page, *, verify: bool = False, results: bool = False) -> None:
    """The Promote dialog: 'verify after writing' is checked by default."""
    dialog = page.locator(".jp-Dialog", has=page.locator(".labkit-promote-options"))
    dialog.wait_for(state="visible")
    box = dialog.locator("input[name='labkit-promote-verify']")
    assert box.is_checked()  # the default
    box.set_checked(verify)
    dialog.locator("input[name='labkit-promote-results']").set_checked(results)
    dialog.get_by_role("button", name="Promote").click()


def test_toolbar_button_opens_the_promoted_script(page, lab_server):
    root = lab_server.root_dir
    # a ';' line holds two statements: each goes into the script exactly once
    scaled = MODEL + "\nlr = 0.01\nlr *= 10; tag = 1"
    write_notebook(root / "toolbar.ipynb", numbered(HEAD, scaled, LAB, FIT))
    open_lab(page, lab_server, "toolbar.ipynb")
    button = page.locator(f".jp-NotebookPanel-toolbar [data-command='{COMMAND}']")
    button.click()
    _confirm(page)
    _editor_tab_shows_script(page, "toolbar.py")
    script = (root / "toolbar.py").read_text()
    assert script.startswith("#!/usr/bin/env python") and "def main(" in script
    assert script.count("lr *= 10") == 1 and "\nlr *= 10\ntag = 1\n" in script


def test_file_browser_context_menu_and_errors(page, lab_server):
    root = lab_server.root_dir
    write_notebook(root / "ctx.ipynb", numbered(HEAD, MODEL, LAB, FIT))
    write_notebook(root / "ctx_broken.ipynb", numbered(HEAD, "m = width + 1"))
    open_lab(page, lab_server)
    page.locator(".jp-DirListing-item[title*='ctx.ipynb']").click(button="right")
    page.locator(".lm-Menu-itemLabel", has_text="Promote to script").click()
    _confirm(page)
    _editor_tab_shows_script(page, "ctx.py")

    page.locator(".jp-DirListing-item[title*='ctx_broken.ipynb']").click(button="right")
    page.locator(".lm-Menu-itemLabel", has_text="Promote to script").click()
    _confirm(page)
    dialog = page.locator(".jp-Dialog")
    dialog.wait_for(state="visible")
    assert "cannot promote ctx_broken.ipynb" in dialog.locator(".jp-Dialog-header").inner_text()
    errors = dialog.locator("li[data-severity='error']").all_inner_texts()
    assert any("cell 2 (In [2]) line 1 uses undefined name 'width'" in e for e in errors)
    dialog.get_by_role("button", name="Ok").click()
    assert not (root / "ctx_broken.py").exists()


def test_verify_after_writing_is_the_default_and_shows_the_outcome(page, lab_server):
    root = lab_server.root_dir
    cells = numbered("import math", "x = math.sqrt(16)\nprint(x)", "x\nprint(x + 1)")
    write_notebook(root / "verified.ipynb", cells)
    open_lab(page, lab_server)
    page.locator(".jp-DirListing-item[title*='verified.ipynb']").click(button="right")
    page.locator(".lm-Menu-itemLabel", has_text="Promote to script").click()
    _confirm(page, verify=True)
    _editor_tab_shows_script(page, "verified.py")
    toast = page.locator(".Toastify__toast", has_text="verify: identical (2 lines)")
    toast.wait_for(timeout=120_000)
    toast.get_by_role("button", name=re.compile("Verification and what was left out")).click()
    report = page.locator(".jp-Dialog .labkit-promote-report")
    report.wait_for()
    text = report.inner_text()
    assert "verify: identical (2 lines)" in text
    assert "cell 3 (In [3]) line 1: x" in text  # the displayed result, left out
    page.locator(".jp-Dialog").get_by_role("button", name="Ok").click()
