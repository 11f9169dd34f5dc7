"""A class watching agents in a real JupyterLab, in headless chromium, on the shadowkernel
kernel: while `%timeline` follows agent threads, the view grows through the running cell's
`update_display` and its header says it is live; the comm that keeps it live after the cell
waits for the busy kernel meanwhile, and said "connecting to the kernel…" the whole time.

The agents wait for flag files the test creates once it has seen the previous state, so
nothing here depends on how fast the machine is; elements are found by role and text.
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

expect.set_options(timeout=60_000)  # a loaded machine: kernel start, mount, ruff's answers

FOLLOWING = "live: the cell follows the agents"  # labextension/src/widget.ts

CELLS = (
    "%shadow open {project} --servers ruff --in-memory",
    """import pathlib, time

def wait_for(flag):  # the test creates the flag once it has seen the previous state
    deadline = time.monotonic() + 120
    while not pathlib.Path(flag).exists():
        if time.monotonic() > deadline:
            raise TimeoutError(flag)
        time.sleep(0.02)

def agent(branch, flags):
    for flag in flags:
        wait_for(flag)
        branch.lint(['main.py'], servers=['ruff'])

start_agent(agent, ws.branch('alpha'), ['{root}/go-1', '{root}/go-3'], name='alpha')
start_agent(agent, ws.branch('beta'), ['{root}/go-2', '{root}/go-3'], name='beta')""",
    "%timeline --interval 0.2",
    "print('all cells ran')",
)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[labtools.Lab]:
    if labtools.installed_extension_dir() is None:
        pytest.fail("the shadowkernel-timeline extension is not installed: run bash .ci/setup")
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


def test_a_following_timeline_says_it_is_live(
    page: Page, lab: labtools.Lab, tmp_path: Path
) -> None:
    project = copy_sample(lab.root / "project")
    sources = [c.format(project=project, root=lab.root) for c in CELLS]
    labtools.write_notebook(
        lab.root / "follow.ipynb", [nbformat.v4.new_code_cell(s) for s in sources], "shadowkernel"
    )
    page.goto(lab.open_url("follow.ipynb"))
    page.wait_for_function("() => window.jupyterapp?.shell?.currentWidget?.context?.path")
    labtools.wait_for_idle_kernel(page, 120_000)
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")

    figure = page.get_by_role("figure", name=re.compile(r"^shadow timeline"))
    figure.wait_for(state="attached", timeout=120_000)
    status = page.locator(".sk-TimelineRenderer").get_by_role("status")
    (lab.root / "go-1").touch()
    expect(page.get_by_role("list", name="branch alpha: 1 request")).to_be_attached()
    # The cell still follows (beta waits for go-2): the view grew through it, and says so.
    expect(status).to_have_text(FOLLOWING)
    assert not page.get_by_text("all cells ran", exact=True).count()
    (lab.root / "go-2").touch()
    expect(page.get_by_role("list", name="branch beta: 1 request")).to_be_attached()
    (lab.root / "go-3").touch()
    expect(page.get_by_role("list", name="branch beta: 2 requests")).to_be_attached()
    expect(page.get_by_text("all cells ran", exact=True)).to_be_attached()
    expect(status).to_have_text("live")  # the comm took over once the cell ended
    labtools.screenshot(figure.locator("xpath=.."), "realuse-following.png")
