"""A spilled blob's file has one owner: a run through the mount that renames a staged file
hands the kernel's own blob back, and what the kernel keeps of the run must share that blob,
not take the file over (else it deleted the file under the version that still reads it)."""

from __future__ import annotations

import contextlib
import gc
import os
from pathlib import Path

import pytest
from overlay_helpers import needs_fuse

import shadowkernel as sk
from shadowkernel.overlay import store as store_module

pytestmark = [needs_fuse, pytest.mark.timeout(120)]

TEXT = "V = 1\n" * 1000


@pytest.mark.parametrize("state", ["memory", "durable"])
def test_a_renamed_spilled_file_stays_readable_in_its_version(tmp_path: Path, state: str) -> None:
    project = tmp_path / "project"
    (project / "pkg").mkdir(parents=True)
    (project / "pkg/mod.py").write_text("V = 0\n")
    where = None if state == "memory" else tmp_path / "state"
    with sk.Workspace(project, servers=[], mode="fuse", memory_budget=0, state=where) as ws:
        a = ws.branch("a")
        a.write("pkg/mod.py", TEXT)
        blob = a.versions[-1].manifest["pkg/mod.py"].blob  # type: ignore[union-attr]
        assert blob.spill is not None  # a budget of 0 spills every blob
        done = a.run("mv pkg/mod.py pkg/moved.py", mode="fuse")
        assert done.ok, done.stderr
        del done  # its files hold what the kernel took from the run
        a.drop()  # what the kernel kept of the run (the scratch layer) goes
        gc.collect()
        assert os.path.exists(blob.spill), "the version's file went with the run's copy"
        b = ws.branch("b")
        b.write("pkg/mod.py", TEXT)  # the same content again: the same or a new blob, readable
        assert b.run("cat pkg/mod.py", mode="fuse").stdout == TEXT


def test_blobs_spilled_into_one_segment_read_through_the_mount(tmp_path: Path) -> None:
    """Past the budget, versions are appended to one spill file at their own offsets: the
    mount shows each branch its own bytes (the overlay reads each blob's part of the file,
    never the next one's), as do the versions read back in this process."""
    project = tmp_path / "project"
    (project / "pkg").mkdir(parents=True)
    (project / "pkg/mod.py").write_text("V = 0\n")
    with sk.Workspace(project, servers=[], mode="fuse", memory_budget=0, state=None) as ws:
        texts = {f"b{k}": f"V = {k}\n" * (100 + k) for k in range(4)}
        branches = {name: ws.branch(name) for name in texts}
        for name, text in texts.items():
            branches[name].write("pkg/mod.py", text)
        blobs = [b.versions[-1].manifest["pkg/mod.py"].blob for b in branches.values()]  # type: ignore[union-attr]
        assert len({b.spill for b in blobs}) == 1 and len({b.at for b in blobs}) == 4
        for name, text in texts.items():
            assert branches[name].run("cat pkg/mod.py", mode="fuse").stdout == text
            assert branches[name].read("pkg/mod.py") == text


def held(pid: int, path: str) -> bool:
    """Whether process `pid` holds an fd on the file that was at `path` (gone or not)."""
    links = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):  # closed meanwhile
            links.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
    return path in links or f"{path} (deleted)" in links


def test_the_mount_lets_go_of_a_dropped_branchs_spill_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A spill file whose blobs all went leaves the disk: the overlay, which read it while
    its branch was shown, closes its fd at the next switch (it held it until the workspace
    closed, so the space a dropped branch took stayed taken: up to 64 MiB per segment)."""
    monkeypatch.setattr(store_module, "SEGMENT", 1)  # a segment per blob: each goes alone
    project = tmp_path / "project"
    (project / "pkg").mkdir(parents=True)
    (project / "pkg/mod.py").write_text("V = 0\n")
    with sk.Workspace(project, servers=[], mode="fuse", memory_budget=0, state=None) as ws:
        a, b = ws.branch("a"), ws.branch("b")
        a.write("pkg/mod.py", TEXT)
        spill = a.versions[-1].manifest["pkg/mod.py"].blob.spill  # type: ignore[union-attr]
        assert spill is not None
        assert a.run("cat pkg/mod.py", mode="fuse").stdout == TEXT
        overlay = ws.shadows[0].pid
        assert overlay is not None and held(overlay, spill)
        b.write("pkg/mod.py", TEXT + "W = 2\n")  # the next segment: a's is sealed
        a.drop()
        del a  # a dropped branch's object still holds its versions
        assert b.run("cat pkg/mod.py", mode="fuse").stdout == TEXT + "W = 2\n"
        gc.collect()  # a's version went with the switch away from it, and its blob ...
        assert not os.path.exists(spill)  # ... so this process removed the file
        c = ws.branch("c")  # the switch after that lets go of it in the overlay too
        assert c.run("cat pkg/mod.py", mode="fuse").stdout == "V = 0\n"
        assert not held(overlay, spill), "the overlay kept the dropped branch's spill file"
        assert b.run("cat pkg/mod.py", mode="fuse").stdout == TEXT + "W = 2\n"
