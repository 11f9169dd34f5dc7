"""Disk-bound checkers as lint sources: `servers=["ruff", "mypy"]` through a real workspace.

mypy (and go vet, tsc) run as sandboxed runs at the branch's exact version; their rows must
equal what the tool itself prints on the same files (run here natively, on a plain copy of
the branch's files, parsed by the same parser), carry the `new` column against the base, and
come from a cache while the files the checker reads are unchanged.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from overlay_helpers import needs_fuse

import shadowkernel as sk
from shadowkernel.errors import NotFound
from shadowkernel.lsp.checkers import CHECKERS, parse_go_vet, parse_mypy, parse_tsc
from shadowkernel.lsp.specs import find_program

FIXTURES = Path(__file__).parent / "fixtures"
pytestmark = [needs_fuse, pytest.mark.slow, pytest.mark.timeout(400)]
COLUMNS = ["path", "line", "column", "end_line", "end_column", "severity", "code", "message"]


def installed(name: str) -> pytest.MarkDecorator:
    checker = CHECKERS[name]
    found = find_program(checker.argv[0], checker.search) is not None
    return pytest.mark.skipif(not found, reason=f"{name} not installed (.ci/setup)")


def cli_rows(
    name: str, root: Path, files: dict[str, str], parse: object, extra: tuple[str, ...] = ()
) -> list[tuple]:
    """The checker's own output on a plain copy of `root` with `files` written over it."""
    copy = root.parent / f"{root.name}-cli-{name.replace(' ', '-')}"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(root, copy)
    for path, text in files.items():
        (copy / path).write_text(text)
    checker = CHECKERS[name]
    program = find_program(checker.argv[0], checker.search)
    assert program is not None
    done = subprocess.run([program, *checker.argv[1:], *extra], cwd=copy, capture_output=True,
                          text=True, timeout=300, env={**os.environ})  # fmt: skip
    output = done.stderr if checker.stream == "stderr" else done.stdout
    lints = parse(output, [str(copy)])  # type: ignore[operator]
    return sorted(tuple(getattr(lint, c) for c in COLUMNS) for lint in lints)


def rows(table: pd.DataFrame, source: str) -> list[tuple]:
    mine = table[table["source"] == source]
    return sorted(tuple(row) for row in mine[COLUMNS].itertuples(index=False))


def checks(ws: sk.Workspace) -> int:
    return sum(event.op.startswith("check ") for event in ws.events())


@pytest.fixture
def py_ws(tmp_path: Path) -> Iterator[sk.Workspace]:
    root = tmp_path / "python_project"
    shutil.copytree(FIXTURES / "python_project", root)
    with sk.Workspace(root, servers=["ruff", "mypy"]) as workspace:
        yield workspace


@installed("mypy")
def test_mypy_rows_equal_the_cli_and_say_what_is_new(py_ws: sk.Workspace) -> None:
    root = Path(py_ws.root)
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    branch = py_ws.branch("one-arg")
    shapes = "def area(width: int) -> int:\n    return width * width\n"
    legacy = (root / "pkg/legacy.py").read_text() + "\n"  # touched; its old error stays old
    branch.write("pkg/shapes.py", shapes)
    branch.write("pkg/legacy.py", legacy)
    table = branch.lint(paths=["pkg/use.py", "pkg/legacy.py"])
    files = {"pkg/shapes.py": shapes, "pkg/legacy.py": legacy}
    cli = [
        r
        for r in cli_rows("mypy", root, files, parse_mypy)
        if r[0] in ("pkg/use.py", "pkg/legacy.py")
    ]
    assert rows(table, "mypy") == cli and len(cli) == 2, table
    mypy = table[table["source"] == "mypy"]
    assert dict(zip(mypy["path"], mypy["new"], strict=True)) == {
        "pkg/use.py": True,
        "pkg/legacy.py": False,
    }
    assert (table["source"] == "ruff").sum() == 0  # ruff (the server) has nothing to say here

    runs = checks(py_ws)
    again = branch.lint(paths=["pkg/use.py", "pkg/legacy.py"])  # same content: from the cache
    assert checks(py_ws) == runs and rows(again, "mypy") == rows(table, "mypy")
    branch.write(
        "pkg/use.py", "from pkg.shapes import area\n\n\ndef f() -> int:\n    return area(2)\n"
    )
    table = branch.lint(paths=["pkg/use.py"], servers=["mypy"])  # a staged file changed: a run
    assert checks(py_ws) > runs and rows(table, "mypy") == []
    after = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    assert after == before  # a check writes nothing to the user's folder (no .mypy_cache)


@pytest.fixture
def go_ws(tmp_path: Path) -> Iterator[sk.Workspace]:
    root = tmp_path / "go_project"
    shutil.copytree(FIXTURES / "go_project", root)
    with sk.Workspace(root, servers=["go vet"]) as workspace:
        yield workspace


@installed("go vet")
def test_go_vet_rows_equal_the_cli(go_ws: sk.Workspace) -> None:
    root = Path(go_ws.root)
    branch = go_ws.branch("printf")
    main = (
        (root / "main.go")
        .read_text()
        .replace('fmt.Println(greet.Hello("gopher"))', 'fmt.Printf("%d\\n", greet.Hello("gopher"))')
    )
    branch.write("main.go", main)
    table = branch.lint(paths=["main.go"])
    cli = cli_rows("go vet", root, {"main.go": main}, parse_go_vet)
    assert rows(table, "go vet") == cli and len(cli) == 1, table
    assert table["new"].all()


@installed("tsc")
def test_tsc_rows_equal_the_cli(tmp_path: Path) -> None:
    root = tmp_path / "ts_project"
    root.mkdir()
    (root / "a.ts").write_text("export const n: number = 1;\n")
    (root / "tsconfig.json").write_text(
        '{"compilerOptions": {"strict": true}, "include": ["*.ts"]}'
    )
    broken = "const n: number = 'text';\nexport const m = n + missing;\n"
    with sk.Workspace(root, servers=["tsc"]) as ws:
        branch = ws.branch("broken")
        branch.write("a.ts", broken)
        table = branch.lint()
    cli = cli_rows("tsc", root, {"a.ts": broken}, parse_tsc)
    assert rows(table, "tsc") == cli and len(cli) == 2, table


def test_a_checker_name_is_no_server(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("x = 1\n")
    with pytest.raises(NotFound, match="checkers: .*mypy"):
        sk.Workspace(tmp_path, servers=["ruff", "mypy-typo"])


@installed("tsc")
def test_tsc_without_tsconfig_checks_the_branchs_own_files(tmp_path: Path) -> None:
    root = tmp_path / "ts_plain"
    root.mkdir()
    (root / "a.ts").write_text("export const n: number = 1;\n")
    created = "import { n } from './a';\nexport const s: string = n;\n"
    with sk.Workspace(root, servers=["tsc"]) as ws:
        branch = ws.branch("created")
        branch.write("b.ts", created)
        table = branch.lint()
    cli = cli_rows("tsc", root, {"b.ts": created}, parse_tsc, ("a.ts", "b.ts"))
    assert rows(table, "tsc") == cli and len(cli) == 1, table
