"""Navigation at positions outside a file's text: refused by the workspace, before any server.

A real workspace with jedi-language-server over a real folder. Lines and columns are 1-based,
columns in characters; as in an editor, the end of a line and the empty line after a final
line break are positions. Past them a server clamps (hover answered for the last character)
or fails in its own words (jedi's "line not in range"): the workspace says instead how long
the line or the file is, the same `ArgumentError` through the Python API, its async twins,
the tool table and the MCP server, and the request is never queued.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp_helpers import USE, make_src, over_stdio
from overlay_helpers import needs_fuse

import shadowkernel as sk
from shadowkernel.agents.tools import Tools

pytestmark = [needs_fuse, pytest.mark.timeout(240)]

# USE: "from pkg.mod import add\n\nprint(add(2, 3))\n", three lines, the first 23 characters.
PAST_LINE = ("position 1:30 of pkg/use.py in branch 'a' (version 0): line 1 has 23 characters; "
             "column 30 is past its end (the end of the line is column 24; columns count "
             "characters, a tab as one)")  # fmt: skip
PAST_FILE = ("position 40:1 of pkg/use.py in branch 'a' (version 0): the file has 3 lines; "
             "line 40 is past its end (the file ends at line 4, column 1)")  # fmt: skip
WIDE = "s = '\té'\nt = '😀😀'\n"  # 8 characters each: 9 UTF-8 bytes; 10 UTF-16 units


@pytest.fixture(scope="module")
def src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = make_src(tmp_path_factory.mktemp("bounds"))
    (root / "pkg/wide.py").write_text(WIDE)
    return root


@pytest.fixture(scope="module")
def ws(src: Path) -> Iterator[sk.Workspace]:
    with sk.Workspace(src, servers=["jedi-language-server"], state=None) as workspace:
        yield workspace


@pytest.fixture(scope="module")
def a(ws: sk.Workspace) -> sk.Branch:
    return ws.branch("a")


def refused(ask: object) -> str:
    with pytest.raises(sk.ArgumentError) as error:
        ask()  # type: ignore[operator]
    return str(error.value)


def test_past_a_line_end_is_refused_with_the_line_length(a: sk.Branch) -> None:
    at_end = a.hover("pkg/use.py", 1, 24)  # the cursor just after 'add'
    assert at_end is not None and "add" in at_end.text
    assert refused(lambda: a.hover("pkg/use.py", 1, 30)) == PAST_LINE
    for ask in (a.definition, a.references):
        message = refused(lambda ask=ask: ask("pkg/use.py", 3, 18))  # 'print(add(2, 3))'
        assert "line 3 has 16 characters; column 18 is past its end" in message
        assert "(the end of the line is column 17;" in message


def test_past_the_file_end_is_refused_with_the_file_length(a: sk.Branch) -> None:
    assert a.definition("pkg/use.py", 4, 1) == []  # the empty line after the final break
    assert refused(lambda: a.definition("pkg/use.py", 40, 1)) == PAST_FILE
    assert "line 5 is past its end" in refused(lambda: a.references("pkg/use.py", 5, 1))
    assert "line 4 has 0 characters; column 2" in refused(lambda: a.hover("pkg/use.py", 4, 2))


def test_the_async_twins_refuse_the_same(a: sk.Branch) -> None:
    async def ask() -> None:
        for twin in (a.definition_async, a.references_async, a.hover_async):
            with pytest.raises(sk.ArgumentError) as error:
                await twin("pkg/use.py", 40, 1)
            assert str(error.value) == PAST_FILE

    asyncio.run(ask())


def test_columns_count_characters(a: sk.Branch) -> None:
    a.hover("pkg/wide.py", 1, 9)  # the line's end: 8 characters, whatever their bytes
    for line in (1, 2):  # a count of UTF-8 bytes, of UTF-16 units, would take column 10
        message = refused(lambda line=line: a.hover("pkg/wide.py", line, 10))
        assert f"line {line} has 8 characters; column 10 is past its end" in message


def test_the_bounds_are_the_branch_text_not_the_folder(ws: sk.Workspace) -> None:
    short = ws.branch("short")
    short.write("pkg/use.py", "from pkg.mod import add\n")
    message = refused(lambda: short.definition("pkg/use.py", 3, 7))  # the folder's file has it
    assert "pkg/use.py in branch 'short' (version 1): the file has 1 line;" in message
    long = ws.branch("long")
    long.write("pkg/use.py", USE + "\n\nadd(1, 2)\n")
    [found] = long.definition("pkg/use.py", 6, 1)  # the folder's file has 3 lines
    assert (found.path, found.line) == ("pkg/mod.py", 4)
    long.write("pkg/new.py", "from pkg.mod import add\n")  # only the branch has it
    assert "the file has 1 line; line 3" in refused(lambda: long.hover("pkg/new.py", 3, 1))


def test_a_refused_position_is_never_queued(ws: sk.Workspace) -> None:
    b = ws.branch("queued")

    def served() -> int:
        return sum(e.branch == "queued" for e in ws.timeline().events)

    b.hover("pkg/use.py", 1, 21)
    before = served()
    assert before == 1
    for ask in (b.definition, b.references, b.hover):
        refused(lambda ask=ask: ask("pkg/use.py", 40, 1))
        refused(lambda ask=ask: ask("pkg/use.py", 1, 99))
    assert served() == before


def test_the_tool_table_raises_the_api_error(ws: sk.Workspace, a: sk.Branch) -> None:
    tools = Tools(ws)
    for tool in (tools.definition, tools.references, tools.hover):
        assert refused(lambda tool=tool: tool("a", "pkg/use.py", 40, 1)) == PAST_FILE
    assert refused(lambda: tools.hover("a", "pkg/use.py", 1, 30)) == PAST_LINE
    column = {s.name: s for s in tools.specs()}["hover"].input_schema()["properties"]["column"]
    assert "1-based" in column["description"] and "end of a line" in column["description"]


def test_the_mcp_tools_answer_a_tool_error_with_the_same_text(src: Path) -> None:
    async def session() -> None:
        async with over_stdio(src, "--servers", "jedi-language-server") as agent:
            await agent.call("create_branch", name="a")
            for tool in ("definition", "references", "hover"):
                message = await agent.error(tool, branch="a", path="pkg/use.py", line=40,
                                            column=1)  # fmt: skip
                assert message == PAST_FILE
            message = await agent.error("hover", branch="a", path="pkg/use.py", line=1, column=30)
            assert message == PAST_LINE
            found = await agent.call("definition", branch="a", path="pkg/use.py", line=3,
                                     column=7)  # fmt: skip
            assert [x["path"] for x in found["locations"]] == ["pkg/mod.py"]

    anyio.run(session)
