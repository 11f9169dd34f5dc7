"""The demo notebooks run top to bottom in the real shadowkernel kernel (nbclient), and their
outputs contain what their text claims: lint rows, run output, the timeline MIME bundle.

Each runs on a copy of notebooks/ so nothing the notebooks do can touch the repository.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import nbformat
import pytest
from kernel_helpers import REPO
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from overlay_helpers import needs_fuse

from shadowkernel.kernel.commands import failure_line

pytestmark = [needs_fuse, pytest.mark.timeout(240)]

TIMELINE = "application/vnd.shadowkernel.timeline+json"


def execute(name: str, tmp_path: Path) -> Any:
    """Run the notebook in a copy of notebooks/ (the same copy when called again, as a
    teacher's Restart & Run All runs it again on the same folder)."""
    folder = tmp_path / "notebooks"
    if not folder.exists():
        shutil.copytree(REPO / "notebooks", folder,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints"))  # fmt: skip
    notebook = nbformat.read(folder / name, as_version=4)
    client = NotebookClient(notebook, timeout=180, kernel_name="shadowkernel",
                            resources={"metadata": {"path": str(folder)}})  # fmt: skip
    client.execute()
    return notebook


def execute_as_taught(name: str, tmp_path: Path, plan: list[str]) -> Any:
    """Run the notebook top to bottom but for its last cell (`%shadow close`), then as a
    teacher who is asked "again?": each entry of `plan` is the start of a code cell, run
    again; `FROM` before one runs it and every cell after it, `%shadow close` included."""
    folder = tmp_path / "notebooks"
    shutil.copytree(REPO / "notebooks", folder, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    notebook = nbformat.read(folder / name, as_version=4)
    cells = [i for i, c in enumerate(notebook.cells) if c.cell_type == "code"]
    order = cells[:-1]
    for entry in plan:
        starts = entry.removeprefix(FROM)
        at = cells.index(_index(notebook, starts))
        order += cells[at:] if entry.startswith(FROM) else [cells[at]]
    client = NotebookClient(notebook, timeout=180, kernel_name="shadowkernel",
                            resources={"metadata": {"path": str(folder)}})  # fmt: skip
    with client.setup_kernel():
        for index in order:
            client.execute_cell(notebook.cells[index], index)
    return notebook


FROM = "from: "


def _index(notebook: Any, starts: str) -> int:
    found = [i for i, c in enumerate(notebook.cells)
             if c.cell_type == "code" and c.source.startswith(starts)]  # fmt: skip
    assert len(found) == 1, f"{len(found)} cells start with {starts!r}"
    return found[0]


def no_tracebacks(notebook: Any) -> None:
    """No cell shows an error or a traceback (an agent stopped says so in one line)."""
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            assert output.output_type != "error", (cell.source, output)
            assert "Traceback" not in output.get("text", ""), (cell.source, output)


def outputs(notebook: Any, starts: str) -> list[dict]:
    """The outputs of the one code cell whose source starts with `starts`."""
    cells = [c for c in notebook.cells if c.cell_type == "code" and c.source.startswith(starts)]
    assert len(cells) == 1, f"{len(cells)} cells start with {starts!r}"
    return cells[0].outputs


def text(notebook: Any, starts: str, mime: str = "text/plain") -> str:
    parts = []
    for output in outputs(notebook, starts):
        assert output.output_type != "error", output
        parts.append(output.get("text", "") + str(output.get("data", {}).get(mime, "")))
    return "\n".join(parts)


def timeline(notebook: Any) -> dict:
    bundles = [
        o.data[TIMELINE] for o in outputs(notebook, "%timeline") if TIMELINE in o.get("data", {})
    ]
    assert len(bundles) == 1
    assert bundles[0]["schema"] == 1
    return bundles[0]


def test_tour(tmp_path: Path) -> None:
    execute("01_tour.ipynb", tmp_path)
    nb = execute("01_tour.ipynb", tmp_path)  # again, on the same folder: the same outcome
    base = text(nb, "%branch new fix", "text/html")
    assert "F401" in base and "F821" in base and "○ old" in base
    fixed = [c for c in nb.cells if c.source == "%lint fix"][0].outputs[0].data["text/html"]
    assert "0 lints, 0 new" in fixed
    new = text(nb, "%lint fix --new-only", "text/html")
    assert "json" in new and "● new" in new and "F401" in new
    assert "inventory/stock.py:7:7" in text(nb, "%goto fix")
    assert "Item" in text(nb, "%hover fix", "text/markdown")
    assert "total value: 3.50" in text(nb, "%%shadow_run fix --timeout 60")
    pytest_runs = [c for c in nb.cells if c.source.startswith("%%shadow_run fix --timeout 120")]
    first, second = (
        "".join(str(o.get("data", {}).get("text/plain", "")) for o in c.outputs)
        for c in pytest_runs
    )
    assert "exit 1" in first and "1 failed" in first
    assert "exit 0" in second and "2 passed" in second
    assert "-import os" in text(nb, "%branch diff fix")
    events = timeline(nb)["events"]
    assert {e["branch"] for e in events} >= {"fix", "other"} and any(
        e["switch"] > 0 for e in events
    )
    assert "the user's folder is untouched" in text(nb, "assert fingerprint() == before")
    panel = outputs(nb, "%shadow panel")[0]
    assert "application/vnd.jupyter.widget-view+json" in panel.data
    assert "shadow closed" in text(nb, "%shadow close")


def test_agent_loop(tmp_path: Path) -> None:
    execute("02_agent_loop.ipynb", tmp_path)
    nb = execute("02_agent_loop.ipynb", tmp_path)  # again, on the same folder
    assert_agents_ended_clean(nb)
    source = "".join(c.source for c in nb.cells)
    assert "OpenAIChatAgent" in source and "base_url" in source


def assert_agents_ended_clean(nb: Any) -> None:
    """Both agents ran; the report agent fixed the lint its edit made (F401) and the base's
    (F821), leaving no lint at all (no I001 either) and a diff of the fix alone."""
    events = timeline(nb)["events"]
    assert {e["branch"] for e in events} == {"report", "stock"}
    turns = text(nb, "import pandas as pd", "text/html")
    assert "F821" in turns and "F401" in turns and "I001" not in turns
    assert "total value: 3.50" in text(nb, "%%shadow_run report")
    assert "0 lints, 0 new" in text(nb, "%lint report", "text/html")
    diff = text(nb, "%branch diff report")
    assert "stock.value()" in diff and "import" not in diff
    changed = [line for line in diff.splitlines()
               if line.startswith(("+", "-")) and not line.startswith(("+++", "---"))]  # fmt: skip
    assert len(changed) == 2, diff  # one line, the fix


def test_agent_cell_runs_again_while_its_agents_work(tmp_path: Path) -> None:
    """A teacher runs the agents' cell twice in a row (its first agents still at work), then
    the rest: the old agents stop with a line each, the new ones end as on a first run."""
    agents = "%branch new report --reset"
    nb = execute_as_taught("02_agent_loop.ipynb", tmp_path, [agents, FROM + agents])
    no_tracebacks(nb)
    assert "forked again" in text(nb, agents)
    assert_agents_ended_clean(nb)


def test_tour_cells_run_again(tmp_path: Path) -> None:
    """A teacher re-runs the two-branch cell, then goes again from the branch's cell down:
    every cell ends as on a first run, and says what it dropped to start over."""
    plan = ["import threading", FROM + "%branch new fix"]
    nb = execute_as_taught("01_tour.ipynb", tmp_path, plan)
    no_tracebacks(nb)
    assert "dropped the old one: v4, 3 file(s) touched" in text(nb, "%branch new fix")
    fixed = [c for c in nb.cells if c.source == "%lint fix"][0].outputs[0].data["text/html"]
    assert "0 lints, 0 new" in fixed
    tests = [c for c in nb.cells if c.source.startswith("%%shadow_run fix --timeout 120")]
    assert "2 passed" in str(tests[-1].outputs)
    assert "forked again" in text(nb, "import threading")
    assert "the user's folder is untouched" in text(nb, "assert fingerprint() == before")
    assert "shadow closed" in text(nb, "%shadow close")


def test_tour_failure_names_the_error() -> None:
    """`shadowkernel tour` ends a failed run with the cell's error, not the rule of dashes
    that closes nbclient's text when the kernel sent no traceback (a UsageError)."""
    text = "An error occurred while executing the following cell:\n------------------\n"
    error = CellExecutionError(f"{text}%branch new fix\n------------------\n", "UsageError",
                               "branch 'fix' exists: use it as it is,\nor drop it")  # fmt: skip
    assert failure_line(error) == "UsageError: branch 'fix' exists: use it as it is, or drop it"
