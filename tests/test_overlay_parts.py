"""The pieces `Tree` is made of, tested directly: attributes, the inode table, the live
layer, the merged namespace, file contents, owners and times, hard-link groups. Pure code;
only a temporary lower folder."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from shadowkernel.overlay import attributes, metadata
from shadowkernel.overlay.buffer import Buffer
from shadowkernel.overlay.content import Contents
from shadowkernel.overlay.inodes import ROOT_INO, Inodes
from shadowkernel.overlay.layer import Layer
from shadowkernel.overlay.lower import Lower
from shadowkernel.overlay.merged import Merged
from shadowkernel.overlay.store import WHITEOUT, BlobStore, Dir, File, Special, Symlink, freeze
from shadowkernel.paths import RelPath

OWNER = (1234, 5678)

# -- attributes -------------------------------------------------------------------------------


def test_override_attributes_carry_the_type_the_owner_and_one_time() -> None:
    sizes = {"lower.txt": 42}
    link = attributes.of_override(Symlink(b"target", mtime_ns=7), OWNER, sizes.get)
    assert link == attributes.Stat(stat.S_IFLNK | 0o777, 6, 7, 1, 1234, 5678, 0, 7, 7)
    folder = attributes.of_override(Dir(mode=0o700, mtime_ns=9), OWNER, sizes.get)
    assert folder is not None and (folder.mode, folder.nlink, folder.size) == (
        stat.S_IFDIR | 0o700, 2, 4096)  # fmt: skip
    borrowed = attributes.of_override(File(origin="lower.txt", mode=0o600), OWNER, sizes.get)
    assert borrowed is not None and (borrowed.mode, borrowed.size) == (stat.S_IFREG | 0o600, 42)


def test_nothing_shows_for_a_whiteout_or_a_file_whose_origin_is_gone() -> None:
    assert attributes.of_override(WHITEOUT, OWNER, {}.get) is None
    assert attributes.of_override(File(origin="gone"), OWNER, {}.get) is None


def test_lower_attributes_pass_through(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"abc")
    st = os.lstat(tmp_path / "f")
    mine = attributes.from_lstat(st)
    assert (mine.mode, mine.size, mine.mtime_ns, mine.uid, mine.nlink) == (
        st.st_mode, 3, st.st_mtime_ns, st.st_uid, 1)  # fmt: skip


# -- the inode table ----------------------------------------------------------------------------


def test_inodes_are_stable_per_path_and_follow_a_move() -> None:
    inodes = Inodes()
    a, b = inodes.ino(RelPath("d")), inodes.ino(RelPath("d/f"))
    assert inodes.ino(RelPath("d/f")) == b and a != b != ROOT_INO
    inodes.move(RelPath("d"), RelPath("e"), is_dir=True)
    assert inodes.ino_of == {"": ROOT_INO, "e": a, "e/f": b} and inodes.dir_path(b) == "e/f"


def test_exchange_trades_the_inodes_of_two_subtrees() -> None:
    inodes = Inodes()
    a, a_kid, b = (inodes.ino(RelPath(p)) for p in ("a", "a/k", "b"))
    inodes.exchange(RelPath("a"), RelPath("b"))
    assert (inodes.ino_of["b"], inodes.ino_of["b/k"], inodes.ino_of["a"]) == (a, a_kid, b)


def test_a_detached_inode_is_gone_by_path_but_counted_until_forgotten() -> None:
    inodes = Inodes()
    ino = inodes.ino(RelPath("f"))
    inodes.counted(ino)
    inodes.counted(ino)
    assert inodes.detach(RelPath("f"), is_dir=False) == [("f", ino)] and inodes.held(ino)
    with pytest.raises(OSError) as caught:
        inodes.dir_path(ino)
    assert caught.value.errno == errno.ENOENT
    inodes.orphans[ino] = WHITEOUT
    assert not inodes.forget(ino, 1) and inodes.forget(ino, 1) and ino not in inodes.orphans


def test_invalidations_name_the_parent_entries_the_kernel_knows() -> None:
    inodes = Inodes()
    pkg = inodes.ino(RelPath("pkg"))
    switched = inodes.switched([RelPath("pkg/a"), RelPath("unknown/b")])
    assert switched.entries == ((pkg, "a"),) and switched.inodes == (pkg,)
    assert switched.changed == 2
    edited = inodes.lower_changed([(RelPath("pkg"), False), (RelPath("pkg/new"), True)])
    assert edited.entries == ((pkg, "new"),) and edited.inodes == (pkg,)


# -- the live layer -----------------------------------------------------------------------------


def test_the_layer_indexes_children_and_top_components() -> None:
    layer = Layer()
    layer.set(RelPath("lib"), Dir(origin="pkg"))
    layer.set(RelPath("lib/new.py"), File())
    assert layer.children(RelPath("lib")) == {"new.py"}
    assert layer.source(RelPath("lib/sub/x.py")) == "pkg/sub/x.py"
    assert layer.source(RelPath("elsewhere/x.py")) == "elsewhere/x.py"
    layer.pop(RelPath("lib/new.py"))
    assert layer.children(RelPath("lib")) == set() and layer.below(RelPath("lib"), True) == ["lib"]


def test_activation_drops_writes_and_collect_freezes_buffers(tmp_path: Path) -> None:
    store = BlobStore(spill_dir=str(tmp_path))
    layer = Layer()
    manifest = freeze({RelPath("a"): File(blob=store.make(b"a"))})
    layer.show(manifest, layer.changed(manifest, manifest))
    assert layer.collect() == {} and layer.entries == dict(manifest)
    layer.set(RelPath("b"), File(blob=Buffer(store, b"written")))  # type: ignore[arg-type]
    layer.pop(RelPath("a"))
    collected = layer.collect()
    assert collected["a"] is None and collected["b"].blob.bytes() == b"written"  # type: ignore[union-attr]
    assert layer.changed(manifest, {}) == ["a", "b"]


# -- the merged namespace and contents --------------------------------------------------------------


@pytest.fixture
def merged(tmp_path: Path) -> Merged:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg/mod.py").write_text("x = 1\n")
    (tmp_path / "README.md").write_text("# hi\n")
    return Merged(Lower(str(tmp_path)), Layer(), OWNER)


def test_merged_shows_the_override_over_the_lower_entry(merged: Merged) -> None:
    merged.layer.set(RelPath("README.md"), WHITEOUT)
    merged.layer.set(RelPath("lib"), Dir(origin="pkg", mode=0o700))
    assert merged.stat(RelPath("README.md")) is None and merged.shows_lower(RelPath("README.md"))
    assert [name for name, _ in merged.list(RelPath(""))] == ["pkg", "lib"]
    assert [name for name, _ in merged.list(RelPath("lib"))] == ["mod.py"]
    assert merged.is_dir(RelPath("lib")) and not merged.is_empty_dir(RelPath("lib"))


def test_a_snapshot_borrows_the_lower_entry_instead_of_copying_it(merged: Merged) -> None:
    st = merged.stat(RelPath("pkg/mod.py"))
    assert st is not None
    snapshot = merged.snapshot(RelPath("pkg/mod.py"), st)
    assert isinstance(snapshot, File) and snapshot.blob is None
    assert (snapshot.origin, snapshot.mode, snapshot.mtime_ns) == (
        "pkg/mod.py", stat.S_IMODE(st.mode), st.mtime_ns)  # fmt: skip
    assert (snapshot.uid, snapshot.gid) == (st.uid, st.gid)  # not the default owner: recorded
    assert merged.snapshot_of(RelPath("missing")) is None


def test_contents_read_buffers_blobs_spills_and_lower_files(merged: Merged, tmp_path: Path) -> None:
    store = BlobStore(memory_budget=0, spill_dir=str(tmp_path / "pkg"))
    contents = Contents(merged.lower)
    spilled = store.make(b"spilled bytes")
    shown = [File(blob=spilled)]
    contents.keep_open(shown, lambda: shown)
    os.unlink(spilled.spill)  # type: ignore[arg-type]  # the kept fd still reads it
    contents.keep_open([], lambda: shown)  # a switch that still shows it keeps it
    assert contents.read(spilled, None, 8, 5) == b"bytes"
    assert contents.read(None, RelPath("README.md"), 2, 2) == b"hi"
    assert contents.whole(File(origin="pkg/mod.py")) == b"x = 1\n"
    contents.keep_open([], lambda: [])  # shown no more, its file gone: the fd goes
    with pytest.raises(FileNotFoundError):
        contents.read(spilled, None, 0, 5)


# -- owners, modes and times ---------------------------------------------------------------------


def test_a_new_entry_belongs_to_its_caller_or_to_a_setgid_directory() -> None:
    plain = attributes.Stat(stat.S_IFDIR | 0o755, 0, 0, gid=5678)
    setgid = attributes.Stat(stat.S_IFDIR | 0o2775, 0, 0, gid=42)
    assert metadata.new_owner((1, 2), plain, OWNER) == (1, 2)
    assert metadata.new_owner((1, 2), setgid, OWNER) == (1, 42)
    assert metadata.new_owner(None, plain, OWNER) == (None, None)  # the folder's: not recorded
    assert metadata.new_dir_mode(0o755, setgid) == 0o2755
    assert metadata.new_dir_mode(0o755, plain) == 0o755


def test_times_change_apart_and_every_change_sets_the_ctime() -> None:
    file = File(mode=0o644, mtime_ns=10)
    touched = metadata.changed(file, 99, OWNER, mtime_ns=20)
    assert (touched.atime_ns, touched.mtime_ns, touched.ctime_ns) == (10, 20, 99)  # atime kept
    owned = metadata.changed(touched, 100, OWNER, uid=OWNER[0], gid=7, mode=0o4755)
    assert (owned.uid, owned.gid, owned.mode, owned.ctime_ns) == (None, 7, 0o4755, 100)
    written = metadata.written(File(mtime_ns=5, atime_ns=3), 50)
    assert (written.atime_ns, written.mtime_ns, written.ctime_ns) == (3, 50, 50)
    fifo = metadata.changed(Special(stat.S_IFIFO | 0o644), 1, OWNER, mode=0o600)
    assert fifo.mode == stat.S_IFIFO | 0o600  # the type stays
    assert metadata.changed(Symlink(b"t"), 1, OWNER, mode=0o600) == Symlink(b"t", ctime_ns=1)


def test_mknod_modes_that_cannot_be_special_files_are_refused() -> None:
    assert metadata.special_mode(stat.S_IFIFO | 0o640, 0) == stat.S_IFIFO | 0o640
    for mode, rdev, code in [
        (stat.S_IFCHR, 0, errno.EPERM),
        (stat.S_IFDIR | 0o755, 0, errno.EINVAL),
    ]:
        with pytest.raises(OSError) as caught:
            metadata.special_mode(mode, rdev)
        assert caught.value.errno == code


# -- hard links in the layer and the inode table -------------------------------------------------


def test_the_names_of_one_inode_are_a_link_group(tmp_path: Path) -> None:
    layer = Layer()
    buffer = Buffer(BlobStore(spill_dir=str(tmp_path)), b"shared")
    linked = File(blob=buffer, link="g")  # type: ignore[arg-type]
    layer.set(RelPath("a"), linked)
    layer.set(RelPath("b"), linked)
    assert layer.nlink(linked) == 2 and layer.same_inode(RelPath("a"), RelPath("b"))
    layer.set_all(RelPath("a"), File(blob=buffer, link="g", mode=0o600))  # type: ignore[arg-type]
    assert layer.entries["b"].mode == 0o600  # type: ignore[union-attr]
    collected = layer.collect()
    assert collected["a"] is collected["b"]  # one frozen blob for both names
    layer.pop(RelPath("a"))
    assert layer.nlink(layer.entries["b"]) == 1 and layer.names(File()) == set()


def test_an_inode_with_another_name_survives_losing_one() -> None:
    inodes = Inodes()
    ino = inodes.ino(RelPath("a"))
    assert inodes.alias(RelPath("b"), ino) == ino and inodes.ino_of["b"] == ino
    assert inodes.detach(RelPath("a"), is_dir=False) == []  # still named by b: no orphan
    assert inodes.path_of[ino] == "b"
    inodes.move(RelPath("b"), RelPath("c"), is_dir=False)
    assert inodes.detach(RelPath("c"), is_dir=False) == [("c", ino)]


def test_the_layer_counts_each_directory_s_subdirectories() -> None:
    layer = Layer()
    layer.set(RelPath("a"), Dir())
    layer.set(RelPath("a/b"), Dir())
    layer.set(RelPath("a/f"), File())
    layer.set(RelPath("a/f"), Dir())  # a file replaced by a directory
    assert layer.subdirs["a"] == 2
    layer.pop(RelPath("a/b"))
    layer.set(RelPath("a/f"), WHITEOUT)
    assert layer.subdirs["a"] == 0
