"""A tiny agent CLI for the CommandAgent test: a real MCP client (the SDK's) that reads the
mcpServers configuration it is given and stages a fix on the branch its server is pinned to
(it never names a branch: the tools' default).

    python mcp_solver.py MCP_CONFIG PROMPT FIX_JSON      FIX_JSON: {"path", "old", "new"}
"""

import asyncio
import json
import sys

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import Implementation


async def main(config_path: str, prompt: str, fix_path: str) -> int:
    with open(config_path) as f:
        server = json.load(f)["mcpServers"]["shadowkernel"]
    with open(fix_path) as f:
        fix = json.load(f)
    async with (
        httpx2.AsyncClient(headers=server["headers"], timeout=120) as http,
        streamable_http_client(server["url"], http_client=http) as (read, write),
        ClientSession(
            read, write, client_info=Implementation(name="solver-cli", version="1")
        ) as session,
    ):
        await session.initialize()
        listed = await session.call_tool("list_branches", {})
        assert len(listed.structured_content["branches"]) == 1, listed.content  # pinned
        text = await session.call_tool("read_file", {"path": fix["path"]})
        assert fix["old"] in text.structured_content["content"]
        staged = await session.call_tool("replace_in_file", fix)
        assert not staged.is_error, staged.content
        lints = await session.call_tool("lint", {"paths": [fix["path"]]})
        assert not lints.is_error
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(*sys.argv[1:4])))
