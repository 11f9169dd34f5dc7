"""`shadowkernel mcp` as agent hosts meet it, driven by the SDK's client over real transports.

Cancel and disconnects kill the run and free the queue, progress arrives, results stay
agent-sized, the size limit is the same over stdio and HTTP, every tool is described and
hinted, navigation answers by default, OAuth discovery is a 404, and SIGTERM or SIGHUP stop
the server cleanly. Each test starts the real command (a real shadow, real servers,
sandboxed runs).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest
from mcp_helpers import (
    MOD,
    Agent,
    http_client,
    http_server,
    make_src,
    over_http,
    over_stdio,
    text,
)
from overlay_helpers import needs_fuse, snapshot
from waiting import wait_for, wait_until

from shadowkernel.agents.tools import COMMAND_LIMIT, TOOL_NAMES, Tools
from shadowkernel.mcp.transports import REQUEST_LIMIT

pytestmark = [needs_fuse, pytest.mark.timeout(240)]


@pytest.fixture
def src(tmp_path: Path) -> Path:
    return make_src(tmp_path)


def sleeping(marker: str) -> list[psutil.Process]:
    """The host's processes running `sleep <marker>` (a run's, seen from outside its sandbox)."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        if process.info["cmdline"] == ["sleep", marker]:
            found.append(process)
    return found


def test_cancel_kills_the_run_and_frees_the_queue_and_progress_arrives(src: Path) -> None:
    progress: list[tuple[float, str | None]] = []

    async def noted(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, message))

    async def session() -> None:
        async with over_stdio(src) as agent:
            await agent.call("create_branch", name="a")
            await agent.call("create_branch", name="b")
            async with anyio.create_task_group() as group:

                async def long_run() -> None:
                    command = "seq 1 100000; echo tail-of-4517; sleep 4517"  # 588 KB, then a mark
                    await agent.session.call_tool("run", {"branch": "a", "command": command},
                                                  progress_callback=noted)  # fmt: skip

                def tail_shown() -> bool:
                    return any("tail-of-4517" in (m or "") for _, m in progress)

                group.start_soon(long_run)
                await wait_until(lambda: sleeping("4517") and tail_shown(), 60, "the tail")
                group.cancel_scope.cancel()  # the SDK sends notifications/cancelled
            await wait_until(lambda: not sleeping("4517"), 10, "the cancelled run's processes")
            with anyio.fail_after(40):  # below the 4517 s the cancelled run would take
                ran = await agent.call("run", branch="b", command="echo next")
            assert ran["result"]["stdout"] == "next\n"
            # A client-side timeout cancels too.
            with pytest.raises(Exception, match="(?i)tim"):  # noqa: PT011 - the SDK's type
                await agent.session.call_tool("run", {"branch": "a", "command": "sleep 4518"},
                                              read_timeout_seconds=3)  # fmt: skip
            await wait_until(lambda: not sleeping("4518"), 10, "the timed-out run's processes")
            assert (await agent.call("run", branch="a", command="echo again"))["result"]["ok"]

    anyio.run(session)
    assert all(m and m.startswith("run: running for") for _, m in progress)
    shown = next(m for _, m in progress if m and "tail-of-4517" in m)
    assert shown.endswith("99999\n100000\ntail-of-4517\n") and len(shown) < 600, shown
    assert [v for v, _ in progress] == sorted(v for v, _ in progress)


def test_a_client_that_goes_away_ends_its_run(src: Path, tmp_path: Path) -> None:
    async def leave_while_running(url: str, token: str) -> None:
        async with over_http(url, token) as agent:
            await agent.call("create_branch", name="a")
            async with anyio.create_task_group() as group:
                group.start_soon(agent.session.call_tool, "run",
                                 {"branch": "a", "command": "sleep 4519"})  # fmt: skip
                await wait_until(lambda: bool(sleeping("4519")), 60, "the run")
                group.cancel_scope.cancel()
        # the session and its HTTP connection are closed here, without a word

    with http_server(src, tmp_path / "token") as served:
        anyio.run(leave_while_running, served.url, served.token)
        anyio.run(wait_until, lambda: not sleeping("4519"), 10, "the left run's processes")


KILLED_CLIENT = """\
import sys, anyio
from mcp_helpers import over_http

async def main(url, token):
    async with over_http(url, token) as agent:
        await agent.call("create_branch", name="a")
        await agent.session.call_tool("run", {"branch": "a", "command": "sleep 4520"})

anyio.run(main, sys.argv[1], sys.argv[2])
"""


def gone(pid: int) -> bool:
    """The process `pid` has exited (reaped, or a zombie: nothing runs any more)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_a_killed_http_client_ends_its_run_and_frees_the_branch(src: Path, tmp_path: Path) -> None:
    """A client killed mid-run sends neither a cancel nor a DELETE: only its connection
    closes. The run's process dies (checked by pid), and the branch's next run is served."""

    async def next_run(url: str, token: str) -> dict[str, Any]:
        async with over_http(url, token) as agent:
            with anyio.fail_after(60):  # far below the 4520 s the orphaned run would take
                return await agent.call("run", branch="a", command="echo next")

    with http_server(src, tmp_path / "token") as served:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(Path(__file__).parent), *filter(None, [os.environ.get("PYTHONPATH")])])}  # fmt: skip
        client = subprocess.Popen([sys.executable, "-c", KILLED_CLIENT, served.url, served.token],
                                  env=env)  # fmt: skip
        try:
            (run,) = wait_for(lambda: sleeping("4520"), 60, "the client's run")
        finally:
            client.kill()
            client.wait()
        wait_for(lambda: gone(run.pid), 10, f"the killed client's run (pid {run.pid}) to end")
        ran = anyio.run(next_run, served.url, served.token)
        assert ran["result"]["stdout"] == "next\n"


def test_runs_answer_agent_sized_results(src: Path) -> None:
    async def session() -> None:
        async with over_stdio(src) as agent:
            await agent.call("create_branch", name="a")
            command = "head -c 50000000 /dev/zero | tr '\\0' x; echo; echo the-end"
            raw = await agent.session.call_tool("run", {"branch": "a", "command": command})
            size = len(raw.model_dump_json(by_alias=True))
            assert size < 2**20, size
            result = raw.structured_content["result"]
            assert result["stdout_truncated"] and result["stdout_bytes"] == 50_000_009
            assert result["stdout"].startswith("xxx") and result["stdout"].endswith("the-end\n")
            assert len(result["stdout"]) < 17_000
            summary = text(raw)
            assert summary.startswith("run on a (now version 0) exited 0") and len(summary) < 3000
            more = await agent.call("run", branch="a", command=command, max_output=100_000)
            assert 100_000 <= len(more["result"]["stdout"]) < 100_200
            # A timeout answers like any other run, with its fields and output.
            late = await agent.call("run", branch="a", command="echo started; sleep 30",
                                    timeout=1)  # fmt: skip
            assert late["result"]["timed_out"] and late["result"]["exit_code"] is None
            assert late["result"]["stdout"] == "started\n" and not late["result"]["ok"]
            assert "max_output" in await agent.error("run", branch="a", command="true",
                                                     max_output=0)  # fmt: skip
            # A command is one argument of bash -c: over Linux's limit for one, a clear error.
            fits = "echo fits #" + "x" * (COMMAND_LIMIT - len("echo fits #"))
            assert (await agent.call("run", branch="a", command=fits))["result"]["stdout"] == (
                "fits\n")  # fmt: skip
            message = await agent.error("run", branch="a", command=fits + "x")
            assert message.endswith(f"command: {COMMAND_LIMIT + 1} bytes, over the "
                                    f"{COMMAND_LIMIT}-byte limit of one argument (bash -c); "
                                    "write_file the script (e.g. gen.sh) and run it: "
                                    "bash gen.sh")  # fmt: skip
            tools = {t.name: t for t in (await agent.session.list_tools()).tools}
            said = tools["run"].input_schema["properties"]["command"]["description"]
            assert f"at most {COMMAND_LIMIT} bytes" in said and "write_file" in said

    anyio.run(session)


def test_tools_are_described_and_hinted_and_errors_are_sentences(src: Path) -> None:
    before = snapshot(src)

    async def session() -> None:
        async with over_stdio(src) as agent:
            info = agent.initialized.server_info
            assert info.name == "shadowkernel" and info.version
            assert agent.initialized.capabilities.logging is not None
            tools = {t.name: t for t in (await agent.session.list_tools()).tools}
            assert tuple(tools) == tuple(n for n in TOOL_NAMES if n != "accept")
            for spec in Tools(workspace=None).specs():  # what tool-calling agents get
                assert tools[spec.name].input_schema == spec.input_schema()
                assert tools[spec.name].description == spec.description
            for tool in tools.values():
                assert tool.description and tool.output_schema, tool.name
                hints = tool.annotations
                assert hints is not None and None not in (
                    hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint,
                    hints.open_world_hint), tool.name  # fmt: skip
                for name, prop in tool.input_schema["properties"].items():
                    assert prop.get("description"), (tool.name, name)
            assert tools["read_file"].annotations.read_only_hint
            assert not tools["write_file"].annotations.read_only_hint
            assert tools["drop_branch"].annotations.destructive_hint
            await agent.call("create_branch", name="a")
            cases = [
                ("read_file", {"branch": "a"}, "read_file: argument 'path' is required"),
                ("run", {"branch": "a", "command": "true", "timeout": "soon"},
                 "run: argument 'timeout': "),
                ("lint", {"branch": "a", "new_only": "maybe"}, "lint: argument 'new_only'"),
                ("accept", {"branch": "a"}, "--allow-accept"),
                ("create_branch", {"name": "a"}, "drop_branch it"),
                # A misspelled or unknown argument is refused, not silently dropped.
                ("lint", {"branch": "a", "path": "pkg/mod.py"},
                 "lint: unknown argument 'path' (did you mean 'paths'?); "
                 "lint takes branch, paths, new_only, servers"),
                ("run", {"branch": "a", "command": "sleep 30", "timout": 1},
                 "run: unknown argument 'timout' (did you mean 'timeout'?)"),
                ("read_file", {"branch": "a", "path": "pkg/mod.py", "ofset": 5, "x": 1},
                 "read_file: unknown arguments 'ofset' (did you mean 'offset'?), 'x'; "),
                ("list_branches", {"all": True}, "list_branches takes no arguments"),
                # A string is not a boolean or a number.
                ("lint", {"branch": "a", "new_only": "yes"},
                 "lint: argument 'new_only': give true or false, not a string (got \"yes\")"),
                ("run", {"branch": "a", "command": "sleep 30", "timeout": "1"},
                 "run: argument 'timeout': give a number, not a string (got \"1\")"),
                ("run", {"branch": "a", "command": "true", "keep": 1},
                 "run: argument 'keep': give true or false, not a number"),
            ]  # fmt: skip
            for tool_name, arguments, expected in cases:
                message = await agent.error(tool_name, **arguments)
                assert message.startswith(expected) or expected in message, message
                assert "\n" not in message and "pydantic" not in message and "ws." not in message
            # JSON numbers for number parameters, and lists, stay accepted.
            ran = await agent.call("run", branch="a", command="true", timeout=5, max_output=100)
            assert ran["result"]["ok"]
            assert (await agent.call("lint", branch="a", paths=["pkg/mod.py"],
                                     new_only=True))["lints"] == []  # fmt: skip

    anyio.run(session)
    assert snapshot(src) == before


def test_navigation_is_answered_by_default_and_explained_without_it(src: Path) -> None:
    async def session() -> None:
        async with over_stdio(src, defaults=True) as agent:  # ruff and jedi-language-server
            await agent.call("create_branch", name="a")
            found = await agent.call("definition", branch="a", path="pkg/use.py", line=3,
                                     column=7)  # fmt: skip
            assert [(x["path"], x["line"]) for x in found["locations"]] == [("pkg/mod.py", 4)]
            hover = await agent.call("hover", branch="a", path="pkg/use.py", line=3, column=7)
            assert "add" in hover["hover"]["text"]
            symbols = await agent.call("symbols", branch="a", query="add")
            assert ("add", "pkg/mod.py") in {(s["name"], s["path"]) for s in symbols["symbols"]}
        async with over_stdio(src, "--servers", "ruff") as agent:  # branch a is restored
            assert [b["name"] for b in (await agent.call("list_branches"))["branches"]] == ["a"]
            for tool, arguments in (("definition", {"line": 3, "column": 7}),
                                    ("hover", {"line": 3, "column": 7}), ("symbols", {})):  # fmt: skip
                place = {"path": "pkg/use.py"} if tool != "symbols" else {"query": "add"}
                message = await agent.error(tool, branch="a", **place, **arguments)
                assert "jedi-language-server" in message and "only lint" in message

    anyio.run(session)


def test_the_staging_limit_holds_over_http(src: Path, tmp_path: Path) -> None:
    six = "x = 1\n" * (6 * 2**20 // 6)  # 6 MiB, every line escaped in JSON ("\n")

    async def session(url: str, token: str) -> None:
        async with over_http(url, token) as agent:
            await agent.call("create_branch", name="a")
            staged = await agent.call("write_file", branch="a", path="big.py", content=six)
            assert staged["version"] == 1
            # Read back by a run: a 6 MiB answer is over the SDK client's own 1 MiB per event.
            counted = await agent.call("run", branch="a", command="wc -c < big.py")
            assert counted["result"]["stdout"] == f"{len(six)}\n"
            # ... and by read_file in pages, each under it.
            pages = [await agent.call("read_file", branch="a", path="big.py")]
            while pages[-1]["more"]:
                pages.append(await agent.call("read_file", branch="a", path="big.py",
                                              offset=pages[-1]["next_offset"]))  # fmt: skip
            assert "".join(p["content"] for p in pages) == six and len(pages) > 10
            assert {p["total_chars"] for p in pages} == {len(six)}
            assert pages[-1]["next_offset"] is None
            nine = "#" * (9 * 2**20)
            assert "byte limit" in await agent.error("write_file", branch="a", path="h.py",
                                                     content=nine)  # fmt: skip
        async with http_client(token) as http:
            body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "write_file", "arguments": {"content": "x" * REQUEST_LIMIT}}})  # fmt: skip
            answer = await http.post(url, content=body, headers={
                "content-type": "application/json",
                "accept": "application/json, text/event-stream"})  # fmt: skip
            assert answer.status_code == 413
            assert "limit" in answer.json()["error"]["message"]
            for path in ("/.well-known/oauth-protected-resource/mcp",
                         "/.well-known/oauth-authorization-server"):  # fmt: skip
                assert (await http.get(url.replace("/mcp", path))).status_code == 404

    with http_server(src, tmp_path / "token") as served:
        anyio.run(session, served.url, served.token)


@pytest.mark.parametrize("signal_number", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_stops_the_server_cleanly(
    src: Path, tmp_path: Path, signal_number: signal.Signals
) -> None:
    async def busy(url: str, token: str) -> Agent:
        async with over_http(url, token) as agent:
            await agent.call("create_branch", name="a")
            await agent.call("lint", branch="a", paths=["pkg/mod.py"])  # servers started
            await agent.call("run", branch="a", command="true")
            return agent

    with http_server(src, tmp_path / "token") as served:
        anyio.run(busy, served.url, served.token)
        children = psutil.Process(served.process.pid).children(recursive=True)
        assert children  # the overlay and the language servers
        served.process.send_signal(signal_number)
        assert served.process.wait(60) == 0
        assert not served.token_file.exists()
        gone, alive = psutil.wait_procs(children, timeout=10)
        assert alive == [], alive
    assert os.listdir(src)  # the folder is there, untouched (snapshot tests elsewhere)


def test_sigterm_stops_a_stdio_server_cleanly(src: Path) -> None:
    from mcp_helpers import COMMAND, ENV

    process = subprocess.Popen([*COMMAND, str(src)], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, env={**os.environ, **ENV})  # fmt: skip
    assert process.stdin and process.stdout
    try:
        hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}}  # fmt: skip
        process.stdin.write(json.dumps(hello).encode() + b"\n")
        process.stdin.flush()
        assert json.loads(process.stdout.readline())["id"] == 1  # answered; the open goes on
        server = psutil.Process(process.pid)
        children = wait_for(lambda: server.children(recursive=True), 60,
                            "a child of the opening workspace")  # fmt: skip
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
        gone, alive = psutil.wait_procs(children, timeout=10)
        assert alive == [], alive
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_a_stdio_line_that_is_not_json_rpc_gets_an_error_answer(src: Path) -> None:
    """Each bad line is answered (with its id when it has one) and named on stderr; the
    server goes on serving."""
    from mcp_helpers import COMMAND, ENV

    process = subprocess.Popen([*COMMAND, str(src), "--servers", "ruff"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env={**os.environ, **ENV})  # fmt: skip
    assert process.stdin and process.stdout and process.stderr

    def ask(line: bytes) -> dict[str, Any]:
        assert process.stdin and process.stdout
        process.stdin.write(line + b"\n")
        process.stdin.flush()
        answered, _, _ = select.select([process.stdout], [], [], 60)  # a bound, not a pace
        assert answered, f"no answer to {line[:80]!r}"
        return json.loads(process.stdout.readline())  # type: ignore[no-any-return]

    try:
        hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}}  # fmt: skip
        assert ask(json.dumps(hello).encode())["id"] == 1
        process.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        call = '{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": ' \
               '"create_branch", "arguments": {"name": "a\\ud800"}}}'  # fmt: skip
        surrogate = ask(call.encode())  # valid JSON, but not text the SDK's parser takes
        assert surrogate["id"] == 2 and surrogate["error"]["code"] == -32700
        truncated = ask(b'{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {')
        assert truncated["id"] is None and truncated["error"]["code"] == -32700
        assert "parse error" in truncated["error"]["message"]
        not_utf8 = ask(b'{"jsonrpc": "2.0", "id": 4, "method": "ping", "x": "\xff"}')
        assert not_utf8["error"]["code"] == -32700
        shapeless = ask(b'{"jsonrpc": "2.0", "id": 5, "method": 7}')
        assert shapeless["id"] == 5 and shapeless["error"]["code"] == -32600
        listed = ask(b'{"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": '
                     b'{"name": "list_branches", "arguments": {}}}')  # fmt: skip
        assert listed["id"] == 6 and listed["result"]["structuredContent"] == {"branches": []}
        process.stdin.close()
        assert process.wait(60) == 0
        stderr = " ".join(process.stderr.read().decode().split())  # rich wraps its lines
        assert stderr.count("is not a JSON-RPC message") == 4, stderr
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


GATED = """\
import os, sys, time
from shadowkernel.mcp.transports import serve_stdio
from shadowkernel.workspace import Workspace

gate, src = sys.argv[1], sys.argv[2]


def open_workspace():  # the real open, once the test creates `gate`
    deadline = time.monotonic() + 120
    while not os.path.exists(gate):
        if time.monotonic() > deadline:
            raise RuntimeError("the test never opened the gate")
        time.sleep(0.05)
    return Workspace(src, servers=["ruff"])


serve_stdio(open_workspace)
"""


def test_stdio_answers_initialize_before_the_workspace_opens(src: Path, tmp_path: Path) -> None:
    """The real serve_stdio, whose open waits for a file the test makes only after the client
    has its answers: so they came before the open, whatever the machine's load."""
    from mcp import ClientSession, StdioServerParameters, stdio_client
    from mcp_helpers import server_env

    script, gate = tmp_path / "gated.py", tmp_path / "gate"
    script.write_text(GATED)
    params = StdioServerParameters(command=sys.executable, args=[str(script), str(gate),
                                   str(src)], env=server_env())  # fmt: skip

    async def session() -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            listed = {t.name for t in (await client.list_tools()).tools}
            assert "create_branch" in listed and not gate.exists()
            gate.touch()  # now the workspace opens; the first call waits for it
            agent = Agent(client)
            assert (await agent.call("create_branch", name="a"))["version"] == 0
            read = await agent.call("read_file", branch="a", path="pkg/mod.py")
            assert read["content"] == MOD

    anyio.run(session)


def test_a_workspace_that_cannot_open_is_named_by_every_tool_call(src: Path) -> None:
    async def session() -> None:
        async with over_stdio(src, "--branch", "b", "--stage", "pkg/mod.py=/no/such.py") as agent:
            assert "read_file" in {t.name for t in (await agent.session.list_tools()).tools}
            for tool in ("list_branches", "diff"):
                message = await agent.error(tool)
                assert "the project could not be opened" in message, message
                assert "cannot read '/no/such.py'" in message, message

    anyio.run(session)


def test_a_server_pinned_to_a_branch(src: Path, tmp_path: Path) -> None:
    start = tmp_path / "start.py"
    start.write_text(MOD + "\n\nSTARTED = True\n")

    before = snapshot(src)

    async def session() -> None:
        async with over_stdio(src, "--branch", "fix-1", "--stage",
                              f"pkg/mod.py={start}") as agent:  # fmt: skip
            tools = {t.name: t for t in (await agent.session.list_tools()).tools}
            assert not {"create_branch", "drop_branch", "merge_check"} & set(tools)
            assert tools["read_file"].input_schema["properties"]["branch"]["default"] == "fix-1"
            listed = await agent.call("list_branches")
            assert [b["name"] for b in listed["branches"]] == ["fix-1"]
            read = await agent.call("read_file", path="pkg/mod.py")  # no branch: the pinned one
            assert read["branch"] == "fix-1" and read["content"] == start.read_text()
            assert "works on branch 'fix-1' only" in await agent.error(
                "read_file", branch="main", path="pkg/mod.py")  # fmt: skip
            assert "not offered" in await agent.error("create_branch", name="other")
            await agent.call("write_file", path="pkg/new.py", content="x = 1\n")
            assert (await agent.call("diff"))["paths"] == ["pkg/mod.py", "pkg/new.py"]

    anyio.run(session)
    assert snapshot(src) == before
