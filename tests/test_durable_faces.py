"""The faces restore too: a real kernel (through jupyter_client) killed and restarted finds
its branches with `%shadow open`, and a new `shadowkernel mcp` stdio server lists the branches
of the one before; both say how many came back."""

from __future__ import annotations

import subprocess
from pathlib import Path

import anyio
import pytest
from kernel_helpers import copy_sample, kernel
from mcp_helpers import COMMAND, over_stdio
from overlay_helpers import needs_fuse, snapshot

pytestmark = [needs_fuse, pytest.mark.timeout(300)]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return copy_sample(tmp_path / "project")


def test_a_killed_kernel_restarts_with_its_branches(project: Path) -> None:
    before = snapshot(project)
    with kernel() as k:
        opened = k.ok(f"%shadow open {project} --servers ruff").stdout
        assert "branches: 0 branches restored from" in opened
        k.ok("a = ws.branch('a')\n"
             "a.replace('inventory/stock.py', 'import os\\n', '')\n"
             "a.write('inventory/new.py', 'NEW = 1\\n')\n"
             "ws.branch('b')")  # fmt: skip
        text = k.value("ws.branches['a'].read('inventory/stock.py')")
        k.manager.restart_kernel(now=True)  # SIGKILL: nothing closes the workspace
        k.client.wait_for_ready(timeout=120)
        reopened = k.ok(f"%shadow open {project} --servers ruff").stdout
        assert "branches: 2 branches restored from" in reopened
        assert k.value("sorted(ws.branches)") == "['a', 'b']"
        assert k.value("ws.branches['a'].version") == "2"
        assert k.value("ws.branches['a'].read('inventory/stock.py')") == text
        assert k.value("ws.branches['a'].read('inventory/new.py')") == "'NEW = 1\\n'"
        assert "-import os" in k.ok("%branch diff a").data("text/plain")[0]
        again = k.ok(f"%shadow open {project} --servers ruff").stdout  # reopened in place
        assert "branches: 2 branches restored from" in again
    assert snapshot(project) == before


def test_a_new_mcp_server_lists_the_branches_of_the_last(project: Path) -> None:
    before = snapshot(project)

    async def first() -> None:
        async with over_stdio(project, "--servers", "ruff") as agent:
            await agent.call("create_branch", name="agent-1")
            await agent.call("write_file", branch="agent-1", path="inventory/x.py",
                             content="X = 1\n")  # fmt: skip
            await agent.call("write_file", branch="agent-1", path="inventory/x.py",
                             content="X = 2\n")  # fmt: skip

    async def second() -> dict:
        async with over_stdio(project, "--servers", "ruff") as agent:
            listed = await agent.call("list_branches")
            read = await agent.call("read_file", branch="agent-1", path="inventory/x.py")
            return {"listed": listed, "read": read}

    anyio.run(first)
    assert said_on_start(project) == "shadowkernel mcp: branches: 1 branch restored from"
    found = anyio.run(second)
    assert [(b["name"], b["version"]) for b in found["listed"]["branches"]] == [("agent-1", 2)]
    assert found["read"]["content"] == "X = 2\n"
    assert snapshot(project) == before


def said_on_start(project: Path) -> str:
    """What `shadowkernel mcp SRC` (stdio) says on stderr about restored branches."""
    server = subprocess.Popen([*COMMAND, str(project), "--servers", "ruff"],
                              stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert server.stderr is not None
    line = ""
    for line in server.stderr:  # until it says it (or ends)
        if "branches:" in line:
            break
    server.communicate("")  # stdin closes: the server closes its workspace and exits
    return line.split(" restored from")[0] + " restored from"
