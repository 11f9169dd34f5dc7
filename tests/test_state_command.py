"""`shadowkernel state [--prune]`: the folders whose branches are kept, and deleting the
branches of folders that are gone. The real command against real durable stores: workspaces
opened, branches staged, folders deleted, one workspace held open by another process."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import shadowkernel as sk
from shadowkernel.workspace import kept, statedir


def state(*options: str) -> str:
    """The command's output; it inherits this test's state home (conftest's)."""
    done = subprocess.run([sys.executable, "-m", "shadowkernel.cli", "state", *options],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def folder_with_branches(path: Path, names: list[str]) -> Path:
    path.mkdir()
    (path / "mod.py").write_text("X = 1\n")
    with sk.Workspace(path, servers=[]) as ws:
        for name in names:
            ws.branch(name).write("new.py", f"NAME = {name!r}\n")
    return path


def kept_at(folder: Path) -> Path:
    return Path(statedir.directory(os.path.realpath(folder), statedir.DEFAULT))


def line_of(output: str, folder: Path) -> str:
    [line] = [line for line in output.splitlines() if line.strip().startswith(f"{folder}  ")]
    return line


def home_files() -> set[str]:
    home = statedir.state_home()
    return {os.path.relpath(os.path.join(d, f), home) for d, _, fs in os.walk(home) for f in fs}


def test_lists_each_folder_with_its_branches_and_names_the_gone_ones(tmp_path: Path) -> None:
    keep = folder_with_branches(tmp_path / "keep", ["a", "b"])
    gone = folder_with_branches(tmp_path / "gone", ["c"])
    shutil.rmtree(gone)
    before = home_files()
    listed = state()
    assert f"state home: {statedir.state_home()}" in listed
    assert line_of(listed, keep).strip().startswith(f"{keep}  2 branches, ")
    assert f"[{kept_at(keep).name}]" in line_of(listed, keep)
    assert not line_of(listed, keep).endswith("folder gone")
    assert line_of(listed, gone).strip().startswith(f"{gone}  1 branch, ")
    assert line_of(listed, gone).endswith("folder gone")
    assert "1 of 2 belong to a folder that is gone" in listed
    assert home_files() == before  # listing wrote nothing, left no log file behind


def test_prune_deletes_only_the_branches_of_gone_folders(tmp_path: Path) -> None:
    keep = folder_with_branches(tmp_path / "keep", ["a", "b"])
    gone = folder_with_branches(tmp_path / "gone", ["c"])
    shutil.rmtree(gone)
    pruned = state("--prune")
    assert line_of(pruned, gone).endswith("pruned")
    assert "pruned 1 of 2 (their folders were gone)" in pruned
    assert not kept_at(gone).exists() and kept_at(keep).is_dir()
    with sk.Workspace(keep, servers=[]) as ws:
        assert sorted(ws.branches) == ["a", "b"]
        assert ws.branches["b"].read("new.py") == "NAME = 'b'\n"
    assert f"{gone}" not in state()


HOLD = """
import sys
import shadowkernel as sk
with sk.Workspace(sys.argv[1], servers=[]) as ws:
    ws.branch("held").write("new.py", "HELD = 1\\n")
    print("open", flush=True)
    sys.stdin.readline()
"""


def test_prune_spares_a_state_a_workspace_holds_open(tmp_path: Path) -> None:
    held = tmp_path / "held"
    held.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(held)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "open\n"
        shutil.rmtree(held)  # its folder gone while a workspace still has it open
        spared = state("--prune")
        assert f"open in process {holder.pid} (" in line_of(spared, held)
        assert line_of(spared, held).endswith(")")  # its multi-line command, on one line
        assert "pruned 0 of 1" in spared and kept_at(held).is_dir()
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        assert holder.wait(60) == 0
    assert line_of(state("--prune"), held).endswith("pruned")
    assert not kept_at(held).exists()


def test_a_directory_without_a_folder_is_listed_and_never_pruned() -> None:
    stray = Path(statedir.state_home()) / "stray"
    stray.mkdir(parents=True)
    (stray / "notes.txt").write_text("not a folder's branches\n")
    pruned = state("--prune")
    assert "(no folder recorded)  ?, 24 bytes, " in pruned and "pruned 0 of 1" in pruned
    assert (stray / "notes.txt").exists()


def test_an_empty_state_home_lists_nothing() -> None:
    assert state().splitlines() == [f"state home: {statedir.state_home()}"]


def test_an_open_workspaces_restored_links_count_once(tmp_path: Path) -> None:
    """Reopening links the store's blobs into `restored/` (read when asked): the same bytes,
    so the size `shadowkernel state` shows is the same open or closed."""
    folder = tmp_path / "proj"
    folder.mkdir()
    with sk.Workspace(folder, servers=[]) as ws:
        a = ws.branch("a")
        for k in range(3):
            a.write("big.py", f"V = {k}\n" * 2000)
    where = kept_at(folder)

    def size() -> int:
        [entry] = [k for k in kept.kept() if k.path == str(where)]
        return entry.size

    closed = size()
    with sk.Workspace(folder, servers=[]):
        assert any((where / "restored").iterdir())  # earlier versions are read through links
        journal = sum(f.stat().st_size for f in where.glob("record.sqlite-*"))  # SQLite's, open
        assert size() == closed + journal
