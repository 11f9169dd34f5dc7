"""`Branch.commit()` exports a branch as a git commit with plumbing only, checked with real
git: `git show` and `git log` see the commit; `git status`, the index file's bytes, HEAD and
the worktree are exactly as before."""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from overlay_helpers import needs_fuse, snapshot

import shadowkernel as sk

pytestmark = [needs_fuse, pytest.mark.timeout(180)]

IDENTITY = {"GIT_AUTHOR_NAME": "Ada", "GIT_AUTHOR_EMAIL": "ada@example.com",
            "GIT_COMMITTER_NAME": "Ada", "GIT_COMMITTER_EMAIL": "ada@example.com"}  # fmt: skip


def git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                          env={**os.environ, **IDENTITY}, check=True)  # fmt: skip
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg/mod.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "README.md").write_text("# demo\n")
    (root / "old.txt").write_text("old\n")
    (root / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (root / "run.sh").chmod(0o755)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "first")
    (root / "dirty.txt").write_text("untracked, uncommitted\n")  # the user's work in progress
    (root / "README.md").write_text("# demo, edited but not staged\n")
    return root


@pytest.fixture
def ws(repo: Path) -> Iterator[sk.Workspace]:
    with sk.Workspace(repo, servers=[], state=None) as workspace:
        yield workspace


def untouched(repo: Path) -> tuple[object, ...]:
    """What commit() must leave alone: the worktree, git status, the index's bytes, HEAD."""
    git_dir = repo / ".git"
    return (_worktree(repo),
            git(repo, "status", "--porcelain=v1", "--untracked-files=all"),
            hashlib.sha256((git_dir / "index").read_bytes()).hexdigest(),
            (git_dir / "HEAD").read_text(), git(repo, "rev-parse", "HEAD"))  # fmt: skip


def test_the_mcp_tool_commits_to_agent_refs_and_asks_the_flag_for_others(
    repo: Path, ws: sk.Workspace
) -> None:
    from shadowkernel.agents.tools import Tools
    from shadowkernel.errors import ShadowError

    before, tools = untouched(repo), Tools(ws)
    tools.create_branch("feat")
    tools.replace_in_file("feat", "pkg/mod.py", "a + b", "b + a")
    made = tools.commit_branch("feat", message="Swap")
    assert made["ref"] == "refs/heads/agent/feat" and made["version"] == 1
    assert git(repo, "rev-parse", "agent/feat") == made["commit"]
    assert "return b + a" in git(repo, "show", f"{made['commit']}:pkg/mod.py")
    with pytest.raises(ShadowError, match="--allow-accept"):
        tools.commit_branch("feat", ref="refs/heads/main")
    assert git(repo, "rev-parse", "main") == git(repo, "rev-parse", "HEAD")
    assert untouched(repo) == before


def _worktree(repo: Path) -> dict[str, tuple]:
    return {k: v for k, v in snapshot(repo).items() if not k.startswith(".git")}


def test_a_branch_becomes_a_commit_on_its_own_ref(repo: Path, ws: sk.Workspace) -> None:
    before, head = untouched(repo), git(repo, "rev-parse", "HEAD")
    a = ws.branch("fix-add")
    a.replace("pkg/mod.py", "a + b", "a - b")
    a.write("pkg/new/tool.py", "print('tool')\n")
    a.replace("run.sh", "hi", "bye")
    a.delete("old.txt")
    made = a.commit(message="Subtract instead\n\nThe agent's fix.")
    assert untouched(repo) == before
    assert git(repo, "rev-parse", "refs/heads/agent/fix-add") == made
    assert git(repo, "log", "--format=%P %s", "-1", "agent/fix-add") == f"{head} Subtract instead"
    assert git(repo, "show", f"{made}:pkg/mod.py") == "def add(a, b):\n    return a - b"
    assert git(repo, "ls-tree", made, "run.sh").split()[0] == "100755"  # the user's mode
    assert git(repo, "ls-tree", made, "pkg/new/tool.py").split()[0] == "100644"
    assert git(repo, "show", f"{made}:README.md") == "# demo"  # HEAD's, not the worktree's
    names = git(repo, "show", "--name-status", "--format=", made).splitlines()
    assert sorted(names) == ["A\tpkg/new/tool.py", "D\told.txt", "M\tpkg/mod.py", "M\trun.sh"]
    assert "dirty.txt" not in git(repo, "ls-tree", "-r", "--name-only", made)

    a.write("pkg/mod.py", "X = 1\n")
    again = a.commit(ref="refs/heads/agent/second", message="second")
    assert git(repo, "log", "--format=%P", "-1", again) == head  # parent: what the base matches
    assert git(repo, "rev-parse", "refs/heads/agent/fix-add") == made
    assert untouched(repo) == before


def test_the_parent_is_the_commit_the_base_matches(repo: Path, ws: sk.Workspace) -> None:
    first = git(repo, "rev-parse", "HEAD")
    a = ws.branch("a")
    a.replace("pkg/mod.py", "a + b", "b + a")
    (repo / "pkg/mod.py").write_text("def add(a, b):\n    return a + b  # user\n")
    git(repo, "commit", "-q", "-am", "the user moved on")  # README's edit goes in too
    made = a.commit(message="agent")
    assert git(repo, "log", "--format=%P", "-1", made) == first  # where the branch forked

    (repo / "README.md").write_text("# uncommitted\n")
    b = ws.branch("b")  # its base of README.md is in no commit
    b.replace("README.md", "uncommitted", "agent")
    made = b.commit(message="on uncommitted work")
    head = git(repo, "rev-parse", "HEAD")
    assert git(repo, "log", "--format=%P", "-1", made) == head
    body = git(repo, "log", "--format=%B", "-1", made)
    assert f"the branch's base differs from {head} in README.md" in body


def test_a_workspace_below_the_repository_root(repo: Path) -> None:
    with sk.Workspace(repo / "pkg", servers=[], state=None) as ws:
        a = ws.branch("sub")
        a.replace("mod.py", "a + b", "a * b")
        made = a.commit(message="in a subfolder")
    assert git(repo, "show", f"{made}:pkg/mod.py") == "def add(a, b):\n    return a * b"
    assert git(repo, "log", "--format=%P", "-1", made) == git(repo, "rev-parse", "HEAD")


def test_bad_refs_and_folders_outside_git_are_refused_by_name(
    repo: Path, ws: sk.Workspace, tmp_path: Path
) -> None:
    before = untouched(repo)
    a = ws.branch("a")
    a.write("x.py", "x = 1\n")
    with pytest.raises(sk.ArgumentError, match="checked out"):
        a.commit(ref="refs/heads/main", message="no")
    for bad in ("main", "refs/heads/a..b", 3):
        with pytest.raises(sk.ArgumentError, match="full ref name"):
            a.commit(ref=bad, message="no")  # type: ignore[arg-type]
    with pytest.raises(sk.ArgumentError, match="message="):
        a.commit(message=b"bytes")  # type: ignore[arg-type]
    assert untouched(repo) == before
    assert git(repo, "for-each-ref", "--format=%(refname)") == "refs/heads/main"
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "f.py").write_text("f = 1\n")
    with sk.Workspace(plain, servers=[], state=None) as outside:
        b = outside.branch("b")
        b.write("f.py", "f = 2\n")
        with pytest.raises(sk.PathError, match="not in a git repository"):
            b.commit(message="nowhere")
    assert not (plain / ".git").exists()


def test_branches_whose_names_differ_commit_to_different_refs(repo: Path, ws: sk.Workspace) -> None:
    """Each branch's default ref is its own name: names that differ only in characters a
    cruder mapping would replace ("café", "cafè"; "fix+1", "fix-1") keep their own commits."""
    made = {}
    for name in ("café", "cafè", "fix+1", "fix-1"):
        branch = ws.branch(name)
        branch.write("pkg/mod.py", f"NAME = {name!r}\n")
        made[name] = branch.commit(message=name)
    for name, commit in made.items():
        assert git(repo, "rev-parse", f"refs/heads/agent/{name}") == commit
    assert len(set(made.values())) == 4


def test_a_codemod_sized_branch_commits_in_a_few_git_processes(
    repo: Path, ws: sk.Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Git's processes do not grow with the files a branch changed (a process per file cost a
    1,500-file codemod of sympy 9 s): the real git runs, behind a shim that counts them."""
    calls = tmp_path / "git-calls"
    shim = tmp_path / "bin/git"
    shim.parent.mkdir()
    real = subprocess.run(["which", "git"], capture_output=True, text=True, check=True).stdout
    shim.write_text(f'#!/bin/sh\necho "$*" >> {calls}\nexec {real.strip()} "$@"\n')
    shim.chmod(0o755)
    branch = ws.branch("codemod")
    for i in range(300):
        branch.write(f"gen/m{i}.py", f"X = {i}\n", mode=0o755 if i % 7 == 0 else None)
    branch.write("pkg/mod.py", "def add(a, b):\n    return b + a\n")
    branch.delete("old.txt")
    monkeypatch.setenv("PATH", f"{shim.parent}:{os.environ['PATH']}")

    made = branch.commit()

    assert len(calls.read_text().splitlines()) < 20
    tree = git(repo, "ls-tree", "-r", made).splitlines()
    entries = {line.split("\t")[1]: line.split()[0] for line in tree}
    assert "old.txt" not in entries and len(entries) == 300 + 3  # mod.py, README.md, run.sh
    assert entries["gen/m7.py"] == "100755" and entries["gen/m8.py"] == "100644"
    assert git(repo, "show", f"{made}:gen/m299.py") == "X = 299"
    assert git(repo, "show", f"{made}:pkg/mod.py").endswith("return b + a")


def test_a_symlink_commits_as_a_symlink(repo: Path) -> None:
    """A link of the user's folder a branch left alone, and one a run made, are git symlinks
    (mode 120000, the target as the blob), not regular files holding the target."""
    (repo / "latest").symlink_to("pkg/mod.py")
    git(repo, "add", "latest")
    git(repo, "commit", "-q", "-m", "a link")
    with sk.Workspace(repo, servers=[], state=None) as ws:
        branch = ws.branch("links")
        done = branch.run("ln -s README.md docs-link && rm latest && ln -s run.sh latest",
                          keep=True)  # fmt: skip
        assert done.ok, done.stderr
        made = branch.commit()
    entries = {line.split("\t")[1]: line.split()[0]
               for line in git(repo, "ls-tree", "-r", made).splitlines()}  # fmt: skip
    assert entries["docs-link"] == entries["latest"] == "120000"
    assert git(repo, "show", f"{made}:latest") == "run.sh"
