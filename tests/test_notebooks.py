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
    events = timeline(nb)["events"]
    assert {e["branch"] for e in events} == {"report", "stock"}
    turns = text(nb, "import pandas as pd", "text/html")
    assert "F821" in turns and "F401" in turns
    assert "total value: 3.50" in text(nb, "%%shadow_run report")
    assert "F821" not in text(nb, "%lint report --new-only", "text/html")
    diff = text(nb, "%branch diff report")
    assert "+import math" not in diff and "stock.value()" in diff
    source = "".join(c.source for c in nb.cells)
    assert "OpenAIChatAgent" in source and "base_url" in source


def test_tour_failure_names_the_error() -> None:
    """`shadowkernel tour` ends a failed run with the cell's error, not the rule of dashes
    that closes nbclient's text when the kernel sent no traceback (a UsageError)."""
    text = "An error occurred while executing the following cell:\n------------------\n"
    error = CellExecutionError(f"{text}%branch new fix\n------------------\n", "UsageError",
                               "branch 'fix' exists: use it as it is,\nor drop it")  # fmt: skip
    assert failure_line(error) == "UsageError: branch 'fix' exists: use it as it is, or drop it"
