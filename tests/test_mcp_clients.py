"""`shadowkernel mcp` driven by MCP clients this project did not write.

The FastMCP client (PyPI `fastmcp`) and the MCP Inspector's CLI (npm
`@modelcontextprotocol/inspector@2.12.0`, installed by .ci/setup under .venv/node-inspector)
list the tools and call them over stdio and streamable HTTP against the real command: a real
shadow, real language servers, sandboxed runs. The user's folder is compared before and after.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport, StreamableHttpTransport
from mcp_helpers import COMMAND, ENV, MOD, http_server, make_src, server_env
from overlay_helpers import needs_fuse, snapshot
from waiting import wait_until

from shadowkernel.agents.tools import TOOL_NAMES

pytestmark = [needs_fuse, pytest.mark.timeout(300)]

OFFERED = [n for n in TOOL_NAMES if n != "accept"]
INSPECTOR = Path(sys.prefix) / "node-inspector/node_modules/.bin/mcp-inspector"
needs_inspector = pytest.mark.skipif(not INSPECTOR.exists(),
                                     reason="the MCP Inspector: run .ci/setup")  # fmt: skip


@pytest.fixture
def src(tmp_path: Path) -> Path:
    return make_src(tmp_path)


def stdio(src: Path, *options: str) -> StdioTransport:
    """A server that ends with its client, as a host's does. FastMCP keeps a stdio server
    alive after its client by default (until the transport is collected), so the next
    session's server found the folder's branches still held (once, in a full run of the suite)."""
    return StdioTransport(COMMAND[0], [*COMMAND[1:], str(src), *options],
                          env={**os.environ, **ENV}, keep_alive=False)  # fmt: skip


def serving(src: Path) -> bool:
    return any(str(src) in (p.info["cmdline"] or []) and "mcp" in (p.info["cmdline"] or [])
               for p in psutil.process_iter(["cmdline"]))  # fmt: skip


def sleeping(marker: str) -> bool:
    return any(p.info["cmdline"] == ["sleep", marker]
               for p in psutil.process_iter(["cmdline"]))  # fmt: skip


async def a_session(client: Client) -> None:
    """What every transport must do: the tools listed and hinted, a staged edit linted,
    navigation answered, a run answered agent-sized."""
    async with client:
        tools = {t.name: t for t in await client.list_tools()}
        assert list(tools) == OFFERED
        assert all(t.annotations is not None and t.description for t in tools.values())
        assert tools["lint"].annotations.read_only_hint
        assert client.server_info and client.server_info.version
        await client.call_tool("create_branch", {"name": "a"})
        staged = await client.call_tool("write_file", {"branch": "a", "path": "pkg/mod.py",
                                                       "content": MOD.replace("a + b", "a + c")})  # fmt: skip
        assert staged.structured_content["version"] == 1
        lints = (await client.call_tool("lint", {"branch": "a"})).structured_content
        assert {("F821", 5, True)} <= {(r["code"], r["line"], r["new"]) for r in lints["lints"]}
        found = await client.call_tool("definition", {"branch": "a", "path": "pkg/use.py",
                                                      "line": 3, "column": 7})  # fmt: skip
        assert [x["path"] for x in found.structured_content["locations"]] == ["pkg/mod.py"]
        command = "head -c 50000000 /dev/zero | tr '\\0' x"
        big = await client.call_tool_mcp("run", {"branch": "a", "command": command})
        assert len(big.model_dump_json(by_alias=True)) < 2**20
        assert big.structured_content["result"]["stdout_bytes"] == 50_000_000
        bad = await client.call_tool("read_file", {"branch": "a"}, raise_on_error=False)
        assert bad.is_error and "argument 'path' is required" in bad.content[0].text


def test_fastmcp_over_stdio_with_progress_and_cancel(src: Path) -> None:
    before = snapshot(src)
    progress: list[float] = []

    async def noted(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async def session() -> None:
        await a_session(Client(stdio(src)))
        assert not serving(src)  # its server ended with it: the next one may take the branches
        async with Client(stdio(src)) as client:
            await client.call_tool("create_branch", {"name": "b"})
            with pytest.raises(Exception, match="(?i)tim"):  # noqa: PT011 - fastmcp's own type
                await client.call_tool("run", {"branch": "b", "command": "sleep 4527"},
                                       timeout=4, progress_handler=noted)  # fmt: skip
            assert progress  # at least one notification before the client gave up
            await wait_until(lambda: not sleeping("4527"), 10, "the abandoned run")
            with anyio.fail_after(40):  # far below the 4527 s the abandoned run would take
                ran = await client.call_tool("run", {"branch": "b", "command": "echo next"})
            assert ran.structured_content["result"]["stdout"] == "next\n"

    anyio.run(session)
    assert snapshot(src) == before


def test_fastmcp_over_http_stages_six_mib(src: Path, tmp_path: Path) -> None:
    before = snapshot(src)
    six = "y = 2\n" * (6 * 2**20 // 6)

    async def session(url: str, token: str) -> None:
        headers = {"Authorization": f"Bearer {token}"}
        await a_session(Client(StreamableHttpTransport(url, headers=headers)))
        async with Client(StreamableHttpTransport(url, headers=headers)) as client:
            await client.call_tool("create_branch", {"name": "big"})
            staged = await client.call_tool("write_file", {"branch": "big", "path": "big.py",
                                                           "content": six})  # fmt: skip
            assert staged.structured_content["changed"] == ["big.py"]
            counted = await client.call_tool("run", {"branch": "big", "command": "wc -c < big.py"})
            assert counted.structured_content["result"]["stdout"] == f"{len(six)}\n"

    async def wrong_token(url: str) -> None:
        async with Client(StreamableHttpTransport(url, headers={"Authorization": "Bearer no"})):
            pass

    with http_server(src, tmp_path / "token", defaults=True) as served:  # it navigates
        anyio.run(session, served.url, served.token)
        with pytest.raises(Exception) as refused:  # noqa: PT011 - fastmcp's own type
            anyio.run(wrong_token, served.url)
        assert "wrong bearer token" in str(refused.value), refused.value
    assert snapshot(src) == before


def inspector(target: list[str], *arguments: str) -> Any:
    """One Inspector CLI call; its JSON answer. A stdio server opens its workspace before it
    answers `initialize`, which on a loaded machine takes longer than the CLI's default 15 s.
    The CLI gives a stdio server a minimal environment: the state home goes with `-e`."""
    environment = [word for k, v in server_env().items() for word in ("-e", f"{k}={v}")]
    argv = [str(INSPECTOR), "--cli", "--connect-timeout", "120000", *environment, *target,
            *arguments]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr + done.stdout
    return json.loads(done.stdout)


@needs_inspector
def test_inspector_cli_over_stdio_and_http(src: Path, tmp_path: Path) -> None:
    before = snapshot(src)
    command = [*COMMAND, str(src), "--servers", "ruff"]  # nothing here navigates
    listed = inspector(command, "--method", "tools/list")
    tools = {t["name"]: t for t in listed["tools"]}
    assert list(tools) == OFFERED
    assert all(t["annotations"]["readOnlyHint"] in (True, False) for t in tools.values())
    assert tools["run"]["inputSchema"]["properties"]["timeout"]["description"]
    created = inspector(command, "--method", "tools/call", "--tool-name", "create_branch",
                        "--tool-arg", "name=a")  # fmt: skip
    assert created["structuredContent"] == {"branch": "a", "version": 0}
    with http_server(src, tmp_path / "token") as served:
        auth = ("--transport", "http", "--header", f"Authorization: Bearer {served.token}")
        listed = inspector([served.url], *auth, "--method", "tools/list")
        assert [t["name"] for t in listed["tools"]] == OFFERED
        inspector([served.url], *auth, "--method", "tools/call", "--tool-name", "create_branch",
                  "--tool-arg", "name=h")  # fmt: skip
        ran = inspector([served.url], *auth, "--method", "tools/call", "--tool-name", "run",
                        "--tool-arg", "branch=h", "--tool-arg", "command=echo hi")  # fmt: skip
        assert ran["structuredContent"]["result"]["stdout"] == "hi\n"
        # The CLI answers any 401 with interactive OAuth unless told not to; then it shows
        # the server's own word (discovery, which clients probe first, is a 404 here).
        wrong = subprocess.run(
            [str(INSPECTOR), "--cli", served.url, "--transport", "http", "--header",
             "Authorization: Bearer wrong", "--stored-auth-only", "--method", "tools/list"],
            capture_output=True, text=True, timeout=120)  # fmt: skip
        assert wrong.returncode != 0 and "wrong bearer token" in wrong.stdout + wrong.stderr
    assert snapshot(src) == before
