"""The tool table as an MCP server (the official SDK's `MCPServer`), and its one error edge.

Each tool is registered from its `Tools` method (signature -> input schema, docstring ->
description, JSON object -> structured result). Errors the caller can fix (`ShadowError`)
become tool errors (`isError`) carrying the message; anything else is a bug, logged with
its traceback and answered with the SDK's generic tool failure. Either way the server stays
up. A middleware tags every request with the client's name (from its `initialize`), so the
workspace's timeline records which external agent asked.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from ..errors import ShadowError
from ..sched import acting_for
from .tools import Tools

INSTRUCTIONS = """\
shadowkernel: a private, writable shadow of the user's project. Create a branch, stage edits
on it (write_file, replace_in_file, apply_patch, delete_file), then lint, navigate and run
inside the shadow; nothing reaches the user's folder except accept (when allowed). Every
staging call makes a new version; lints are final for exactly the version they name. Lines
and columns are 1-based."""


def build_server(tools: Tools, name: str = "shadowkernel") -> MCPServer[Any]:
    """An MCPServer serving `tools`; run it with a transport from `transports`."""
    server: MCPServer[Any] = MCPServer(name, instructions=INSTRUCTIONS, log_level="WARNING")
    for tool_name, method in tools.table().items():
        server.add_tool(_guarded(method), name=tool_name, structured_output=True)
    server.middleware.append(_tag_client)
    return server


def _guarded(method: Callable[..., Any]) -> Callable[..., Any]:
    """The edge: fixable errors become a ToolError with their message, on one line."""

    @functools.wraps(method)
    def tool(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except ShadowError as error:  # what the caller can correct; anything else is a bug
            raise ToolError(" ".join(str(error).split()) or type(error).__name__) from None

    return tool


async def _tag_client(ctx: Any, call_next: Any) -> Any:
    """Run the request as its client: the timeline's `client` column."""
    with acting_for(client_name(ctx)):
        return await call_next(ctx)


def client_name(ctx: Any) -> str:
    params = getattr(getattr(ctx, "session", None), "client_params", None)
    info = getattr(params, "client_info", None)
    return str(getattr(info, "name", None) or "mcp")
