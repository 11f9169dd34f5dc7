"""What a lane's switch tells a server that reads the disk: each changed path as Created,
Changed or Deleted, by what the path was before the switch and is after it.

A type checker treats Created as a new file in the project: pyright and basedpyright then
drop their import resolution, list the whole project again and re-check everything. On
sympy that doubled the first check after each branch's first switch (`benchmarks/scale.py`),
so a file the view had before the switch must be reported as Changed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lsprotocol.types import FileChangeType
from overlay_helpers import needs_fuse

import shadowkernel as sk
from shadowkernel.lsp import available_servers

pytestmark = [
    needs_fuse,
    pytest.mark.timeout(240),
    pytest.mark.skipif(not available_servers()["basedpyright"], reason="needs basedpyright"),
]

Created, Changed, Deleted = FileChangeType.Created, FileChangeType.Changed, FileChangeType.Deleted


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[sk.Workspace]:
    root = tmp_path / "project"
    (root / "pkg").mkdir(parents=True)
    for name, text in {"__init__": "", "lib": "X = 1\n", "old": "Y = 2\n"}.items():
        (root / f"pkg/{name}.py").write_text(text)
    with sk.Workspace(root, servers=["basedpyright"], lanes=1, state=None) as workspace:
        yield workspace


def heard(ws: sk.Workspace) -> list[tuple[str, FileChangeType]]:
    """Every file event the lane's server is sent from now on (the real call still goes)."""
    (lane,) = ws._scheduler.lanes
    client = lane.pool.client("basedpyright")
    sent: list[tuple[str, FileChangeType]] = []
    real = client.files_changed

    async def spy(events: Any) -> None:
        sent.extend(events)
        await real(events)

    client.files_changed = spy
    return sent


def test_each_path_is_reported_by_what_it_was_before_the_switch(ws: sk.Workspace) -> None:
    edits, moves = ws.branch("edits"), ws.branch("moves")
    edits.write("pkg/lib.py", "X = 10\n")
    moves.write("pkg/new.py", "Z = 3\n")
    moves.delete("pkg/old.py")
    moves.write("pkg/lib.py", "X = 20\n")
    ws.branch("start").lint(["pkg/__init__.py"])  # the server runs; the lane shows the folder
    sent = heard(ws)

    edits.lint(["pkg/__init__.py"])
    assert sent == [("pkg/lib.py", Changed)]  # it was there before, if never reported
    sent.clear()
    moves.lint(["pkg/__init__.py"])
    assert sorted(sent) == [("pkg/lib.py", Changed), ("pkg/new.py", Created),
                            ("pkg/old.py", Deleted)]  # fmt: skip
    sent.clear()
    edits.lint(["pkg/__init__.py"])
    assert sorted(sent) == [("pkg/lib.py", Changed), ("pkg/new.py", Deleted),
                            ("pkg/old.py", Created)]  # fmt: skip
