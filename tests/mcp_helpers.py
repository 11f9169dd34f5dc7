"""Driving `shadowkernel mcp` with the SDK's own client, over stdio and streamable HTTP."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import Implementation

COMMAND = [sys.executable, "-m", "shadowkernel.cli", "mcp"]
# The SDK passes a minimal environment: a checkout under test reaches the server through this.
# Only when set: the Inspector refuses `-e PYTHONPATH=` (CI runs from the editable install).
ENV = {k: v for k in ("PYTHONPATH",) if (v := os.environ.get(k))}


def server_env() -> dict[str, str]:
    """ENV and the test's state home (conftest's), for a client that starts the server with a
    minimal environment (the SDK, the Inspector): branches are durable, and without this a
    server keeps them in ~/.local/state, where a later run at the same temporary path restores
    them."""
    return {**ENV, "XDG_STATE_HOME": os.environ["XDG_STATE_HOME"]}


class Agent:
    """One connected client: `call` expects a result, `error` expects a tool error."""

    def __init__(self, session: ClientSession, initialized: Any = None) -> None:
        self.session = session
        self.initialized = initialized  # the server's InitializeResult

    async def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        result = await self.session.call_tool(tool, arguments)
        assert not result.is_error, f"{tool}{arguments}: {text(result)}"
        if tool == "read_file":  # the file's text as it is (then where the rest is)
            assert text(result).startswith(result.structured_content["content"])
        elif tool != "run":  # a run's text is a summary; the others' the JSON again
            assert json.loads(text(result)) == result.structured_content
        return result.structured_content  # type: ignore[return-value]

    async def error(self, tool: str, **arguments: Any) -> str:
        result = await self.session.call_tool(tool, arguments)
        assert result.is_error, f"{tool}{arguments} did not fail: {result.structured_content}"
        return text(result)


def text(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def schema_fields(schema: dict[str, Any], where: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(dotted name, schema) of every object property at any depth of a JSON schema (array
    items and anyOf options included): what a host shows of a tool's output schema."""
    for name, prop in schema.get("properties", {}).items():
        yield f"{where}.{name}", prop
        yield from schema_fields(prop, f"{where}.{name}")
    if "items" in schema:
        yield from schema_fields(schema["items"], f"{where}[]")
    for option in schema.get("anyOf", []):
        yield from schema_fields(option, where)


def _info(name: str) -> Implementation:
    return Implementation(name=name, version="1.0")


def lean(options: tuple[str, ...], defaults: bool) -> tuple[str, ...]:
    """The server's options: ruff alone unless the test names its servers or wants the
    defaults. The default servers add two jedi-language-servers (a lane each), about 3 s of
    CPU per start, and only the navigation tests ask them anything."""
    return options if defaults or "--servers" in options else ("--servers", "ruff", *options)


@asynccontextmanager
async def over_stdio(src: Path, *options: str, name: str = "test-agent",
                     defaults: bool = False) -> AsyncIterator[Agent]:  # fmt: skip
    args = [*COMMAND[1:], str(src), *lean(options, defaults)]
    params = StdioServerParameters(command=COMMAND[0], args=args, env=server_env())
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, client_info=_info(name)) as session,
    ):
        yield Agent(session, await session.initialize())


def http_client(token: str | None) -> httpx2.AsyncClient:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    return httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60, read=300))


@asynccontextmanager
async def over_http(url: str, token: str | None, name: str = "test-agent") -> AsyncIterator[Agent]:
    async with (
        http_client(token) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write, client_info=_info(name)) as session,
    ):
        yield Agent(session, await session.initialize())


@dataclass
class Served:
    url: str
    token: str
    token_file: Path
    process: subprocess.Popen[str]


@contextmanager
def http_server(src: Path, token_file: Path, *options: str,
                defaults: bool = False) -> Iterator[Served]:  # fmt: skip
    """`shadowkernel mcp SRC --http 127.0.0.1:0` as a subprocess; SIGINT stops it."""
    argv = [*COMMAND, str(src), "--http", "127.0.0.1:0", "--token-file", str(token_file),
            *lean(options, defaults)]  # fmt: skip
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        banner = process.stdout.readline() + process.stdout.readline()  # printed when listening
        url = re.search(r"at (http://\S+)", banner)
        token = re.search(r"mode 0600\): (\S+)", banner)
        assert url and token, banner
        yield Served(url[1], token[1], token_file, process)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# The small project the MCP tests serve: a module with an unused import, and a caller of it.
MOD = "import os\n\n\ndef add(a, b):\n    return a + b\n"
USE = "from pkg.mod import add\n\nprint(add(2, 3))\n"


def make_src(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg/__init__.py").write_text("")
    (root / "pkg/mod.py").write_text(MOD)
    (root / "pkg/use.py").write_text(USE)
    return root
