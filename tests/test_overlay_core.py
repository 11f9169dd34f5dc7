"""The overlay's pure core, tested directly: no mount, only a temporary folder as the lower."""

from __future__ import annotations

import errno
import gc
import os
import pickle
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from overlay_helpers import snapshot

from shadowkernel.errors import PathError
from shadowkernel.overlay import channel
from shadowkernel.overlay import store as store_module
from shadowkernel.overlay.links import confine_link
from shadowkernel.overlay.lower import Lower
from shadowkernel.overlay.store import (
    WHITEOUT,
    BlobStore,
    Dir,
    File,
    changed_paths,
    delta,
    freeze,
    lower_source,
    patched,
)
from shadowkernel.overlay.tree import ROOT_INO, Tree
from shadowkernel.paths import rel

# -- paths ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["/etc/passwd", "../x", "a/../../b", "a/\0b"])
def test_paths_outside_the_workspace_are_refused_by_name(bad: str) -> None:
    with pytest.raises(PathError, match="path"):
        rel(bad)


def test_paths_are_normalised() -> None:
    assert rel("./a//b/") == "a/b" and rel(b"caf\xc3\xa9") == "café" and rel("") == ""


# -- store ------------------------------------------------------------------------------------------


def test_lower_source_follows_renamed_and_opaque_directories() -> None:
    entries = {"new": Dir(origin="old"), "fresh": Dir(origin=None), "gone": WHITEOUT}
    assert lower_source(entries, "plain/x.py") == "plain/x.py"
    assert lower_source(entries, "new/sub/x.py") == "old/sub/x.py"
    assert lower_source(entries, "fresh/x.py") is None
    assert lower_source(entries, "gone/x.py") is None


def test_changed_paths_compares_blobs_by_identity_not_bytes() -> None:
    store = BlobStore()
    same = store.make(b"x")
    a = freeze({"f": File(blob=same), "g": File(blob=store.make(b"y"))})
    b = freeze({"f": File(blob=same), "g": File(blob=store.make(b"y")), "h": WHITEOUT})
    assert changed_paths(a, b) == ["g", "h"]


def test_blob_store_spills_above_its_budget_and_frees_on_release(tmp_path: Path) -> None:
    """The overlay process's store (`file_per_blob`): a file per spilled blob, gone with it."""
    store = BlobStore(memory_budget=100, spill_dir=str(tmp_path), file_per_blob=True)
    small, big = store.make(b"a" * 60), store.make(b"b" * 60)
    assert small.data is not None and big.spill is not None
    assert big.bytes() == b"b" * 60 and big.read(10, 5) == b"bbbbb"
    spill = big.spill
    del big, small
    gc.collect()
    assert not os.path.exists(spill) and store.in_memory == 0


def test_spilled_blobs_share_a_segment_that_goes_with_its_last_blob(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The workspace's store appends spilled blobs to a segment file: each reads its own
    bytes, whole and in parts; a full segment is sealed and goes once its last blob does;
    closing the store seals the current one."""
    monkeypatch.setattr(store_module, "SEGMENT", 150)
    store = BlobStore(memory_budget=0, spill_dir=str(tmp_path))
    a, b, c = (store.make(bytes([n]) * 60) for n in b"abc")
    assert a.spill == b.spill != c.spill  # 120 bytes fit a segment of 150; 180 do not
    assert (a.at, b.at, c.at) == (0, 60, 0)
    assert [x.bytes() for x in (a, b, c)] == [b"a" * 60, b"b" * 60, b"c" * 60]
    assert b.read(55, 100) == b"b" * 5 and b.read(60) == b""  # never the next blob's bytes
    first, second = a.spill, c.spill
    del a
    gc.collect()
    assert os.path.exists(first)  # b still lives in it
    del b
    gc.collect()
    assert not os.path.exists(first) and os.path.exists(second)
    store.close()
    del c
    gc.collect()
    assert not os.path.exists(second)


# The temporary directory and the on-disk one are the test's own folders (the child is told
# them): a tmpfs over the machine's /tmp would hide this checkout where it lies below /tmp.
SPILL_ROOT = textwrap.dedent("""
    import sys, tempfile
    from shadowkernel.overlay import store
    tempfile.tempdir, store.ON_DISK_TEMP = sys.argv[1], sys.argv[2]
    blobs = store.BlobStore()
    print(blobs.spill_dir)
    blobs.close()
""")


def spill_root_with(temp: Path, on_disk: Path, in_memory: tuple[Path, ...], **env: str) -> Path:
    """The folder that holds a new store's folder of spill folders, in a child whose mount
    namespace has a tmpfs over each of `in_memory` (private to it: the machine sees none)."""
    shell = "".join(f"mount -t tmpfs tmpfs {folder} && " for folder in in_memory)
    environment = {k: v for k, v in os.environ.items() if k != "TMPDIR"} | env
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                           f'{shell}exec "$0" -c "$1" "$2" "$3"', sys.executable, SPILL_ROOT,
                           str(temp), str(on_disk)],
                          capture_output=True, text=True, env=environment, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    parent = Path(done.stdout.strip()).parent
    assert parent.name == f"shadowkernel-spills-{os.geteuid()}", parent
    return parent.parent


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs in a mount namespace: needs root")
def test_spills_go_to_disk_where_tmp_keeps_its_files_in_memory(tmp_path: Path) -> None:
    """/tmp is a tmpfs on Debian 13, Fedora and Arch: bytes spilled past the memory budget
    would stay in memory, so they go to /var/tmp (here: `disk`); unless that is in memory
    too, or the user chose the temporary directory ($TMPDIR)."""
    temp, disk = tmp_path / "tmp", tmp_path / "var-tmp"
    temp.mkdir()
    disk.mkdir()
    assert spill_root_with(temp, disk, ()) == temp
    assert spill_root_with(temp, disk, (temp,)) == disk
    assert spill_root_with(temp, disk, (temp, disk)) == temp
    assert spill_root_with(temp, disk, (temp,), TMPDIR=str(temp)) == temp


def test_whiteout_and_blobs_keep_their_identity_across_pickling() -> None:
    store = BlobStore()
    blob = store.make(b"x")
    assert pickle.loads(pickle.dumps(WHITEOUT)) is WHITEOUT
    assert pickle.loads(pickle.dumps(blob)) == blob


# -- channel ------------------------------------------------------------------------------------------


def test_blobs_cross_the_channel_once() -> None:
    store = BlobStore()
    blob = store.make(b"content")
    manifest = {"a": File(blob=blob), "b": WHITEOUT}
    known: set[str] = set()
    first = channel.stubbed(manifest, known)
    second = channel.stubbed(manifest, known)
    assert first["a"].blob.data == b"content" and second["a"].blob.data is None
    cache: dict = {}
    assert channel.resolved(first, cache)["a"].blob.data == b"content"
    assert channel.resolved(second, cache)["a"].blob.data == b"content"
    with pytest.raises(KeyError):
        channel.resolved(second, {})


def test_eviction_keeps_the_blobs_in_use() -> None:
    store = BlobStore()
    used, old = store.make(b"u" * 10), store.make(b"o" * 10)
    cache = {used.id: used, old.id: old}
    assert channel.evict(cache, {"a": File(blob=used)}, budget=10) == [old.id]
    assert list(cache) == [used.id]


# -- symlinks -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "directory", "expected"),
    [
        (b"/src/a.txt", "", b"/mnt/a.txt"),
        (b"/src", "d", b"/mnt"),
        (b"/etc/hostname", "", b"/etc/hostname"),
        (b"../a.txt", "d", b"../a.txt"),
        (b"./x", "", b"./x"),
        (b"../src/a.txt", "", b"a.txt"),
        (b"../../other/f", "d", b"/other/f"),
        (b"/srcfoo/x", "", b"/srcfoo/x"),
    ],
)
def test_links_into_the_user_folder_point_into_the_shadow(
    target: bytes, directory: str, expected: bytes
) -> None:
    assert confine_link(target, directory, "/src", "/mnt") == expected


# -- the live tree over a real lower folder ---------------------------------------------------------


@pytest.fixture
def tree(project: Path) -> Tree:
    return Tree(Lower(str(project)), BlobStore(), alias="/mnt")


def ino_of(tree: Tree, path: str) -> int:
    ino = ROOT_INO
    for part in path.split("/"):
        ino, _ = tree.lookup(ino, part)
    return ino


def read(tree: Tree, path: str) -> bytes:
    return tree.read(ino_of(tree, path), 0, 1 << 20)


def names(tree: Tree, path: str) -> list[str]:
    return sorted(
        name for _, name, _, _ in tree.readdir(ino_of(tree, path) if path else ROOT_INO, 0)
    )


def test_renaming_a_directory_records_it_without_copying(tree: Tree, project: Path) -> None:
    before = snapshot(project)
    tree.rename(ROOT_INO, "pkg", ROOT_INO, "lib", 0)
    assert tree.entries["lib"] == Dir(
        origin="pkg", mode=0o755, mtime_ns=tree.entries["lib"].mtime_ns
    )
    assert tree.entries["pkg"] is WHITEOUT and len(tree.entries) == 2
    assert read(tree, "lib/sub/deep.py") == b"X = 1\n" * 50
    assert "pkg" not in names(tree, "") and "lib" in names(tree, "")
    assert snapshot(project) == before


def test_writes_copy_up_and_collect_reports_them(tree: Tree) -> None:
    ino = ino_of(tree, "pkg/mod.py")
    tree.write(ino, 0, b"DEF")
    assert read(tree, "pkg/mod.py").startswith(b"DEF add")
    tree.unlink(ino_of(tree, "docs"), "guide.txt")
    delta = tree.collect()
    assert delta["pkg/mod.py"].blob.bytes().startswith(b"DEF add")
    assert delta["docs/guide.txt"] is WHITEOUT


def test_an_unlinked_open_file_keeps_its_content(tree: Tree) -> None:
    ino = ino_of(tree, "README.md")  # the kernel's lookup reference stands for the open file
    tree.unlink(ROOT_INO, "README.md")
    assert tree.read(ino, 0, 100) == b"# demo\n"
    tree.write(ino, 0, b"!")
    assert tree.getattr(ino).size == 7
    tree.forget(ino, 1)
    assert ino not in tree.orphans
    with pytest.raises(OSError) as caught:
        tree.lookup(ROOT_INO, "README.md")
    assert caught.value.errno == errno.ENOENT


def test_activation_invalidates_exactly_the_known_changed_entries(tree: Tree) -> None:
    store = tree.store
    ino_of(tree, "pkg/mod.py")
    invalidation = tree.activate({"pkg/mod.py": File(blob=store.make(b"a")), "x": Dir()})
    pkg = tree.ino_of["pkg"]
    assert invalidation.changed == 2
    assert invalidation.entries == ((pkg, "mod.py"), (ROOT_INO, "x"))
    assert read(tree, "pkg/mod.py") == b"a"


def test_a_delta_turns_one_manifest_into_the_other() -> None:
    store = BlobStore()
    shared = {f"gen/{i}.py": File(blob=store.make(b"%d" % i)) for i in range(100)}
    a = freeze({**shared, "a.py": File(blob=store.make(b"a")), "gone": Dir()})
    b = freeze({**shared, "a.py": File(blob=store.make(b"b")), "new": WHITEOUT})
    changes = delta(a, b)
    assert set(changes) == {"a.py", "gone", "new"} and changes["gone"] is None
    assert patched(a, changes) == b and delta(a, a) == {}
    assert delta(a, freeze(dict(a))) == {}  # equal copies are not changes


def test_activation_works_on_the_delta_and_still_drops_what_programs_wrote(tree: Tree) -> None:
    store = tree.store
    shared = {"gen": Dir(), **{f"gen/{i}.py": File(blob=store.make(b"%d" % i)) for i in range(999)}}
    tree.activate(shared)
    tree.write(ino_of(tree, "README.md"), 0, b"!")  # a program writes, then a switch comes
    invalidation = tree.activate({"gen/1.py": File(blob=store.make(b"new"))})
    assert invalidation.changed == 2  # the delta's path and the written one, not 1000
    assert tree.entries == {**shared, "gen/1.py": tree.entries["gen/1.py"]}
    assert read(tree, "README.md") == b"# demo\n" and read(tree, "gen/1.py") == b"new"
    assert tree.collect() == {}
    tree.activate({"gen/2.py": None})
    assert "gen/2.py" not in tree.entries and len(tree.base) == 999


def test_rmdir_of_a_non_empty_directory_fails_and_removes_nothing(tree: Tree) -> None:
    with pytest.raises(OSError) as caught:
        tree.rmdir(ROOT_INO, "pkg")
    assert caught.value.errno == errno.ENOTEMPTY and tree.entries == {}


def test_chmod_of_a_lower_file_is_a_metadata_override(tree: Tree) -> None:
    ino = ino_of(tree, "run.sh")
    st = tree.setattr(ino, size=None, mode=stat.S_IFREG | 0o700, mtime_ns=None)
    assert stat.S_IMODE(st.mode) == 0o700
    override = tree.entries["run.sh"]
    assert override.blob is None and override.origin == "run.sh"
    assert read(tree, "run.sh") == b"#!/bin/sh\necho hi\n"


def test_a_link_to_a_lower_file_records_it_once_and_shares_its_writes(tree: Tree) -> None:
    readme = ino_of(tree, "README.md")
    ino, st = tree.link(readme, ROOT_INO, "hard")
    assert ino == readme and st.nlink == 2
    linked = tree.entries["hard"]
    assert linked is tree.entries["README.md"]  # one override for both names
    assert linked.blob is None and linked.origin == "README.md"  # no bytes copied yet
    tree.write(ino, 0, b"!")
    assert read(tree, "hard") == read(tree, "README.md") == b"! demo\n"
    tree.unlink(ROOT_INO, "README.md")
    assert tree.getattr(ino).nlink == 1 and read(tree, "hard") == b"! demo\n"
    collected = tree.collect()
    assert collected["README.md"] is WHITEOUT and collected["hard"].blob.bytes() == b"! demo\n"


def test_special_files_and_owners_are_overrides(tree: Tree) -> None:
    ino, st = tree.mknod(ROOT_INO, "fifo", stat.S_IFIFO | 0o640, 0, caller=(65534, 65534))
    assert stat.S_ISFIFO(st.mode) and (st.uid, st.gid) == (65534, 65534)
    st = tree.setattr(ino_of(tree, "run.sh"), uid=12, gid=34)
    assert (st.uid, st.gid) == (12, 34) and tree.entries["run.sh"].origin == "run.sh"
    with pytest.raises(OSError) as caught:
        tree.mknod(ROOT_INO, "whiteout", stat.S_IFCHR, 0)
    assert caught.value.errno == errno.EPERM


def test_a_segment_blob_handed_back_after_it_went_is_read_never_owned(tmp_path: Path) -> None:
    """The overlay may hand back (pickled) a blob of ours this process no longer holds: the
    store refers to its bytes at its offset and does not take the segment file over (owning
    it would delete it under the blobs still in it)."""
    store = BlobStore(memory_budget=0, spill_dir=str(tmp_path))
    first, second = store.make(b"a" * 60), store.make(b"b" * 60)
    handed = pickle.dumps(second)  # what the overlay holds
    del second
    gc.collect()
    back = store.take(pickle.loads(handed))
    assert back.at == 60 and back.bytes() == b"b" * 60
    del back
    gc.collect()
    assert first.bytes() == b"a" * 60  # the segment is still there for the blob in it


def test_a_spill_that_cannot_be_written_fails_and_pins_nothing(tmp_path: Path) -> None:
    """A write into the segment that fails (here a real EFBIG: the file size limit, as a full
    disk would fail it) raises, leaves the blobs before it readable, and does not keep the
    segment file once they are gone. In a child process: the limit is per process."""
    child = textwrap.dedent(f"""\
        import gc, os, resource, signal
        from shadowkernel.overlay.store import BlobStore
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a signal
        store = BlobStore(memory_budget=0, spill_dir={str(tmp_path)!r})
        first = store.make(b"a" * 60)
        resource.setrlimit(resource.RLIMIT_FSIZE, (100, 100))
        try:
            store.make(b"b" * 60)
        except OSError as error:
            print("refused:", error.strerror)
        assert first.bytes() == b"a" * 60
        path = first.spill
        store.close()
        del first
        gc.collect()
        print("left:", os.path.exists(path))
    """)
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["refused: File too large", "left: False"]
