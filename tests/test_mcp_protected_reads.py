"""The paths a user protects (`--protect GLOB`) are not readable through the tools either.

A project with a `.env` holding a secret and a CI workflow, both protected, and symlinks
into them, served by the real `shadowkernel mcp --protect ...` over stdio to the `mcp` SDK's
client: `read_file`, `list_files`, `lint` and the navigation tools refuse them (by name, at
any depth, through a link) with a tool error naming the path and the glob, as they refuse
`.git` (tests/test_mcp_git_reads.py), and `list_files` leaves them out (a link to one too, and a folder a glob protects whole). The Python API's
`read` is the user's own and still reads them; a run still reads them too.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp_helpers import over_stdio
from overlay_helpers import needs_fuse

import shadowkernel as sk
from shadowkernel.agents.tools import Tools

pytestmark = pytest.mark.timeout(240)

SECRET = "sk-live-notarealsecret0123456789"
PROTECT = [".env", ".github/workflows/**"]
MOD = "def add(a, b):\n    return a + b\n"
# Each way to name a protected file: the file, at depth, below a protected folder, a link to
# the file, a link to the folder and what lies below that link.
REFUSED = {".env": "'.env'", "./.env": "'.env'", "pkg/.env": "'.env'",
           ".github/workflows/ci.yml": "'.github/workflows/**'", "settings": "'.env'",
           "flows/ci.yml": "'.github/workflows/**'"}  # fmt: skip


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg/mod.py").write_text(MOD)
    (root / ".env").write_text(f"TOKEN={SECRET}\n")
    (root / "pkg/.env").write_text(f"TOKEN={SECRET}\n")
    (root / ".env.example").write_text("TOKEN=\n")  # not protected: '.env' is the whole name
    (root / ".github/workflows").mkdir(parents=True)
    (root / ".github/workflows/ci.yml").write_text(f"env: {{TOKEN: {SECRET}}}\n")
    (root / ".github/CODEOWNERS").write_text("* @me\n")
    (root / "settings").symlink_to(".env")
    (root / "flows").symlink_to(".github/workflows")
    return root


def test_the_tool_table_refuses_protected_reads_the_api_allows(project: Path) -> None:
    with sk.Workspace(project, servers=[], state=None, protect=PROTECT) as ws:
        a = ws.branch("a")
        assert SECRET in a.read(".env")  # the notebook's user owns the folder
        tools = Tools(ws)
        for path, glob in REFUSED.items():
            with pytest.raises(sk.PathError, match="protect") as error:
                tools.read_file("a", path)
            assert glob in str(error.value) and SECRET not in str(error.value)
        assert tools.read_file("a", ".env.example")["content"] == "TOKEN=\n"
        names = [e["name"] for e in tools.list_files("a")["entries"]]
        assert names == [".env.example", ".github", "pkg"]  # flows: a link to a protected folder


@needs_fuse
def test_mcp_tools_refuse_protected_reads_and_leave_them_out_of_listings(project: Path) -> None:
    async def session() -> None:
        async with over_stdio(project, "--servers", "ruff", "--protect", *PROTECT) as agent:
            await agent.call("create_branch", name="a")
            for path, glob in REFUSED.items():
                message = await agent.error("read_file", branch="a", path=path)
                assert message.startswith("read_file: "), message
                assert "is refused" in message and glob in message, message
                assert "agents may not read protected paths" in message and SECRET not in message
            message = await agent.error("read_file", branch="a", path="settings")
            assert "'settings' is refused: it leads to '.env'" in message, message
            message = await agent.error("lint", branch="a", paths=["pkg/mod.py", ".env"])
            assert message.startswith("lint: ") and "'.env'" in message, message
            message = await agent.error("hover", branch="a", path="settings", line=1, column=1)
            assert message.startswith("hover: ") and "protect" in message, message

            root = await agent.call("list_files", branch="a")
            names = [e["name"] for e in root["entries"]]
            assert names == [".env.example", ".github", "pkg"]
            github = await agent.call("list_files", branch="a", path=".github")
            assert [e["name"] for e in github["entries"]] == ["CODEOWNERS"]
            for folder in (".github/workflows", "flows"):  # a folder the glob protects whole
                message = await agent.error("list_files", branch="a", path=folder)
                assert "'.github/workflows/**'" in message, message
            pkg = await agent.call("list_files", branch="a", path="pkg")
            assert [e["name"] for e in pkg["entries"]] == ["mod.py"]
            assert (await agent.call("read_file", branch="a", path="pkg/mod.py"))["content"] == MOD

            ran = await agent.call("run", branch="a", command="cat .env")  # a run still reads it
            assert SECRET in ran["result"]["stdout"]

    anyio.run(session)


@needs_fuse
def test_navigation_shows_nothing_of_a_protected_file(tmp_path: Path) -> None:
    """A hover shows the definition it is about (`TOKEN = "..."`): one whose symbol is defined
    in a protected file is refused; definitions and symbols there are left out."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "secret_conf.py").write_text(f'TOKEN = "{SECRET}"\n')
    (root / "use.py").write_text("from secret_conf import TOKEN\n\nprint(TOKEN)\n")

    async def session() -> None:
        async with over_stdio(root, "--servers", "jedi-language-server", "--protect",
                              "secret_conf.py") as agent:  # fmt: skip
            await agent.call("create_branch", name="a")
            message = await agent.error("hover", branch="a", path="use.py", line=3, column=7)
            assert "defined in 'secret_conf.py', which is protected" in message, message
            assert SECRET not in message
            found = await agent.call("definition", branch="a", path="use.py", line=3, column=7)
            assert found["locations"] == []
            named = await agent.call("symbols", branch="a", query="TOKEN")
            assert "secret_conf.py" not in [s["path"] for s in named["symbols"]]
            shown = await agent.call("hover", branch="a", path="use.py", line=3, column=1)
            assert "print" in shown["hover"]["text"]  # a builtin's hover is the agent's

    anyio.run(session)


def test_a_folder_glob_protects_the_folder_itself(tmp_path: Path) -> None:
    """`secrets/` (gitignore: only a folder) hides the folder from listings and refuses
    listing it, not only the files below it."""
    root = tmp_path / "project"
    (root / "secrets").mkdir(parents=True)
    (root / "secrets/key.txt").write_text(SECRET)
    (root / "mod.py").write_text(MOD)
    (root / "keys").symlink_to("secrets")
    with sk.Workspace(root, servers=[], state=None, protect=["secrets/"]) as ws:
        ws.branch("a")
        tools = Tools(ws)
        names = [e["name"] for e in tools.list_files("a", "")["entries"]]
        assert names == ["mod.py"]
        for folder in ("secrets", "keys"):
            with pytest.raises(sk.PathError, match="'secrets/'"):
                tools.list_files("a", folder)
        with pytest.raises(sk.PathError, match="'secrets/'"):
            tools.read_file("a", "secrets/key.txt")
