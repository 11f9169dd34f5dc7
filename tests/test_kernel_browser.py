"""The shadowkernel kernel in a real JupyterLab and a real browser (headless chromium).

A notebook on the shadowkernel kernel shows a lint table (severity colours, new-vs-old
markers) and the `%shadow panel` widget; clicking the panel's lint button shows the picked
branch's lints inside the panel, and its status line follows the shadow live. (The live
timeline of agent threads is covered in test_labextension_browser.py.) Elements are found
by role, label and text; nothing sleeps.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
from browser import lab as labtools
from kernel_helpers import copy_sample
from overlay_helpers import HAS_FUSE

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

_missing = labtools.missing_requirements() or (None if HAS_FUSE else "needs /dev/fuse")
if _missing:
    pytest.skip(_missing, allow_module_level=True)

from playwright.sync_api import Page, expect, sync_playwright  # noqa: E402

expect.set_options(timeout=60_000)  # a loaded machine: kernel start, mount, ruff's first answer

CELLS = (
    "%shadow open {project} --servers ruff",
    "ws.branch('alpha').write('inventory/extra.py', 'import sys\\n')",
    "%lint alpha inventory/extra.py inventory/report.py",
    "%shadow panel",
)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[labtools.Lab]:
    root = tmp_path_factory.mktemp("lab-root")
    with labtools.running_lab(root, tmp_path_factory.mktemp("lab-private")) as running:
        yield running


@pytest.fixture
def page() -> Iterator[Page]:
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=labtools.CHROMIUM, args=labtools.CHROMIUM_ARGS)
        page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
        page.set_default_timeout(60_000)
        yield page
        browser.close()


def test_lint_table_and_panel_in_jupyterlab(page: Page, lab: labtools.Lab, tmp_path: Path) -> None:
    project = copy_sample(lab.root / "project")
    cells = [nbformat.v4.new_code_cell(c.format(project=project)) for c in CELLS]
    labtools.write_notebook(lab.root / "panel.ipynb", cells, kernel="shadowkernel")
    page.goto(lab.open_url("panel.ipynb"))
    page.wait_for_function("() => window.jupyterapp?.shell?.currentWidget?.context?.path")
    labtools.wait_for_idle_kernel(page, 120_000)
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")

    # The lint table: a new lint on the staged file, an old one in the untouched file.
    table = page.locator(".shadowkernel-lints").first
    expect(table).to_contain_text("branch 'alpha' v1: 2 lints, 1 new")
    expect(table.get_by_role("row").filter(has_text="inventory/extra.py:1:8")).to_contain_text(
        "● new"
    )
    expect(table.get_by_role("row").filter(has_text="F821")).to_contain_text("○ old")

    # The panel: the branch picker lists the branch; the lint button shows its lints.
    picker = page.get_by_label("branch", exact=True)
    expect(picker).to_have_value("alpha")
    status = page.locator("code").filter(has_text=re.compile(r"\d+ served"))
    expect(status).to_contain_text("1 served")
    page.get_by_role("button", name="lint").click()
    tables = page.locator(".shadowkernel-lints")
    expect(tables).to_have_count(2)
    expect(tables.last).to_contain_text("inventory/extra.py:1:8")
    expect(status).to_contain_text("2 served")  # the status line followed the click's lint
    labtools.screenshot(page, "kernel-panel.png")
