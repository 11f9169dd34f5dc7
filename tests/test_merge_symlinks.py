"""Symlinks of the user's folder in merges and reads: a branch that deletes a link
merges with one that never touched it, and reading a link says where it points."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import shadowkernel as sk


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[sk.Workspace]:
    root = tmp_path / "project"
    root.mkdir()
    (root / "real.py").write_text("A = 1\n")
    (root / "other.py").write_text("x = 1\n")
    os.symlink("real.py", root / "settings")
    with sk.Workspace(root, servers=[], state=None) as workspace:
        yield workspace


def test_a_deleted_link_merges_with_a_branch_that_left_it(ws: sk.Workspace) -> None:
    a, b = ws.branch("a"), ws.branch("b")
    a.delete("settings")
    b.write("other.py", "x = 2\n")
    for merged in (ws.merge_check(a, b), ws.merge_check(b, a, "b-then-a")):
        assert dict(merged.files) == {"settings": None, "other.py": b"x = 2\n"}
        assert not merged.conflicts
    assert os.readlink(Path(ws.root) / "settings") == "real.py"  # the folder is untouched


def test_reading_a_link_names_its_target(ws: sk.Workspace) -> None:
    with pytest.raises(sk.ShadowError, match=r"settings: is a symlink .*'real\.py'") as caught:
        ws.branch("r").read("settings")
    assert "stage" not in str(caught.value)  # a read, not a staging call
