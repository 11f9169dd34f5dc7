"""Delta lints on a real library: seeded random edits of more-itertools' more.py and recipes.py,
real ruff lints before and after, and the `new` column compared with a brute-force reference
that knows, from the edits themselves, which base line every line of the result comes from.

The edits are what agents do: insert statements (new lints with unique messages), delete blank
and comment lines, append comments, add trailing whitespace, rewrite comments. A line the edit
touched but kept (the last four) keeps its identity; an inserted line has none.
"""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
from overlay_helpers import needs_fuse

import shadowkernel as sk
from shadowkernel.lsp import Lint, available_servers, line_map, linemap, mark_new
from shadowkernel.paths import RelPath

FILES = ("more_itertools/more.py", "more_itertools/recipes.py")
RUFF = shutil.which("ruff") or str(Path(__file__).resolve().parent.parent / ".venv/bin/ruff")
# Many rules, so the base has thousands of lints, several per line and many alike.
RULES = "ALL"


@dataclass
class Edited:
    """A text as lines, with each line's base line (1-based) or None for an inserted one."""

    lines: list[bytes]
    origin: list[int | None]

    @classmethod
    def of(cls, text: bytes) -> Edited:
        lines = text.splitlines(keepends=True)
        return cls(lines, list(range(1, len(lines) + 1)))

    def text(self) -> bytes:
        return b"".join(self.lines)


KINDS = ("insert", "insert", "delete", "comment", "space", "rewrite")


def random_edit(rng: random.Random, edited: Edited, tag: str, kind: str = "") -> None:
    """One edit (of `kind`, else a random one) that keeps the module valid Python, so ruff
    lints all of it."""
    lines = edited.lines
    kind = kind or rng.choice(KINDS)
    if kind == "insert":  # before a top-level def or class: always a valid place
        spots = [i for i, x in enumerate(lines)
                 if x.startswith((b"def ", b"class ", b"@")) and not lines[i - 1].startswith(b"@")]  # fmt: skip
        at = rng.choice(spots)
        new = [f"zz_{tag} = undefined_{tag}\n".encode(), f"import zz_mod_{tag}\n".encode()]
        new = new[: rng.randint(1, 2)]
        lines[at:at] = new
        edited.origin[at:at] = [None] * len(new)
        return
    plain = [i for i, x in enumerate(lines) if not x.rstrip().endswith(b"\\")]
    if kind == "delete":
        spots = [i for i in plain if not lines[i].strip() or lines[i].lstrip().startswith(b"#")]
        at = rng.choice(spots)
        del lines[at], edited.origin[at]
    elif kind == "comment":
        at = rng.choice(plain)
        lines[at] = lines[at].rstrip(b"\r\n") + f"  # note {tag}\n".encode()
    elif kind == "space":
        at = rng.choice(plain)
        lines[at] = lines[at].rstrip(b"\r\n") + b"   \n"
    else:  # a comment line rewritten: the same line, touched
        spots = [i for i in plain if lines[i].lstrip().startswith(b"#")]
        at = rng.choice(spots)
        indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
        lines[at] = indent + f"# rewritten {tag}\n".encode()


def ruff_lints(path: str, text: bytes) -> list[Lint]:
    done = subprocess.run(
        [RUFF, "check", "--no-cache", "--isolated", f"--select={RULES}", "--output-format=json",
         "--exit-zero", "--stdin-filename", path, "-"],
        input=text, capture_output=True, check=True, timeout=120,
    )  # fmt: skip
    return [Lint(RelPath(path), d["location"]["row"], d["location"]["column"],
                 d["end_location"]["row"], d["end_location"]["column"], "warning",
                 d["code"] or "", "ruff", d["message"])
            for d in json.loads(done.stdout)]  # fmt: skip


def reference_flags(lints: list[Lint], base: list[Lint], origin: list[int | None]) -> list[bool]:
    """Brute force: a lint is old when a base lint with its code, source and message sits on
    the base line its line came from (each base lint excusing one); a lint on an empty range
    at 1:1 (about the whole file) when the base had one too."""

    def where(lint: Lint, line: int | None) -> object:
        return (
            "file" if (lint.line, lint.column, lint.end_line, lint.end_column) == (1,) * 4 else line
        )

    left = Counter((where(b, b.line), b.key) for b in base)
    flags = []
    for lint in lints:
        slot = (where(lint, origin[lint.line - 1]), lint.key)
        flags.append(not left[slot] > 0)
        left[slot] -= 1 if left[slot] > 0 else 0
    return flags


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("path", FILES)
def test_new_column_equals_the_reference_after_random_edits(
    library: Path, path: str, seed: int
) -> None:
    base_text = (library / path).read_bytes()
    rng = random.Random(f"{path}:{seed}")
    edited = Edited.of(base_text)
    for step in range(rng.randint(1, 8)):
        random_edit(rng, edited, f"s{seed}_{step}", "insert" if step == 0 else "")
    new_text = edited.text()

    base, lints = ruff_lints(path, base_text), ruff_lints(path, new_text)
    assert len(base) > 300 and not any(x.code == "" for x in lints)  # real lints, no syntax error
    flags = mark_new(lints, base, {RelPath(path): base_text}, {RelPath(path): new_text})
    expected = reference_flags(lints, base, edited.origin)
    wrong = [(x.line, x.code, x.message) for x, f, e in zip(lints, flags, expected, strict=True)
             if f != e]  # fmt: skip
    assert not wrong
    assert any(expected) and not all(expected)  # both kinds of lint are there


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("breaks", [b"\n", b"\r\n"])
def test_line_map_agrees_with_the_edits(library: Path, seed: int, breaks: bytes) -> None:
    """Every kept line maps to its own base line (or to one reading exactly the same, where
    lines repeat); every inserted line maps nowhere. A CRLF base has no index of its breaks:
    its lines are counted in it."""
    base_text = (library / FILES[0]).read_bytes().replace(b"\n", breaks)
    base_lines = base_text.splitlines()
    rng = random.Random(seed)
    edited = Edited.of(base_text)
    for step in range(rng.randint(1, 12)):
        random_edit(rng, edited, f"m{seed}_{step}")
    mapping = line_map(base_text, edited.text())
    for number, origin in enumerate(edited.origin, 1):
        found = mapping.get(number)
        if origin is None:
            assert found is None, (number, edited.lines[number - 1])
        else:
            assert found == origin or (
                found is not None and base_lines[found - 1] == base_lines[origin - 1]
            ), (number, origin, found)


def test_lines_counted_on_a_bases_index_equal_those_counted_in_it(library: Path) -> None:
    data = (library / FILES[0]).read_bytes()  # a new bytes object: not indexed yet
    rng = random.Random(7)
    stretches = [sorted(rng.sample(range(len(data) + 1), 2)) for _ in range(300)]
    stretches += [[0, len(data)], [0, linemap.INDEXED], [len(data) - linemap.INDEXED, len(data)]]
    assert linemap.BASE_BREAKS.cached((data,)) is None
    counted = [linemap._count_lines(data, begin, end) for begin, end in stretches]
    line_map(data, data + b"x = 1\n")  # indexes its base
    assert linemap.BASE_BREAKS.cached((data,)) is not None
    assert [linemap._count_lines(data, begin, end) for begin, end in stretches] == counted
    assert counted[-3] == data.count(b"\n") + (not data.endswith(b"\n"))


def test_line_map_of_identical_empty_and_crlf_texts() -> None:
    assert line_map(b"a\nb", b"a\nb").pairs(2) == {1: 1, 2: 2}
    assert line_map(b"", b"x\n").pairs(1) == {}
    assert line_map(b"a\r\nb\r\nc\r\n", b"a\r\nb  # c\r\nnew = 1\r\nc\r\n").pairs(4) == {
        1: 1, 2: 2, 4: 3}  # fmt: skip
    assert line_map(b"p\nq = f(1)\n", b"p\nq = f(12)\n").pairs(2) == {1: 1, 2: 2}  # edited in place


@needs_fuse
@pytest.mark.skipif(not available_servers().get("ruff"), reason="ruff is not installed")
def test_a_comment_appended_to_a_linted_line_keeps_its_lint_old(
    library: Path, tmp_path: Path
) -> None:
    """The bug the issue saw: `import os  # why` made the base's F401 come back as new."""
    project = tmp_path / "project"
    shutil.copytree(library, project)
    target = project / "more_itertools/recipes.py"
    target.write_text("import os\n" + target.read_text())
    rel = "more_itertools/recipes.py"
    with sk.Workspace(project, servers=["ruff"]) as ws:
        branch = ws.branch("a")
        branch.write(rel, branch.read(rel).replace("import os\n", "import os  # why\n", 1))
        touched = branch.lint()
        branch.replace(rel, "import os  # why\n", "import os  # why\nimport sys\n")
        added = branch.lint()
    assert touched[touched["code"] == "F401"]["new"].tolist() == [False]
    f401 = added[added["code"] == "F401"]
    assert sorted(zip(f401["line"], f401["new"], strict=True)) == [(1, False), (2, True)]


@needs_fuse
@pytest.mark.skipif(not available_servers().get("ruff"), reason="ruff is not installed")
def test_a_lint_about_the_whole_file_stays_old_when_lines_come_above_line_1(
    library: Path, tmp_path: Path
) -> None:
    """An executable module without a shebang (EXE002, at 1:1 on an empty range): a comment
    put above line 1 leaves it old; the F401 of an import put there is new."""
    project = tmp_path / "project"
    shutil.copytree(library, project)
    config = project / "pyproject.toml"
    config.write_text(config.read_text().replace('"E9", "F"]', '"E9", "F", "EXE"]', 1))
    rel = "more_itertools/recipes.py"
    (project / rel).chmod(0o755)  # as more.py is in the sdist
    with sk.Workspace(project, servers=["ruff"]) as ws:
        branch = ws.branch("a")
        branch.write(rel, "# a comment\nimport json\n" + branch.read(rel))
        table = branch.lint([rel], servers=["ruff"])
    new = {code: bool(flag) for code, flag in zip(table["code"], table["new"], strict=True)}
    assert new.get("EXE002") is False and new.get("F401") is True, table[["line", "code", "new"]]


def test_a_lint_moved_by_lines_added_above_stays_old(library: Path, tmp_path: Path) -> None:
    """The line map is made only for files where a lint matches a base lint: here the base's
    F401 moves down two lines and stays old; the added import's F401 is new."""
    project = tmp_path / "project"
    shutil.copytree(library, project)
    rel = "more_itertools/recipes.py"
    target = project / rel
    target.write_text("import os\n" + target.read_text())
    with sk.Workspace(project, servers=["ruff"]) as ws:
        branch = ws.branch("a")
        branch.write(rel, "import sys\nX = 1\n" + branch.read(rel))
        table = branch.lint()
    f401 = table[table["code"] == "F401"]
    assert sorted(zip(f401["line"], f401["message"].str.contains("os"), f401["new"],
                      strict=True)) == [(1, False, True), (3, True, False)]  # fmt: skip


@needs_fuse
@pytest.mark.skipif(not available_servers().get("ruff"), reason="ruff is not installed")
def test_the_lint_report_holds_the_tables_rows(library: Path, tmp_path: Path) -> None:
    """`lint_report` (records, what the MCP server and the agent loops read) and `lint` (the
    table) answer the same lints, flags and version, with `new_only` and without, sync and
    async: an old F401 and a new F401 and F821 in recipes.py, a new F821 in more.py."""
    project = tmp_path / "project"
    shutil.copytree(library, project)
    target = project / "more_itertools/recipes.py"
    target.write_text("import os\n" + target.read_text())
    recipes, more = "more_itertools/recipes.py", "more_itertools/more.py"
    with sk.Workspace(project, servers=["ruff"]) as ws:
        branch = ws.branch("a")
        branch.write(recipes, "import sys\nX = undefined_here\n" + branch.read(recipes))
        branch.write(more, branch.read(more) + "\nY = undefined_there\n")
        for new_only in (False, True):
            report = branch.lint_report(new_only=new_only)
            table = branch.lint(new_only=new_only)
            assert asyncio.run(branch.lint_report_async(new_only=new_only)) == report
            assert (report.branch, report.version) == ("a", table.attrs["version"]) == ("a", 2)
            rows = [(lint.path, lint.line, lint.column, lint.code, lint.message, new)
                    for lint, new in report]  # fmt: skip
            columns = ["path", "line", "column", "code", "message", "new"]
            assert rows == [tuple(r) for r in table[columns].itertuples(index=False)]
            assert report.table().equals(table)
            codes = sorted((lint.path, lint.code, new) for lint, new in report
                           if lint.code in ("F401", "F821"))  # fmt: skip
            expected = [(more, "F821", True), (recipes, "F401", True), (recipes, "F821", True)]
            assert codes == (expected if new_only else [*expected[:1], (recipes, "F401", False),
                                                        *expected[1:]])  # fmt: skip
