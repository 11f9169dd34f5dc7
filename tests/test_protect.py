"""Version-control metadata and protected paths are read-only to agents (DESIGN invariant 7):
the fsmonitor plant, tried at every door of the API and of the MCP server, on a real git
repository with a submodule; the `.git` tree is compared and `git status` run after."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp_helpers import over_stdio
from overlay_helpers import needs_fuse, snapshot

import shadowkernel as sk
from shadowkernel.paths import Protection, RelPath

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "protocol.file.allow=always"]
MOD = "def add(a, b):\n    return a + b\n"


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run([*GIT, *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with a commit, a submodule (its `.git` is a gitdir file) and a .env."""
    sub = tmp_path / "subsrc"
    sub.mkdir()
    git(sub, "init", "-q")
    (sub / "s.py").write_text("S = 1\n")
    git(sub, "add", ".")
    git(sub, "commit", "-qm", "sub")
    root = tmp_path / "project"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg/mod.py").write_text(MOD)
    (root / ".env").write_text("TOKEN=secret\n")
    (root / ".github/workflows").mkdir(parents=True)
    (root / ".github/workflows/ci.yml").write_text("on: push\n")
    git(root, "init", "-q")
    git(root, "submodule", "add", "-q", str(sub), "sub")
    git(root, "add", ".")
    git(root, "commit", "-qm", "first")
    assert (root / "sub/.git").is_file()
    return root


def planted(repo: Path, marker: Path) -> str:
    """The repository's .git/config with a core.fsmonitor that makes `marker`."""
    config = (repo / ".git/config").read_text()
    return config + f'[core]\n\tfsmonitor = "touch {marker}; true"\n'


def test_the_plant_works_when_written_by_hand(repo: Path, tmp_path: Path) -> None:
    """The positive control: this config line does run a command on `git status`."""
    copy, marker = tmp_path / "copy", tmp_path / "hand-marker"
    shutil.copytree(repo, copy, symlinks=True)
    (copy / ".git/config").write_text(planted(copy, marker))
    git(copy, "status")
    assert marker.exists()


@pytest.fixture
def ws(repo: Path) -> Iterator[sk.Workspace]:
    with sk.Workspace(repo, servers=[], protect=[".env", ".github/workflows/**"]) as workspace:
        yield workspace


def unchanged_after_git_status(repo: Path, git_before: dict[str, tuple], marker: Path) -> None:
    assert snapshot(repo / ".git", with_times=False) == git_before
    assert not marker.exists()
    git(repo, "status")  # what the user does next
    assert not marker.exists()


DOORS = [".git/config", ".GIT/config", "sub/.git", ".git/hooks/post-commit", "pkg/.hg/hgrc",
         ".svn/entries", ".jj/repo/store", ".env", "pkg/.env", ".github/workflows/ci.yml"]  # fmt: skip


@needs_fuse
@pytest.mark.timeout(240)
def test_the_plant_fails_at_every_door(ws: sk.Workspace, repo: Path, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    git_before = snapshot(repo / ".git", with_times=False)
    folder_before = snapshot(repo, with_times=False)
    plant = planted(repo, marker)
    a = ws.branch("agent")
    uri = (repo / ".git/config").as_uri()
    end = len(plant.splitlines())
    attempts = {
        "write": lambda p: a.write(p, plant),
        "write_bytes": lambda p: a.write_bytes(p, plant.encode(), mode=0o755),
        "replace": lambda p: a.replace(".git/config", "[core]", f"[core]\n\tfsmonitor = {marker}"),
        "apply_patch": lambda p: a.apply_patch(f"--- /dev/null\n+++ b/{p}\n@@ -0,0 +1 @@\n+x\n"),
        "delete": lambda p: a.delete(".git/config" if "git" in p else p),
        "apply_edit": lambda p: a.apply_edit({"changes": {uri: [{
            "range": {"start": {"line": end, "character": 0},
                      "end": {"line": end, "character": 0}},
            "newText": "\tfsmonitor = x\n"}]}}),
    }  # fmt: skip
    for door, attempt in attempts.items():
        for path in DOORS:
            with pytest.raises(sk.PathError, match="protected") as refused:
                attempt(path)
            assert door in ("replace", "delete", "apply_edit") or path in str(refused.value)
    assert a.version == 0 and a.files == {}

    # a run may read version-control metadata and write there, but nothing of it is kept
    script = (f"grep -q '\\[core\\]' .git/config && printf '{plant}' > .git/config"
              " && echo 'gitdir: /tmp/elsewhere' > sub/.git && echo 'X=1' > .env"
              " && printf '#!/bin/sh\\ntouch {marker}\\n' > .git/hooks/pre-commit"
              " && ln -s .git/config cfg && echo 'NEW = 1' > pkg/new.py")  # fmt: skip
    result = a.run(script, keep=True)
    assert result.ok, result.stderr
    assert dict(a.files) == {"pkg/new.py": b"NEW = 1\n"}
    note = next(n for n in result.notes if n.startswith("not kept"))
    for path in (".git/config", ".git/hooks/pre-commit", "sub/.git", ".env", "cfg"):
        assert path in note
    assert "gitdir: /tmp/elsewhere" in a.run("cat sub/.git").stdout  # the scratch layer has it
    assert {e.path for e in a.scratch()} >= {".git/config", "sub/.git", ".env"}
    assert ".git/config" not in a.diff() and "# scratch" in a.diff(scratch=True)

    accepted = a.accept()
    assert accepted.written == ("pkg/new.py",)
    assert (repo / "pkg/new.py").read_text() == "NEW = 1\n"
    folder_before.pop("pkg/new.py", None)
    after = snapshot(repo, with_times=False)
    after.pop("pkg/new.py")
    assert after == folder_before
    unchanged_after_git_status(repo, git_before, marker)


@needs_fuse
@pytest.mark.timeout(240)
def test_the_plant_fails_at_every_mcp_tool(repo: Path, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    git_before = snapshot(repo / ".git", with_times=False)
    plant = planted(repo, marker)

    async def session() -> None:
        async with over_stdio(repo, "--servers", "ruff", "--allow-accept") as agent:
            await agent.call("create_branch", name="agent")
            calls = {
                "write_file": {"path": ".git/config", "content": plant},
                "replace_in_file": {"path": ".git/config", "old": "[core]",
                                    "new": f"[core]\n\tfsmonitor = {marker}"},
                "apply_patch": {"patch": "--- a/sub/.git\n+++ b/sub/.git\n@@ -1 +1 @@\n"
                                         "-gitdir: ../.git/modules/sub\n+gitdir: /tmp/x\n"},
                "delete_file": {"path": ".git/HEAD"},
            }  # fmt: skip
            for tool, arguments in calls.items():
                message = await agent.error(tool, branch="agent", **arguments)
                assert "protected" in message and "version-control" in message, message
            ran = await agent.call("run", branch="agent", keep=True,
                                   command=f"printf '{plant}' > .git/config && echo 1 > k.txt")  # fmt: skip
            assert any("not kept" in n and ".git/config" in n for n in ran["result"]["notes"])
            done = await agent.call("accept", branch="agent")
            assert done["written"] == ["k.txt"]

    anyio.run(session)
    assert (repo / "k.txt").read_text() == "1\n"
    unchanged_after_git_status(repo, git_before, marker)


@pytest.mark.parametrize(
    ("path", "protected"),
    [(".git", True), (".git/config", True), ("a/b/.git", True), ("sub/.git/x", True),
     (".Git/HEAD", True), (".hg/store", True), ("x/.svn", True), (".jj", True),
     (".gitignore", False), (".github/x.yml", False), ("pkg/git/x", False), ("a.git", False),
     (".env", True), ("deep/.env", True), (".env.example", False),
     (".github/workflows/ci.yml", True), ("x/.github/workflows/ci.yml", False)],
)  # fmt: skip
def test_which_paths_are_protected(path: str, protected: bool) -> None:
    protection = Protection([".env", "/.github/workflows/**"])
    assert (protection.reason(RelPath(path)) is not None) is protected


def test_what_protects_a_path_is_named() -> None:
    protection = Protection([".env", "# a comment", "/.github/workflows/**"])
    assert protection.rule(RelPath("deep/.env")) == "the protect= glob '.env'"
    assert protection.rule(RelPath(".github/workflows/ci.yml")) == (
        "the protect= glob '/.github/workflows/**'")  # fmt: skip
    assert protection.rule(RelPath("sub/.git")) == "version-control metadata (.git)"
    assert protection.rule(RelPath("pkg/mod.py")) is None


def test_links_to_protected_or_outer_paths_are_refused() -> None:
    protection = Protection()
    for target in (b".git/config", b"../.git/hooks", b"/etc/passwd", b"../../outside"):
        with pytest.raises(sk.PathError, match="symlink"):
            protection.check_links({RelPath("pkg/link"): target}, "test")
    protection.check_links({RelPath("pkg/link"): b"mod.py", RelPath("l2"): b"pkg/../pkg"}, "ok")


def test_protect_must_be_a_list_of_globs(tmp_path: Path) -> None:
    with pytest.raises(sk.ArgumentError, match="protect="):
        sk.Workspace(tmp_path, protect=".env")  # type: ignore[arg-type]


def test_user_folder_writes_refuse_protected_paths(tmp_path: Path) -> None:
    from shadowkernel.workspace.folder import Folder

    folder = Folder(str(tmp_path), Protection([".env"]))
    for path in (".git/config", "sub/.git", ".env"):
        with pytest.raises(sk.PathError, match="protected"):
            folder.write_atomic(RelPath(path), b"x", None)
    assert os.listdir(tmp_path) == []
