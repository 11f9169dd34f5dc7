"""Runs through the scheduler: a branch's version plus its scratch layer, never the user's
folder, and never in diff() or accept()."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from overlay_helpers import needs_fuse, snapshot

import shadowkernel as sk

pytestmark = [needs_fuse, pytest.mark.timeout(180)]


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[sk.Workspace]:
    root = tmp_path / "project"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg/mod.py").write_text("X = 1\n")
    with sk.Workspace(root, servers=["ruff"]) as workspace:
        yield workspace


def test_runs_see_the_branch_and_keep_their_writes_in_scratch(ws: sk.Workspace) -> None:
    before = snapshot(Path(ws.root))
    a = ws.branch("a")
    a.write("pkg/mod.py", "X = 2\n")
    result = a.run("cat pkg/mod.py && echo built > out.txt", network=True)
    assert result.ok, result.stderr
    assert result.stdout == "X = 2\n"
    assert "out.txt" in result.written
    assert a.run("cat out.txt", network=True).stdout == "built\n"  # scratch: seen by later runs
    assert "out.txt" not in a.diff() and "out.txt" not in a.files  # ...but no edit
    b = ws.branch("b")
    other = b.run("cat pkg/mod.py; test -e out.txt || echo absent", network=True)
    assert other.stdout == "X = 1\nabsent\n"  # other branches see neither
    a.write("pkg/mod.py", "X = 3\n")
    assert a.run("cat pkg/mod.py", network=True).stdout == "X = 3\n"
    assert list(a.lint()["code"]) == []  # lints after runs still see exactly the version
    assert snapshot(Path(ws.root)) == before
    runs = [e for e in ws.timeline().events if e.kind == "run"]
    assert len(runs) == 4 and all(e.ok for e in runs)
    assert runs[0].outcome.startswith("exit 0, 1 file written")


def test_a_failing_run_is_a_result_not_an_error(ws: sk.Workspace) -> None:
    a = ws.branch("fail")
    result = a.run("echo oops >&2; exit 3", network=True)
    assert result.exit_code == 3 and "oops" in result.stderr


def test_a_run_that_deletes_a_staged_file_deletes_it_for_later_runs(ws: sk.Workspace) -> None:
    a = ws.branch("deleter")
    a.write("pkg/new.py", "Y = 1\n")  # staged, not in the user's folder
    a.write("pkg/mod.py", "X = 5\n")  # staged over a user file
    assert a.run("rm pkg/new.py pkg/mod.py", network=True).ok
    after = a.run("test -e pkg/new.py || echo new-gone; test -e pkg/mod.py || echo mod-gone", network=True)
    assert after.stdout == "new-gone\nmod-gone\n"
    assert "pkg/new.py" in a.files  # the edit itself stays staged: runs write scratch only
