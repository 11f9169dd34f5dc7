"""What a restore holds: versions before the head are read from the durable store's own files
when asked (no copy in memory, no spill file), yet every blob is still checked when the folder
opens: a damaged one at or below the flusher's watermark is refused, one past it ends its
branch at the last whole version."""

from __future__ import annotations

import gc
import hashlib
import os
from pathlib import Path

import pytest
from overlay_helpers import needs_fuse

import shadowkernel as sk
from shadowkernel.workspace import durable

pytestmark = pytest.mark.timeout(120)

PATH = "pkg/mod.py"
TEXTS = [f"V = {k}\n" * 1000 for k in range(5)]  # below DELTA_MIN: each version a blob


def open_ws(project: Path, state: Path, **options: object) -> sk.Workspace:
    return sk.Workspace(project, servers=[], mode="documents", state=state, **options)  # type: ignore[arg-type]


def stage_history(project: Path, state: Path) -> None:
    with open_ws(project, state) as ws:
        a = ws.branch("a")
        for text in TEXTS:
            a.write(PATH, text)


def blob_of(state: Path, text: str) -> Path:
    return state / "blobs" / hashlib.sha256(text.encode()).hexdigest()


def test_a_restore_reads_earlier_versions_from_the_store_not_memory_or_spill_files(
    project: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    stage_history(project, state)
    with open_ws(project, state, memory_budget=0) as ws:  # before: every version spilled
        versions = ws.branches["a"].versions
        assert [v.files[PATH] for v in versions[1:]] == [t.encode() for t in TEXTS]
        blobs = [v.manifest[PATH].blob for v in versions[1:]]  # type: ignore[union-attr]
        assert all(os.path.samefile(b.spill, blob_of(state, t))
                   for b, t in zip(blobs, TEXTS, strict=True))  # fmt: skip
        assert not [n for n in os.listdir(ws.store.spill_dir) if n.startswith("blob-")]
        assert [v.files.held(PATH) is not None for v in versions[1:]] == [False] * 4 + [True]
        ws.branches["a"].write(PATH, "V = 5\n")  # the head goes on; the old one leaves memory
        assert versions[5].files.held(PATH) is None
        assert versions[5].files[PATH] == TEXTS[4].encode()
    assert not (state / "restored").exists()  # the links it read go, as spill files do
    with open_ws(project, state) as ws:
        assert [v.files.get(PATH) for v in ws.branches["a"].versions] == [
            None, *(t.encode() for t in TEXTS), b"V = 5\n"]  # fmt: skip


@pytest.mark.parametrize("damage", ["missing", "torn"])
def test_a_damaged_blob_of_an_earlier_version_is_still_refused(
    project: Path, tmp_path: Path, damage: str
) -> None:
    """Reading earlier versions lazily does not mean unchecked: the store is refused at open,
    not when someone reads version 2 later."""
    state = tmp_path / "state"
    stage_history(project, state)  # closing flushed: every record is below the watermark
    blob = blob_of(state, TEXTS[1])
    if damage == "missing":
        blob.unlink()
    else:
        blob.write_bytes(TEXTS[1].encode()[:-7])  # a torn write
    with pytest.raises(sk.PathError, match="cannot restore its branches"):
        open_ws(project, state)


@pytest.mark.parametrize("damage", ["missing", "torn"])
def test_a_damaged_blob_past_the_watermark_ends_its_branch_before_it(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    state = tmp_path / "state"
    with open_ws(project, state) as ws:
        ws.branch("a").write(PATH, TEXTS[0])
    monkeypatch.setattr(durable, "SYNC", "normal")  # nothing is flushed from here on
    with open_ws(project, state) as ws:
        for text in TEXTS[1:]:
            ws.branches["a"].write(PATH, text)
    blob = blob_of(state, TEXTS[2])
    if damage == "missing":
        blob.unlink()
    else:
        blob.write_bytes(b"\0" * blob.stat().st_size)  # a power loss kept its data back
    monkeypatch.setattr(durable, "SYNC", "behind")
    with open_ws(project, state) as ws:
        a = ws.branches["a"]
        assert [v.files.get(PATH) for v in a.versions] == [
            None, TEXTS[0].encode(), TEXTS[1].encode()]  # fmt: skip
    assert not blob.exists()  # the records that named it are gone, and so is it


@needs_fuse
def test_a_run_renaming_a_restored_file_leaves_the_store_whole(
    project: Path, tmp_path: Path
) -> None:
    """A run through the mount that renames or chmods a restored version's file hands its blob
    back to the kernel, which owns what comes back (its file goes with it): that must never be
    the store's own file."""
    state = tmp_path / "state"
    stage_history(project, state)
    rename_in_a_run(project, state)
    gc.collect()  # what the kernel took from the run is gone
    assert all(blob_of(state, t).exists() for t in TEXTS)
    with open_ws(project, state) as ws:
        assert [v.files.get(PATH) for v in ws.branches["a"].versions][-1] == TEXTS[4].encode()
        assert ws.branches["a"].run("cat pkg/moved.py").stdout == TEXTS[4]


def rename_in_a_run(project: Path, state: Path) -> None:
    with sk.Workspace(project, servers=[], mode="fuse", state=state) as ws:
        a = ws.branches["a"]
        done = a.run("mv pkg/mod.py pkg/moved.py && chmod +x pkg/moved.py", mode="fuse")
        assert done.ok, done.stderr
        assert a.run("cat pkg/moved.py", mode="fuse").stdout == TEXTS[4]


def test_the_links_a_killed_process_left_go_at_the_next_open(project: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    stage_history(project, state)
    left = state / "restored" / "left-by-a-killed-process"
    left.parent.mkdir()
    os.link(blob_of(state, TEXTS[0]), left)
    with open_ws(project, state, restore=False):
        assert not left.exists()
    assert blob_of(state, TEXTS[0]).exists()
