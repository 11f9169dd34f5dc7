"""What a host's agent met calling `shadowkernel mcp` the way a model does: arguments a
schema allows but the workspace below took badly. Each answer must be a tool error of one
sentence in the tools' own terms (no Python API, no generic failure), and the server goes on.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import anyio
import pytest
from mcp_helpers import make_src, over_stdio
from overlay_helpers import needs_fuse, snapshot

pytestmark = [needs_fuse, pytest.mark.timeout(240)]

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = make_src(tmp_path)
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "first"]):
        subprocess.run([*GIT, *args], cwd=root, check=True, capture_output=True)
    return root


def test_merge_check_into_a_taken_name_and_an_empty_commit_message(repo: Path) -> None:
    before = worktree(repo)

    async def session() -> None:
        async with over_stdio(repo) as agent:
            for name, text in (("a", "X = 1\n"), ("b", "Y = 2\n")):
                await agent.call("create_branch", name=name)
                await agent.call("write_file", branch=name, path=f"pkg/{name}.py", content=text)
            # A merge into a name taken, given or the default one (a second merge_check of
            # the same branches): the agent is told to pick another or drop_branch it; it
            # was told to "use ws.branches[...] or drop() it", the notebook's API.
            await agent.call("merge_check", a="a", b="b")
            for given in ({}, {"name": "a"}):
                message = await agent.error("merge_check", a="a", b="b", **given)
                assert "exists" in message and "drop_branch" in message, message
                assert "ws." not in message and "drop()" not in message, message
            # An empty commit message: was the SDK's generic "Error executing tool
            # commit_branch" (an IndexError in the export, logged as a crash).
            for empty in ("", "  \n"):
                message = await agent.error("commit_branch", branch="a", message=empty)
                assert "message" in message and "empty" in message, message
            committed = await agent.call("commit_branch", branch="a", message="add X")
            assert committed["ref"] == "refs/heads/agent/a"
            names = [b["name"] for b in (await agent.call("list_branches"))["branches"]]
            assert names == ["a", "b", "merge-a-b"]

    anyio.run(session)
    assert worktree(repo) == before  # commit_branch writes objects and a ref, nothing else


def worktree(root: Path) -> dict[str, tuple]:
    return {k: v for k, v in snapshot(root).items() if k.split("/")[0] != ".git"}
