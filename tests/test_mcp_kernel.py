"""`%shadow mcp` in a real kernel (jupyter_client), reached by an outside MCP client.

The outside agent works on the notebook's own live workspace: it sees the notebook's
branches, the notebook sees its branch, and its requests land on `ws.timeline()` under
its branch and client name. Nothing reaches the user's folder.
"""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import httpx2
import pytest
from kernel_helpers import copy_sample, kernel
from mcp_helpers import http_client, over_http
from overlay_helpers import needs_fuse, snapshot

pytestmark = [needs_fuse, pytest.mark.timeout(240)]


def test_outside_agent_on_the_notebooks_workspace(tmp_path: Path) -> None:
    project = copy_sample(tmp_path / "project")
    before = snapshot(project)
    with kernel() as k:
        k.ok(f"%shadow open {project}")
        k.ok("nb = ws.branch('notebook'); nb.write('nb.py', 'import os\\n'); nb.lint()")
        out = k.ok("%shadow mcp").stdout
        url = re.search(r"clients at (http://127\.0\.0\.1:\d+/mcp)", out)
        token = re.search(r"Authorization: Bearer ([\w-]+)", out)
        assert url and token, out
        assert "claude mcp add --transport http shadowkernel" in out
        assert "[mcp_servers.shadowkernel]" in out and '"mcpServers"' in out
        assert "already serves" in k.usage_error("%shadow mcp")

        async def outside_agent() -> list[str]:
            async with over_http(url[1], token[1], name="outside-agent") as agent:
                names = [b["name"] for b in (await agent.call("list_branches"))["branches"]]
                await agent.call("create_branch", name="ext")
                await agent.call("write_file", branch="ext", path="ext.py",
                                 content="print(undefined)\n")  # fmt: skip
                lints = (await agent.call("lint", branch="ext"))["lints"]
                assert [(r["code"], r["new"]) for r in lints] == [("F821", True)]
                return names

        assert anyio.run(outside_agent) == ["notebook"]  # the notebook's branch, live
        assert k.value("ws.branches['ext'].read('ext.py')") == repr("print(undefined)\n")
        served = k.value("sorted({(e.branch, e.op, e.client) for e in ws.events()})")
        assert "('ext', 'lint', 'outside-agent')" in served
        assert "('notebook', 'lint', '')" in served
        html = k.ok("ws.timeline()").data("text/html")[0]
        assert "ext (outside-agent)" in html

        assert "MCP server stopped" in k.ok("%shadow mcp --stop").stdout

        async def refused() -> None:
            async with http_client(token[1]) as http:
                with pytest.raises(httpx2.ConnectError):
                    await http.post(url[1], json={"jsonrpc": "2.0", "id": 1, "method": "ping"})

        anyio.run(refused)
        assert "no MCP server runs" in k.ok("%shadow mcp --stop").stdout
    assert snapshot(project) == before
