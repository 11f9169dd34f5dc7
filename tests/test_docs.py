"""The Python examples of docs/*.md run, against a real sample project that they leave unchanged.

A block that cannot run here says why, visibly, on the line before it:
`<!-- not run: needs a real API key -->`. Placeholder paths become the sample project.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from overlay_helpers import snapshot

DOCS = Path(__file__).parent.parent / "docs"
BLOCK = re.compile(r"(?:<!-- not run:(?P<reason>.*?)-->\n)?```python\n(?P<code>.*?)```", re.S)
PLACEHOLDER = '"path/to/project"'


def blocks() -> list[tuple[str, int, str | None, str]]:
    """(doc, 1-based index, reason it is not run or None, code) for every Python block."""
    return [
        (doc.name, index, m["reason"], m["code"])
        for doc in sorted(DOCS.glob("*.md"))
        for index, m in enumerate(BLOCK.finditer(doc.read_text()), 1)
    ]


BLOCKS = blocks()
RUN = [pytest.param(code, id=f"{doc}-{i}") for doc, i, reason, code in BLOCKS if reason is None]


def test_the_docs_have_examples_and_every_skipped_one_says_why() -> None:
    assert RUN, "no runnable example found in docs/"
    for doc, index, reason, _ in BLOCKS:
        assert reason is None or reason.strip(), f"{doc} block {index}: `not run:` needs a reason"


def run_example(code: str, project: Path, name: str) -> None:
    """Run a doc's example on `project` (for its placeholder path); it must leave it unchanged."""
    before = snapshot(project)
    exec(compile(code.replace(PLACEHOLDER, repr(str(project))), name, "exec"), {})
    assert snapshot(project) == before  # examples never write the user's folder


@pytest.mark.parametrize("code", RUN)
def test_doc_example_runs(code: str, project: Path, request: pytest.FixtureRequest) -> None:
    run_example(code, project, request.node.callspec.id)
