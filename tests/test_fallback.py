"""Fallback ("documents") mode: the mode decision (pure), the private copy a run works in, and
a workspace without a mount serving lints, navigation and runs from real servers and processes.

Here the workspace is forced with mode="documents"; test_fallback_child.py runs this file (and
the workspace, run and kernel tests) again in a child without /dev/fuse and mount rights,
where the workspace falls back by itself.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from kernel_helpers import kernel
from overlay_helpers import FALLBACK_CHILD, snapshot

import shadowkernel as sk
from shadowkernel.errors import ArgumentError, OverlayError, RunError
from shadowkernel.overlay.store import WHITEOUT, BlobStore, Dir, File, Symlink
from shadowkernel.paths import RelPath
from shadowkernel.run import capabilities
from shadowkernel.run.capabilities import Facts, decide, mount_failed
from shadowkernel.run.copy import harvest, materialise, project_files

pytestmark = pytest.mark.timeout(240)

OK = Facts(fuse_device=None, fusermount=None, namespaces=None, overlayfs=None)
NO_DEVICE = Facts("/dev/fuse is missing", None, "unshare refused: EPERM", None)
NAMESPACES = capabilities.probe().namespaces is None  # what this machine (or child) allows
LANDLOCK = capabilities.probe().landlock  # its ABI; confines runs where bwrap cannot start
MODE = "auto" if FALLBACK_CHILD else "documents"  # the child falls back by itself


# -- the decision (pure) --------------------------------------------------------------------------


def test_the_mode_follows_the_facts_and_says_why() -> None:
    assert decide("auto", OK).name == "fuse"
    auto = decide("auto", NO_DEVICE)
    assert auto.name == "documents" and "/dev/fuse is missing" in auto.reason
    assert "runs refused unless sandbox=False" in auto.reason and "unshare refused" in auto.reason
    landlocked = decide("auto", dataclasses.replace(NO_DEVICE, landlock=6))
    assert (
        "runs in a private copy confined by Landlock (ABI 6; no sandbox: unshare"
        in landlocked.reason
    )
    asked = decide("documents", OK)
    assert asked.name == "documents" and "asked for" in asked.reason
    assert "in a private copy in the sandbox" in asked.reason
    no_fusermount = Facts(None, "fusermount3 is not installed", None, None)
    assert "fusermount3" in decide("auto", no_fusermount).reason
    failed = mount_failed(OverlayError("the overlay process failed to mount /x: EPERM\nmore"), OK)
    assert failed.name == "documents" and "failed to mount /x: EPERM" in failed.reason
    assert "more" not in failed.reason


def test_bad_or_impossible_modes_are_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(ArgumentError, match="mode='fusse'"):
        decide("fusse", OK)
    with pytest.raises(
        OverlayError, match="mode='fuse': no FUSE mount here .*/dev/fuse is missing"
    ):
        decide("fuse", NO_DEVICE)
    with pytest.raises(ArgumentError, match="mode='overlay'.*'documents'"):
        sk.Workspace(tmp_path, mode="overlay")


# -- the private copy a run works in --------------------------------------------------------------


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    files = {
        "pkg/__init__.py": "",
        "pkg/mod.py": "def add(a, b):\n    return a + b\n",
        "pkg/old.py": "OLD = 1\n",
        "README.md": "# p\n",
        ".gitignore": "build/\n*.log\n",
        "build/out.o": "obj",
        "run.log": "noise",
        "pkg/__pycache__/mod.cpython-311.pyc": "pyc",
        ".venv/pyvenv.cfg": "home = /usr/bin\n",
        ".venv/lib/site.py": "SITE = 1\n",
    }
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    (root / "tool.sh").write_text("#!/bin/sh\necho tool\n")
    (root / "tool.sh").chmod(0o755)
    (root / "link").symlink_to("README.md")
    return root


def test_the_copy_skips_ignored_files_and_links_the_venv(project: Path) -> None:
    assert sorted(project_files(str(project), ("__pycache__/",))) == [
        ".gitignore", "README.md", "link", "pkg/__init__.py", "pkg/mod.py", "pkg/old.py",
        "tool.sh",
    ]  # fmt: skip
    store = BlobStore()
    manifest = {RelPath("pkg/mod.py"): File(store.make(b"X = 2\n"), None, 0o600, 0),
                RelPath("pkg/old.py"): WHITEOUT, RelPath("new"): Dir(None)}  # fmt: skip
    copy = materialise(str(project), manifest, store, ("__pycache__/",))
    try:
        root = Path(copy.root)
        assert (root / "pkg/mod.py").read_text() == "X = 2\n"
        assert (root / "pkg/mod.py").stat().st_mode & 0o777 == 0o600
        assert not (root / "pkg/old.py").exists() and (root / "new").is_dir()
        assert not (root / "build").exists() and not (root / "run.log").exists()
        assert os.readlink(root / ".venv") == str(project / ".venv")  # linked, not copied
        assert copy.linked == (str(project / ".venv"),)
        assert (root / "tool.sh").stat().st_mode & 0o777 == 0o755
        assert os.readlink(root / "link") == "README.md"
    finally:
        shutil.rmtree(copy.root)
        store.close()


def test_what_a_run_wrote_comes_back_as_a_delta_of_overrides(project: Path) -> None:
    store = BlobStore()
    staged = RelPath("pkg/staged.py")
    manifest = {staged: File(store.make(b"S = 1\n"), None, 0o644, 0)}
    copy = materialise(str(project), manifest, store)
    root = Path(copy.root)
    try:
        (root / "pkg/mod.py").write_text("changed\n")
        (root / "README.md").unlink()  # the user's file: a whiteout
        (root / staged).unlink()  # only the manifest had it: back to the manifest's absence
        (root / "out/deep").mkdir(parents=True)
        (root / "out/deep/x.txt").write_text("x")
        (root / "tool.sh").chmod(0o700)
        (root / "pkg").chmod(0o700)  # a folder's mode: its children still show through
        (root / "link2").symlink_to("pkg")
        written = harvest(copy, str(project), manifest, store)
        assert set(written) == {"pkg/mod.py", "README.md", staged, "out", "out/deep",
                                "out/deep/x.txt", "tool.sh", "pkg", "link2"}  # fmt: skip
        assert written["README.md"] is WHITEOUT and written[staged] is None
        assert written["pkg/mod.py"].blob.bytes() == b"changed\n"  # type: ignore[union-attr]
        assert written["out"] == Dir(origin=None, mode=written["out"].mode)  # type: ignore[union-attr]
        assert written["pkg"] == Dir(origin="pkg", mode=0o700)
        assert written["tool.sh"].mode == 0o700  # type: ignore[union-attr]
        assert written["link2"] == Symlink(b"pkg")
    finally:
        shutil.rmtree(copy.root)
        store.close()


# -- a workspace without a mount ------------------------------------------------------------------


@pytest.fixture
def ws(project: Path) -> Iterator[sk.Workspace]:
    with sk.Workspace(project, servers=["ruff"], mode=MODE) as workspace:
        yield workspace


def test_lints_and_navigation_come_from_the_staged_documents(project: Path) -> None:
    with sk.Workspace(project, servers=["ruff", "pyright"], mode=MODE) as ws:
        staged_documents_answer(ws, project)


def staged_documents_answer(ws: sk.Workspace, project: Path) -> None:
    before = snapshot(project)
    assert ws.mode == "documents" and ws.mode_reason
    if FALLBACK_CHILD == "nocap":  # the probes allowed a mount; mounting it failed
        assert ws.mode_reason.startswith("the FUSE mount failed (the overlay process failed")
    elif FALLBACK_CHILD:
        assert ws.mode_reason.startswith("no FUSE mount (/dev/fuse is missing)")
    assert ws.shadows[0].mountpoint == ws.root and "documents" in repr(ws)
    a = ws.branch("a")
    a.write("pkg/mod.py", "import os\n\n\ndef add(a, b):\n    return a + c\n")
    a.write("pkg/use.py", "from pkg.mod import add\n\nprint(add(1, 2))\n")
    table = a.lint()
    found = {(row.path, row.code, row.source.lower(), row.new) for row in table.itertuples()}
    assert found == {("pkg/mod.py", "F401", "ruff", True), ("pkg/mod.py", "F821", "ruff", True),
                     ("pkg/mod.py", "reportUndefinedVariable", "pyright", True)}  # fmt: skip
    # pkg/use.py has no lint: the new module's import resolves
    [location] = a.definition("pkg/use.py", 1, 21)
    assert (location.path, location.line) == ("pkg/mod.py", 4)
    b = ws.branch("b")  # interleaved: b sees the user's files, not a's documents
    assert b.lint(["pkg/mod.py"]).empty
    assert snapshot(project) == before  # no cache, no file of the servers' in the folder


def test_a_deleted_staged_file_is_closed_in_the_servers(ws: sk.Workspace) -> None:
    a = ws.branch("del")
    a.write("pkg/gone.py", "import os\n")
    assert "F401" in set(a.lint()["code"])
    a.delete("pkg/gone.py")
    a.lint(["pkg/mod.py"])
    ruff = ws.statistics()["servers"][0]["ruff"]
    assert ruff.open_documents == 1  # pkg/mod.py, read for the lint; pkg/gone.py was closed


def test_servers_write_their_caches_privately(ws: sk.Workspace) -> None:
    ws.branch("c").lint(["pkg/mod.py"], servers=["ruff"])  # the one whose environment is read
    shadow = ws.shadows[0]
    pid = ws.statistics()["servers"][0]["ruff"].pid
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    assert f"RUFF_CACHE_DIR={shadow.cache_dir}/ruff".encode() in environ  # type: ignore[union-attr]
    assert f"MYPY_CACHE_DIR={shadow.cache_dir}/mypy".encode() in environ  # type: ignore[union-attr]


def test_runs_work_in_a_private_copy_and_keep_their_writes(ws: sk.Workspace, project: Path) -> None:
    before = snapshot(project)
    a = ws.branch("run")
    a.write("pkg/mod.py", "def add(a, b):\n    return a - b\n")
    script = ("python3 -c 'import pkg.mod as m; print(m.add(5, 3))' && echo built > out.txt && "
              "rm pkg/old.py && cat .venv/lib/site.py && test ! -e run.log && pwd")  # fmt: skip
    result = a.run(script, network=True)
    assert result.ok, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:2] == ["2", "SITE = 1"]
    # In the sandbox the copy is shown at the folder's own path; without one, at its own.
    assert (lines[2] == str(project)) == NAMESPACES == result.path_transparent
    assert result.mode == "copy"
    assert any("private copy" in note for note in result.notes)
    assert {p for p in result.written if "__pycache__" not in p} == {"out.txt", "pkg/old.py"}
    assert result.written["pkg/old.py"] is WHITEOUT
    later = a.run("cat out.txt; test -e pkg/old.py || echo old-gone", network=True)
    assert later.stdout == "built\nold-gone\n"  # the scratch layer is seen by later runs
    kept = a.run("echo 'X = 1' > pkg/x.py", network=True, keep=True)
    assert a.files["pkg/x.py"] == b"X = 1\n" and "kept as version" in kept.notes[-1]
    assert snapshot(project) == before


@pytest.mark.skipif(not NAMESPACES, reason="needs the sandbox (bwrap, user namespaces)")
def test_in_the_sandbox_runs_are_offline_and_leave_the_venv_alone(
    ws: sk.Workspace, project: Path
) -> None:
    before = snapshot(project)
    # The machine is read-only to the run (or, for root's runs under /tmp, a throwaway layer).
    result = ws.branch("ns").run("touch .venv/new; tail -n +3 /proc/net/dev | cut -d: -f1")
    assert result.stdout.split() == ["lo"], result.stderr  # only loopback
    assert snapshot(project) == before


@pytest.mark.skipif(NAMESPACES, reason="this machine has the sandbox")
def test_without_namespaces_runs_are_confined_by_landlock_or_refused(
    ws: sk.Workspace, project: Path
) -> None:
    a = ws.branch("no-ns")
    if not LANDLOCK:
        with pytest.raises(RunError, match="pass sandbox=False"):
            a.run("true", network=True)  # the network is not a way around confinement
        result = a.run("true", sandbox=False)
        assert any(".venv reached at the real path, writable" in n for n in result.notes)
        return
    before = snapshot(project)
    script = ("touch .venv/new || echo venv-refused; touch ~/sk-new || echo home-refused; "
              "echo t > $TMPDIR/t && cat $TMPDIR/t; echo made > made.txt")  # fmt: skip
    result = a.run(script)  # offline, by default
    assert result.ok and result.stdout.split() == ["venv-refused", "home-refused", "t"], result
    assert list(result.written) == ["made.txt"] and not result.path_transparent
    assert any(n.startswith(f"confined by Landlock ABI {LANDLOCK}") for n in result.notes)
    assert any(".venv reached at the real path, read-only (Landlock)" in n for n in result.notes)
    assert snapshot(project) == before


def test_sandbox_takes_only_a_flag(ws: sk.Workspace) -> None:
    with pytest.raises(ArgumentError, match="sandbox='no': give True or False"):
        ws.branch("flag").run("true", sandbox="no")


def test_run_modes_that_need_a_mount_are_refused(ws: sk.Workspace) -> None:
    with pytest.raises(RunError, match="mode='overlayfs' needs a mount.*mode='auto'"):
        ws.branch("m").run("true", network=True, mode="overlayfs")


def test_the_kernel_says_which_mode_it_is_in(project: Path) -> None:
    with kernel() as k:
        out = k.ok(f"%shadow open {project} --mode documents").stdout
        assert "mode: documents (mode='documents' was asked for" in out
        assert "invalid choice" in k.usage_error(f"%shadow open {project} --mode overlay")
