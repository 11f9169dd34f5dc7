"""`shadowkernel mcp` driven by the SDK's own MCP client, over stdio and streamable HTTP.

Each test starts the real command as a subprocess (a real shadow, real language servers,
sandboxed runs) and talks to it as an agent would. The user's folder is hashed before and
compared after: only `accept` on a server started with --allow-accept may change it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp_helpers import MOD, USE, Agent, http_client, http_server, make_src, over_http, over_stdio
from overlay_helpers import needs_fuse, snapshot

from shadowkernel.mcp import TOOL_NAMES

pytestmark = [needs_fuse, pytest.mark.timeout(240)]


@pytest.fixture
def src(tmp_path: Path) -> Path:
    root = make_src(tmp_path)
    (root / ".gitignore").write_text("*.log\n")
    return root


def fix_id(lints: Sequence[Mapping[str, Any]], code: str, title_part: str) -> str:
    row = next(r for r in lints if r["code"] == code)
    return next(f["id"] for f in row["fixes"] if title_part in f["title"])


SERVERS = ("--servers", "ruff", "jedi-language-server")


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_whole_session(src: Path, tmp_path: Path, transport: str) -> None:
    before = snapshot(src)

    async def session(agent: Agent) -> None:
        await staging_linting_fixing(agent)
        await navigating(agent)
        await running(agent)
        await merging(agent)

    async def over_stdio_session() -> None:
        async with over_stdio(src, *SERVERS) as agent:
            await session(agent)

    async def over_http_session(url: str, token: str) -> None:
        async with over_http(url, token) as agent:
            await session(agent)

    if transport == "stdio":
        anyio.run(over_stdio_session)
    else:
        with http_server(src, tmp_path / "token", *SERVERS) as served:
            anyio.run(over_http_session, served.url, served.token)
    assert snapshot(src) == before


async def staging_linting_fixing(agent: Agent) -> None:
    assert await agent.call("create_branch", name="a") == {"branch": "a", "version": 0}
    listed = await agent.call("list_branches")
    assert [b["name"] for b in listed["branches"]] == ["a"]
    assert (await agent.call("read_file", branch="a", path="pkg/mod.py"))["content"] == MOD
    broken = MOD.replace("a + b", "a + c")
    staged = await agent.call("write_file", branch="a", path="pkg/mod.py", content=broken)
    assert staged == {"branch": "a", "version": 1, "op": "write pkg/mod.py",
                      "changed": ["pkg/mod.py"]}  # fmt: skip
    lints = (await agent.call("lint", branch="a", paths=["pkg/mod.py"], servers=["ruff"]))["lints"]
    assert {r["version"] for r in lints} == {1}
    assert {(r["code"], r["line"], r["column"], r["new"]) for r in lints} >= {
        ("F401", 1, 8, False), ("F821", 5, 16, True)}  # fmt: skip
    fixed = await agent.call("apply_fix", branch="a", fix=fix_id(lints, "F401", "Remove unused"))
    assert fixed["version"] == 2 and fixed["changed"] == ["pkg/mod.py"]
    text = (await agent.call("read_file", branch="a", path="pkg/mod.py"))["content"]
    assert "import os" not in text
    stale = await agent.error("apply_fix", branch="a", fix=fix_id(lints, "F821", "Disable"))
    assert "offered at version 1" in stale and "now at version 2" in stale
    await agent.call("replace_in_file", branch="a", path="pkg/mod.py", old="a + c", new="a + b")
    assert (await agent.call("lint", branch="a", new_only=True, servers=["ruff"]))["lints"] == []


async def navigating(agent: Agent) -> None:
    text = (await agent.call("read_file", branch="a", path="pkg/mod.py"))["content"]
    line = text.splitlines().index("def add(a, b):") + 1  # where the fixes left it
    found = await agent.call("definition", branch="a", path="pkg/use.py", line=3, column=7)
    assert [(x["path"], x["line"], x["column"]) for x in found["locations"]] == [
        ("pkg/mod.py", line, 5)]  # fmt: skip
    refs = await agent.call("references", branch="a", path="pkg/mod.py", line=line, column=5)
    assert {x["path"] for x in refs["locations"]} == {"pkg/mod.py", "pkg/use.py"}
    hover = (await agent.call("hover", branch="a", path="pkg/use.py", line=3, column=7))["hover"]
    assert "add" in hover["text"]
    symbols = await agent.call("symbols", branch="a", path="pkg/mod.py")
    assert [(s["name"], s["line"]) for s in symbols["symbols"]] == [("add", line)]
    found = (await agent.call("symbols", branch="a", query="add"))["symbols"]
    assert ("add", "pkg/mod.py") in {(s["name"], s["path"]) for s in found}  # the user's folder
    listing = await agent.call("list_files", branch="a", path="pkg")
    assert [e["name"] for e in listing["entries"]] == ["__init__.py", "mod.py", "use.py"]


async def running(agent: Agent) -> None:
    # -B: no bytecode cache. The sed below keeps the file's size, and a .pyc records the source's
    # mtime in whole seconds, so a fast session would (as natively) run the stale cache.
    ran = await agent.call("run", branch="a", command="python3 -B -m pkg.use")
    assert ran["result"]["stdout"] == "5\n" and ran["result"]["exit_code"] == 0
    version = ran["version"]
    kept = await agent.call("run", branch="a", keep=True,
                            command="sed -i 's/a + b/a * b/' pkg/mod.py && echo x > out.log")  # fmt: skip
    assert kept["version"] == version + 1
    assert "a * b" in (await agent.call("read_file", branch="a", path="pkg/mod.py"))["content"]
    diff = await agent.call("diff", branch="a")
    assert diff["paths"] == ["pkg/mod.py"]  # out.log is .gitignore'd: not staged
    assert "-    return a + b\n+    return a * b\n" in diff["diff"]
    after = await agent.call("run", branch="a", command="python3 -m pkg.use")
    assert after["result"]["stdout"] == "6\n"


async def merging(agent: Agent) -> None:
    await agent.call("create_branch", name="b")
    await agent.call("write_file", branch="b", path="pkg/extra.py", content="Y = 2\n")
    merged = await agent.call("merge_check", a="a", b="b")
    assert merged["conflicts"] == [] and {"pkg/mod.py", "pkg/extra.py"} <= set(merged["files"])
    name = merged["branch"]
    content = (await agent.call("read_file", branch=name, path="pkg/mod.py"))["content"]
    assert "a * b" in content
    assert (await agent.call("lint", branch=name, servers=["ruff"]))["lints"] == []
    await agent.call("create_branch", name="c")
    await agent.call("replace_in_file", branch="c", path="pkg/mod.py", old="a + b", new="a - b")
    clash = await agent.call("merge_check", a="a", b="c")
    assert clash["conflicts"] == ["pkg/mod.py"]
    assert clash["branch"] == "merge-a-c"
    marked = (await agent.call("read_file", branch="merge-a-c", path="pkg/mod.py"))["content"]
    assert marked.index("<<<<<<< a") < marked.index("a * b") < marked.index("a - b")
    assert marked.index("a - b") < marked.index(">>>>>>> c")
    dropped = await agent.call("drop_branch", branch="c")
    assert dropped == {"branch": "c", "dropped": "c"}  # `branch`, as every branch answer
    names = [b["name"] for b in (await agent.call("list_branches"))["branches"]]
    assert "c" not in names and {"a", "b", name} <= set(names)


def test_bad_input_is_a_tool_error_and_the_server_stays_up(src: Path) -> None:
    before = snapshot(src)

    async def session() -> None:
        async with over_stdio(src, defaults=True) as agent:  # definition checks its arguments
            await agent.call("create_branch", name="a")
            await agent.call("write_file", branch="a", path="pkg/dup.py", content="x = 1\nx = 1\n")
            cases: list[tuple[str, dict[str, Any], str]] = [
                ("read_file", {"branch": "nope", "path": "pkg/mod.py"}, "branch 'nope' does not exist"),
                ("write_file", {"branch": "a", "path": "../evil.py", "content": "x"}, "leaves the workspace"),
                ("read_file", {"branch": "a", "path": "/etc/passwd"}, "is absolute"),
                ("replace_in_file", {"branch": "a", "path": "pkg/dup.py", "old": "x = 1", "new": "y"}, "occurs 2 times"),
                ("write_file", {"branch": "a", "path": "pkg/b.py", "content": "a\x00b"}, "binary content"),
                ("write_file", {"branch": "a", "path": "pkg/h.py", "content": "#" * (9 * 2**20)}, "byte limit"),
                ("run", {"branch": "a", "command": " "}, "give a shell command"),
                ("lint", {"branch": "a", "servers": ["no-such-server"]}, "no-such-server"),
                ("apply_patch", {"branch": "a", "patch": "this is not a diff"}, "unified diff"),
                ("accept", {"branch": "a"}, "--allow-accept"),
                ("definition", {"branch": "a", "path": "pkg/mod.py", "line": 0, "column": 1}, "1-based"),
                ("create_branch", {"name": "a"}, "exists"),
                ("apply_fix", {"branch": "a", "fix": "9.9"}, "not offered"),
                ("list_files", {"branch": "a", "path": "no/such"}, "no such folder"),
                ("list_files", {"branch": "a", "path": "pkg/mod.py"}, "is a file"),
                ("symbols", {"branch": "a"}, "give either path"),
            ]  # fmt: skip
            for tool, arguments, expected in cases:
                message = await agent.error(tool, **arguments)
                assert expected in message, (tool, message)
                assert "Traceback" not in message
            # A fix id belongs to the branch that was linted, not to a later one of its name.
            await agent.call("create_branch", name="z")
            await agent.call("write_file", branch="z", path="pkg/z.py", content="import os\n")
            lints = (await agent.call("lint", branch="z"))["lints"]
            await agent.call("drop_branch", branch="z")
            await agent.call("create_branch", name="z")
            await agent.call("write_file", branch="z", path="pkg/z.py", content="import os\n")
            old = fix_id(lints, "F401", "Remove unused")
            assert "not offered" in await agent.error("apply_fix", branch="z", fix=old)
            await agent.call("drop_branch", branch="z")
            # Nothing was staged by the failures, and the server still answers.
            branches = (await agent.call("list_branches"))["branches"]
            assert [(b["name"], b["version"]) for b in branches] == [("a", 1)]
            lints = await agent.call("lint", branch="a", paths=["pkg/mod.py"])
            assert [r["code"] for r in lints["lints"]] == ["F401"]

    anyio.run(session)
    assert snapshot(src) == before


def test_accept_writes_the_folder_only_when_allowed_and_called(src: Path) -> None:
    before, untimed_before = snapshot(src), snapshot(src, with_times=False)

    async def session() -> dict[str, Any]:
        async with over_stdio(src, "--allow-accept") as agent:
            await agent.call("create_branch", name="a")
            await agent.call("replace_in_file", branch="a", path="pkg/mod.py", old="import os\n",
                             new="")  # fmt: skip
            assert snapshot(src) == before  # staged, not written
            return await agent.call("accept", branch="a")

    done = anyio.run(session)
    assert done == {"branch": "a", "written": ["pkg/mod.py"], "deleted": [], "merged": []}
    assert (src / "pkg/mod.py").read_text() == MOD.replace("import os\n", "")
    after = snapshot(src, with_times=False)  # the folder's mtime changes with the rename
    assert {p for p in after if after[p] != untimed_before.get(p)} == {"pkg/mod.py"}


def test_http_refuses_requests_without_the_token(src: Path, tmp_path: Path) -> None:
    with http_server(src, tmp_path / "token") as served:
        assert served.token_file.read_text().strip() == served.token
        assert stat.S_IMODE(os.stat(served.token_file).st_mode) == 0o600

        async def probe() -> None:
            for token in (None, "wrong-token"):
                async with http_client(token) as http:
                    answer = await http.post(served.url, json={"jsonrpc": "2.0", "id": 1,
                                                               "method": "ping"})  # fmt: skip
                    assert answer.status_code == 401, answer.text
                    assert answer.headers["www-authenticate"].startswith("Bearer")
            with pytest.raises(Exception):  # noqa: B017, PT011 - the SDK's own failure type
                async with over_http(served.url, None):
                    pass
            async with over_http(served.url, served.token) as agent:
                assert (await agent.call("list_branches")) == {"branches": []}
                tools = {t.name: t for t in (await agent.session.list_tools()).tools}
                assert tuple(tools) == tuple(n for n in TOOL_NAMES if n != "accept")
                lint = tools["lint"].output_schema
                assert lint and {"branch", "version", "lints"} <= set(lint["properties"])
                assert all(t.output_schema and t.description for t in tools.values())

        anyio.run(probe)
    assert not served.token_file.exists()  # removed when the server stops


def test_two_http_clients_on_their_own_branches_get_exact_answers(
    src: Path, tmp_path: Path
) -> None:
    from shadowkernel import Workspace

    before = snapshot(src)
    versions = {
        "alice": [MOD.replace("a + b", "a + x"), MOD.replace("import os\n", "import sys\n")],
        "bob": [USE.replace("add(2, 3)", "add(2, y)"), USE + "import json\n", MOD],
    }
    seen: dict[str, list[list[tuple[Any, ...]]]] = {}

    async def agent_session(url: str, token: str, name: str) -> None:
        path = "pkg/mod.py" if name == "alice" else "pkg/use.py"
        async with over_http(url, token, name=name) as agent:
            await agent.call("create_branch", name=name)
            seen[name] = []
            for number, text in enumerate(versions[name], 1):
                staged = await agent.call("write_file", branch=name, path=path, content=text)
                assert staged["version"] == number
                answer = await agent.call("lint", branch=name)
                assert answer["version"] == number
                seen[name].append(rows(answer["lints"]))

    async def both(served: Any) -> None:
        async with anyio.create_task_group() as group:
            for name in versions:
                group.start_soon(agent_session, served.url, served.token, name)

    with http_server(src, tmp_path / "token") as served:
        anyio.run(both, served)
    assert snapshot(src) == before
    with Workspace(src, servers=["ruff"]) as fresh:  # the reference: one branch per answer
        for name, texts in versions.items():
            path = "pkg/mod.py" if name == "alice" else "pkg/use.py"
            for number, text in enumerate(texts):
                branch = fresh.branch(f"{name}-{number}")
                branch.write(path, text)
                table = branch.lint()
                expected = rows(table.drop(columns=["fixes"]).to_dict(orient="records"))
                assert seen[name][number] == expected, (name, number)


def rows(lints: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted((r["path"], r["line"], r["column"], r["code"], bool(r["new"])) for r in lints)


def test_fix_ids_die_with_their_branch_even_when_dropped_from_the_notebook(src: Path) -> None:
    from shadowkernel import NotFound, Workspace
    from shadowkernel.mcp import Tools

    with Workspace(src, servers=["ruff"]) as ws:
        tools = Tools(ws)
        tools.create_branch("z")
        tools.write_file("z", "pkg/z.py", "import os\n")
        old = fix_id(tools.lint("z")["lints"], "F401", "Remove unused")
        ws.branches["z"].drop()  # not through the tool
        ws.branch("z").write("pkg/z.py", "import sys\n")  # same name, same version number
        with pytest.raises(NotFound, match="not offered"):
            tools.apply_fix("z", old)


def test_stopping_the_http_server_while_a_client_is_connected(src: Path, tmp_path: Path) -> None:
    from shadowkernel import Workspace
    from shadowkernel.mcp import Tools
    from shadowkernel.mcp.transports import HttpServer

    with Workspace(src, servers=["ruff"]) as ws:
        server = HttpServer(Tools(ws), token_file=str(tmp_path / "token")).start()

        async def connected_while_stopping() -> None:
            async with over_http(server.url, server.token) as agent:
                await agent.call("create_branch", name="a")
                await anyio.to_thread.run_sync(server.stop)

        anyio.run(connected_while_stopping)
        assert not server.running and not (tmp_path / "token").exists()
        assert "a" in ws.branches  # the workspace outlives its server
