"""Modes, symlinks and binary files round-trip: staging, runs with keep=True, diff (compared
with git's own), apply_patch, accept (checked with os.stat), MCP read_file; and the scratch
layer is listed. Real shadows, real runs, a real git repository."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp_helpers import over_stdio
from overlay_helpers import needs_fuse

import shadowkernel as sk

pytestmark = [needs_fuse, pytest.mark.timeout(240)]

MOD = "def add(a, b):\n    return a + b\n"
BLOB = bytes(range(256)) * 4 + b"\0tail"  # every byte value, NULs, invalid UTF-8


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd,
                          capture_output=True, check=True, text=True)  # fmt: skip
    return done.stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg/mod.py").write_text(MOD)
    (root / "tool.sh").write_text("#!/bin/sh\necho tool\n")
    (root / "data.bin").write_bytes(b"\x89PNG\0old")
    if shutil.which("git"):
        git(root, "init", "-q")
        git(root, "add", ".")
        git(root, "commit", "-qm", "first")
    return root


@pytest.fixture
def ws(repo: Path) -> Iterator[sk.Workspace]:
    with sk.Workspace(repo, servers=[]) as workspace:
        yield workspace


def mode_of(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_a_run_made_executable_stays_executable_after_accept(ws: sk.Workspace, repo: Path) -> None:
    a = ws.branch("a")
    result = a.run("chmod +x tool.sh && printf '#!/bin/sh\\necho new\\n' > new.sh"
                   " && chmod 755 new.sh && ln -s pkg/mod.py link.py", keep=True)  # fmt: skip
    assert result.ok, result.stderr
    assert a.mode("tool.sh") == 0o755 and a.mode("new.sh") == 0o755
    diff = a.diff()
    assert "diff --git a/tool.sh b/tool.sh\nold mode 100644\nnew mode 100755\n" in diff
    assert "diff --git a/new.sh b/new.sh\nnew file mode 100755\n" in diff
    assert "new file mode 120000" in diff and "+pkg/mod.py\n\\ No newline" in diff
    assert a.run("test -x tool.sh && ./new.sh && cat link.py").stdout == "new\n" + MOD
    a.accept()
    assert mode_of(repo / "tool.sh") == 0o755 and mode_of(repo / "new.sh") == 0o755
    assert os.readlink(repo / "link.py") == "pkg/mod.py"
    if shutil.which("git"):  # git sees the same change of mode that diff() showed
        assert "old mode 100644\nnew mode 100755" in git(repo, "diff", "tool.sh")


def test_write_and_patch_set_modes(ws: sk.Workspace, repo: Path) -> None:
    a = ws.branch("a")
    a.write("run.py", "print('hi')\n", mode=0o755)
    a.apply_patch("diff --git a/tool.sh b/tool.sh\nold mode 100644\nnew mode 100755\n")
    a.apply_patch("diff --git a/pkg/mod.py b/pkg/mod.py\nold mode 100644\nnew mode 100755\n"
                  "--- a/pkg/mod.py\n+++ b/pkg/mod.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n"
                  "-    return a + b\n+    return b + a\n")  # fmt: skip
    assert (a.mode("run.py"), a.mode("tool.sh"), a.mode("pkg/mod.py")) == (0o755,) * 3
    # the branch's own diff applies to a fresh branch and gives the same modes and text
    b = ws.branch("b")
    b.apply_patch(a.diff())
    assert {p: (b.read_bytes(p), b.mode(p)) for p in a.files} == {
        p: (a.read_bytes(p), a.mode(p)) for p in a.files}  # fmt: skip
    a.write("run.py", "print('again')\n")  # a later write keeps the mode
    assert a.mode("run.py") == 0o755
    with pytest.raises(sk.ArgumentError, match="mode="):
        a.write("x.py", "", mode=0o4755)
    a.accept()
    assert [mode_of(repo / p) for p in ("run.py", "tool.sh", "pkg/mod.py")] == [0o755] * 3
    assert (repo / "pkg/mod.py").read_text() == MOD.replace("a + b", "b + a")


def test_binary_files_are_byte_exact_through_every_path(ws: sk.Workspace, repo: Path) -> None:
    a = ws.branch("a")
    a.write_bytes("img/blob.bin", BLOB)
    assert a.read_bytes("img/blob.bin") == BLOB
    with pytest.raises(sk.ArgumentError, match="data='text': give bytes"):
        a.write_bytes("img/x.bin", "text")  # type: ignore[arg-type]
    with pytest.raises(sk.NotFound, match="missing.bin"):
        a.read_bytes("missing.bin")
    with pytest.raises(sk.StagingError, match="binary file .*1029 bytes.*read_bytes"):
        a.read("img/blob.bin")
    assert "Binary files /dev/null and b/img/blob.bin differ (absent -> 1029 bytes)" in a.diff()
    digest = hashlib.sha256(BLOB).hexdigest()
    assert a.run("sha256sum img/blob.bin").stdout.split()[0] == digest  # runs see the bytes
    made = bytes(reversed(BLOB))
    kept = a.run(f"python3 -c \"import sys; open('data.bin','wb').write(bytes.fromhex('{made.hex()}'))\"",
                 keep=True)  # fmt: skip
    assert kept.ok, kept.stderr
    assert a.read_bytes("data.bin") == made
    assert "Binary files a/data.bin and b/data.bin differ (8 bytes -> 1029 bytes)" in a.diff()
    with pytest.raises(sk.StagingError, match="binary patch"):
        a.apply_patch("diff --git a/x b/x\nBinary files a/x and b/x differ\n")
    a.accept()
    assert (repo / "img/blob.bin").read_bytes() == BLOB and (repo / "data.bin").read_bytes() == made
    assert not [n for n in os.listdir(repo / "img") if n.endswith(".sk")]  # no temp files left


def test_mcp_read_file_says_a_file_is_binary(repo: Path) -> None:
    async def session() -> None:
        async with over_stdio(repo, "--servers", "ruff") as agent:
            await agent.call("create_branch", name="a")
            message = await agent.error("read_file", branch="a", path="data.bin")
            assert "binary file (8 bytes)" in message
            text = await agent.call("read_file", branch="a", path="pkg/mod.py")
            assert text["content"] == MOD

    anyio.run(session)


def test_scratch_lists_what_runs_wrote_without_keep(ws: sk.Workspace) -> None:
    a = ws.branch("a")
    assert a.scratch() == [] and "# scratch" not in a.diff(scratch=True)
    result = a.run("mkdir -p build && printf '\\0\\1\\2' > build/out.bin && rm data.bin"
                   " && echo x > note.txt && chmod 700 note.txt")  # fmt: skip
    assert result.ok, result.stderr
    listed = {e.path: (e.kind, e.size) for e in a.scratch()}
    assert listed["build/out.bin"] == ("file", 3) and listed["data.bin"] == ("deleted", None)
    assert listed["note.txt"] == ("file", 2) and listed["build"][0] == "dir"
    section = a.diff(scratch=True)
    assert "#   file build/out.bin 3 bytes" in section and "#   deleted data.bin" in section
    assert "# scratch" not in a.diff()  # diff() alone is what accept writes
    a.write("note.txt", "staged\n")  # staging a path takes it out of the scratch layer
    assert "note.txt" not in {e.path for e in a.scratch()}


def test_a_run_replacing_a_user_symlink_by_a_file(ws: sk.Workspace, repo: Path) -> None:
    (repo / "latest").symlink_to("pkg/mod.py")
    a = ws.branch("a")
    assert a.run("rm latest && echo plain > latest", keep=True).ok
    assert a.mode("latest") == 0o644 and a.bases["latest"] == b"pkg/mod.py"
    assert "old mode 120000\nnew mode 100644\n" in a.diff()
    a.accept()
    assert not (repo / "latest").is_symlink() and (repo / "latest").read_text() == "plain\n"
    assert (repo / "pkg/mod.py").read_text() == MOD  # written in place of the link, not through
