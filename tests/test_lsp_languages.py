"""Every language a project has: C with clangd, Go with gopls, through a real workspace.

The fixture projects (tests/fixtures/c_project, go_project) are copied, then served by a real
workspace: a FUSE shadow and the real servers. Two branches interleave; one renames a
declaration in another file than the caller (a C header, a Go file of the same package), so
the caller's error must show for that branch only, whatever was served before. These servers
read those other files from disk: it holds only if each switch tells them what changed there.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from overlay_helpers import needs_fuse

import shadowkernel as sk
from shadowkernel.lsp import LspPool, available_servers

FIXTURES = Path(__file__).parent / "fixtures"
INSTALLED = available_servers()

pytestmark = [needs_fuse, pytest.mark.slow, pytest.mark.timeout(300)]


def needs(server: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(not INSTALLED[server], reason=f"{server} not installed (.ci/setup)")


def copy_fixture(name: str, into: Path) -> Path:
    root = into / name
    shutil.copytree(FIXTURES / name, root)
    return root


def errors(table: pd.DataFrame) -> list[tuple[str, int, bool]]:
    rows = table[table["severity"] == "error"]
    return sorted(zip(rows["path"], rows["line"], rows["new"], strict=True))


def messages(table: pd.DataFrame) -> str:
    return " | ".join(table["message"])


# -- C with clangd ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def c_ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[sk.Workspace]:
    root = copy_fixture("c_project", tmp_path_factory.mktemp("c"))
    # As CMake writes it: absolute paths of the user's folder (clangd gets them translated).
    database = json.loads((root / "compile_commands.json").read_text())
    for entry in database:
        entry["directory"] = str(root)
        entry["arguments"] = [
            a.replace("-Iinclude", f"-I{root}/include") for a in entry["arguments"]
        ]
    (root / "compile_commands.json").write_text(json.dumps(database))
    with sk.Workspace(root, servers=["clangd"]) as workspace:
        yield workspace


@needs("clangd")
def test_c_header_rename_shows_in_the_caller_for_that_branch_only(c_ws: sk.Workspace) -> None:
    renamed = c_ws.branch("renamed")
    header = (Path(c_ws.root) / "include/util.h").read_text()
    renamed.write("include/util.h", header.replace("util_add", "util_sum"))
    edited = c_ws.branch("edited")
    main = (Path(c_ws.root) / "src/main.c").read_text()
    edited.write("src/main.c", "/* edited */\n" + main)
    for _ in range(3):  # interleaved: each answer is its own branch's, whatever came before
        table = renamed.lint(paths=["src/main.c"])
        assert errors(table) == [("src/main.c", 4, True)], messages(table)
        assert "util_add" in messages(table)
        # -DSCALE=2 and -I<folder>/include come from compile_commands.json: without them,
        # SCALE and util.h would be errors here too.
        table = edited.lint(paths=["src/main.c"])
        assert errors(table) == [], messages(table)


@needs("clangd")
def test_c_definition_crosses_into_the_header(c_ws: sk.Workspace) -> None:
    branch = c_ws.branch("nav")
    found = branch.definition("src/main.c", 4, 17)  # util_add( in main()
    assert [(loc.path, loc.line) for loc in found] in ([("include/util.h", 5)], [("src/util.c", 3)])


# -- Go with gopls ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def go_ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[sk.Workspace]:
    root = copy_fixture("go_project", tmp_path_factory.mktemp("go"))
    with sk.Workspace(root, servers=["gopls"]) as workspace:
        yield workspace


@needs("gopls")
def test_go_rename_in_another_file_of_the_package_is_exact_per_branch(go_ws: sk.Workspace) -> None:
    renamed = go_ws.branch("renamed")
    greet = (Path(go_ws.root) / "greet/greet.go").read_text()
    renamed.write("greet/greet.go", greet.replace("func prefix()", "func lead()"))
    edited = go_ws.branch("edited")
    hello = (Path(go_ws.root) / "greet/hello.go").read_text()
    edited.write("greet/hello.go", hello.replace("// Hello greets", "// Hello greets politely"))
    for _ in range(3):
        table = renamed.lint(paths=["greet/hello.go"])
        assert errors(table) == [("greet/hello.go", 4, True)], messages(table)
        assert "prefix" in messages(table)
        table = edited.lint(paths=["greet/hello.go"])
        assert errors(table) == [], messages(table)


@needs("gopls")
def test_go_definition_crosses_packages(go_ws: sk.Workspace) -> None:
    branch = go_ws.branch("nav")
    found = branch.definition("main.go", 9, 33)  # Hello in greet.Hello("gopher")
    assert [(loc.path, loc.line) for loc in found] == [("greet/hello.go", 4)]
    found = branch.definition("greet/hello.go", 4, 42)  # prefix() -> the other file
    assert [(loc.path, loc.line) for loc in found] == [("greet/greet.go", 6)]


# -- shell with bash-language-server ----------------------------------------------------------


@needs("bash-language-server")
@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed")
def test_shell_lints_follow_each_branch(tmp_path: Path) -> None:
    root = tmp_path / "sh_project"
    root.mkdir()
    (root / "run.sh").write_text('#!/bin/bash\ngreet() {\n  echo "hi $1"\n}\n\ngreet world\n')
    with sk.Workspace(root, servers=["bash-language-server"]) as ws:
        unquoted = ws.branch("unquoted")
        unquoted.write("run.sh", "#!/bin/bash\ngreet() {\n  echo hi $1\n}\n\ngreet world\n")
        same = ws.branch("same")
        same.write("run.sh", (root / "run.sh").read_text() + "\n")
        for _ in range(2):
            table = unquoted.lint()
            assert list(zip(table["line"], table["code"], table["new"], strict=True)) == [
                (3, "SC2086", True)
            ], messages(table)
            assert same.lint().empty
        assert [s.name for s in same.symbols("run.sh")] == ["greet"]


@needs("clangd")
def test_c_text_back_to_one_already_built_is_answered(tmp_path: Path) -> None:
    """A, then the base, then A again in quick succession (a switch away and back): clangd
    coalesces quick changes and would not publish for A's second version at all."""
    root = copy_fixture("c_project", tmp_path)
    base = (root / "src/main.c").read_text()
    broken = base + "int value = undefined_name;\n"

    async def scenario() -> tuple[list[str], list[str]]:
        async with LspPool(root, ["clangd"]) as pool:
            await pool.sync({"src/main.c": broken})
            first = [lint.message for lint in await pool.lint()]
            await pool.sync({"src/main.c": base})
            await pool.sync({"src/main.c": broken})
            return first, [lint.message for lint in await pool.lint()]

    first, again = asyncio.run(scenario())
    assert again == first and any("undefined_name" in m for m in first)


@needs("clangd")
def test_c_database_changed_by_a_switch_is_followed(tmp_path: Path) -> None:
    """A branch that edits compile_commands.json (drops -DSCALE=2) restarts clangd on it."""
    root = copy_fixture("c_project", tmp_path)
    database = root / "compile_commands.json"
    original, main = database.read_text(), (root / "src/main.c").read_text()

    async def scenario() -> list[list[str]]:
        answers = []
        async with LspPool(root, ["clangd"]) as pool:
            for text in (original, original.replace('"-DSCALE=2", ', ""), original):
                database.write_text(text)  # what the FUSE switch does
                await pool.sync({"src/main.c": main}, ["compile_commands.json"])
                answers.append([lint.message for lint in await pool.lint()])
        return answers

    with_scale, without, again = asyncio.run(scenario())
    assert with_scale == again == [] and any("SCALE" in m for m in without), without
