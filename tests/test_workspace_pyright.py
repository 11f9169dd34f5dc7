"""Cross-file answers with a type checker (basedpyright): the slower check of invariant 3.

Two branches change the same function's signature in opposite ways; the importer's lints and
a definition request interleave between them. Each answer must reflect its own branch's
files, which only holds if the switch resyncs files the server read from the disk.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from overlay_helpers import needs_fuse

import shadowkernel as sk
from shadowkernel.lsp import available_servers

pytestmark = [
    needs_fuse,
    pytest.mark.slow,
    pytest.mark.timeout(240),
    pytest.mark.skipif(not available_servers()["basedpyright"], reason="needs basedpyright"),
]

LIB = "def area(w: int, h: int) -> int:\n    return w * h\n"
USE = "from pkg.lib import area\n\nprint(area(2, 3))\n"


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[sk.Workspace]:
    root = tmp_path_factory.mktemp("pyright") / "project"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg/__init__.py").write_text("")
    (root / "pkg/lib.py").write_text(LIB)
    (root / "pkg/use.py").write_text(USE)
    with sk.Workspace(root, servers=["basedpyright"]) as workspace:
        yield workspace


def errors(table: object) -> list[tuple[str, int]]:
    rows = table[table["severity"] == "error"]  # type: ignore[index]
    return sorted(zip(rows["path"], rows["line"], strict=True))


def test_importer_lints_follow_each_branch(ws: sk.Workspace) -> None:
    one = ws.branch("one-arg")
    one.write("pkg/lib.py", "def area(w: int) -> int:\n    return w * w\n")
    three = ws.branch("three-args")
    three.write("pkg/lib.py", "def area(w: int, h: int, d: int) -> int:\n    return w * h * d\n")
    same = ws.branch("unchanged")
    same.write("pkg/lib.py", LIB + "\n")
    for _ in range(2):  # interleaved twice: answers must not depend on the order served
        for branch in (one, three, same):
            table = branch.lint(paths=["pkg/use.py"])
            expected = [] if branch is same else [("pkg/use.py", 3)]
            assert errors(table) == expected, (branch.name, table[["line", "message"]])
            if expected:
                assert table["new"].all()  # the base has no error there
    where = one.definition("pkg/use.py", 3, 7)
    assert [(loc.path, loc.line) for loc in where] == [("pkg/lib.py", 1)]
    hover = three.hover("pkg/use.py", 3, 7)
    assert hover is not None and "d: int" in hover.text
