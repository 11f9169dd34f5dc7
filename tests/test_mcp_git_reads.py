"""Version-control metadata is not readable through the tools an outside agent calls.

A real git repository whose `.git/config` holds a credential in a remote's URL, served by the
real `shadowkernel mcp` over stdio: `read_file`, `list_files`, `lint` and the navigation tools
refuse `.git` and anything below it (by name, in any case, at any depth, a submodule's gitdir
file, a link into it) with a tool error saying why, and `list_files` leaves it out (a link
to it too). Writes
there are refused already (tests/test_protect.py). The Python API's `read` is the user's own
and still reads it; the in-process tool table refuses like the server.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import anyio
import pytest
from mcp_helpers import over_stdio
from overlay_helpers import needs_fuse

import shadowkernel as sk
from shadowkernel.agents.tools import Tools

pytestmark = [
    pytest.mark.skipif(shutil.which("git") is None, reason="needs git"),
    pytest.mark.timeout(240),
]

SECRET = "ghp_notarealtoken0123456789"
MOD = "def add(a, b):\n    return a + b\n"
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
# Each way to name version-control metadata: the folder, below it, another case, deeper, a
# submodule's gitdir file, a symlink to `.git`, and what lies below that link.
REFUSED = [".git", ".git/config", "./.git/config", ".git/refs/heads", ".GIT/config",
           "pkg/.git/x", "vendor/.git", "meta", "meta/config"]  # fmt: skip


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg/mod.py").write_text(MOD)
    (root / ".gitignore").write_text("*.log\n")
    (root / "vendor").mkdir()
    (root / "vendor/v.py").write_text("V = 1\n")
    (root / "vendor/.git").write_text("gitdir: ../.git/modules/vendor\n")  # as a submodule's
    for args in (["init", "-q"], ["remote", "add", "origin",
                                  f"https://user:{SECRET}@example.com/x.git"],
                 ["add", "pkg", ".gitignore"], ["commit", "-qm", "first"]):  # fmt: skip
        subprocess.run([*GIT, *args], cwd=root, check=True, capture_output=True)
    (root / "meta").symlink_to(".git")
    assert SECRET in (root / ".git/config").read_text()
    return root


def test_the_tool_table_refuses_what_the_api_reads(repo: Path) -> None:
    with sk.Workspace(repo, servers=[], state=None) as ws:
        a = ws.branch("a")
        assert SECRET in a.read(".git/config")  # the notebook's user owns the folder
        tools = Tools(ws)
        for path in REFUSED:
            with pytest.raises(sk.PathError, match="version-control metadata") as error:
                tools.read_file("a", path)
            assert "credentials" in str(error.value) and SECRET not in str(error.value)
        assert tools.read_file("a", ".gitignore")["content"] == "*.log\n"  # not metadata
        names = [e["name"] for e in tools.list_files("a")["entries"]]
        assert names == [".gitignore", "pkg", "vendor"]


@needs_fuse
def test_mcp_tools_refuse_git_reads_and_leave_it_out_of_listings(repo: Path) -> None:
    async def session() -> None:
        async with over_stdio(repo, "--servers", "ruff") as agent:
            await agent.call("create_branch", name="a")
            for path in REFUSED:
                message = await agent.error("read_file", branch="a", path=path)
                assert "read_file:" in message and "is refused" in message, message
                assert "version-control metadata" in message and "credentials" in message
                assert SECRET not in message
            for path in (".git", ".git/refs", "meta", "vendor/.git"):
                message = await agent.error("list_files", branch="a", path=path)
                assert "list_files:" in message and "version-control metadata" in message
            message = await agent.error("lint", branch="a", paths=[".git/config"])
            assert "lint:" in message and "version-control metadata" in message
            message = await agent.error("hover", branch="a", path="meta/config", line=1, column=1)
            assert "hover:" in message and "version-control metadata" in message

            root = await agent.call("list_files", branch="a")
            assert [e["name"] for e in root["entries"]] == [".gitignore", "pkg", "vendor"]
            vendor = await agent.call("list_files", branch="a", path="vendor")
            assert [e["name"] for e in vendor["entries"]] == ["v.py"]
            assert (await agent.call("read_file", branch="a", path="pkg/mod.py"))["content"] == MOD

    anyio.run(session)
