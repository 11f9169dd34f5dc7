"""The overlay's filesystem operations, by inode, the way the FUSE adapter needs them.

`Tree` answers every operation and raises only `OSError(errno)`. It never writes the
user's folder: all reads of it go through `Lower`, and every change lands in the live
override layer (`layer.py`). Inode numbers, hard-link names and orphans are kept by
`inodes.py`; what a path shows by `merged.py`, with attributes from `attributes.py`; owners
and times follow `metadata.py`; file bytes are read by `content.py`; symlink targets are
confined to the shadow by `links.py`. What is left here is the operations themselves.
Hard links: the names of one inode hold one override (`_put` sets it at all of them).

Files and directories are read and written by inode, never through per-open handles: with
the patched pyfuse3 the kernel stops sending open and release altogether (see fuse.py).
"""

from __future__ import annotations

import errno
import itertools
import os
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace

from ..paths import ROOT, RelPath, is_within, join, parent, rebase
from . import metadata
from .attributes import Stat
from .buffer import Buffer
from .content import Contents
from .inodes import ROOT_INO, Inodes, Invalidation, fail
from .layer import Layer
from .links import confine_link
from .lower import Lower
from .merged import Merged
from .store import (
    WHITEOUT,
    BlobStore,
    Delta,
    Dir,
    File,
    Manifest,
    Override,
    Special,
    Symlink,
    Whiteout,
    new_link,
    patched,
)

Owner = tuple[int, int]  # (uid, gid) of the process that makes an entry

__all__ = ["ROOT_INO", "Invalidation", "Stat", "Tree"]

RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2


class Tree:
    def __init__(
        self, lower: Lower, store: BlobStore, alias: str | None = None,
        watch: Callable[[RelPath], None] = lambda directory: None,
    ) -> None:  # fmt: skip
        self.lower = lower
        self.watch = watch  # told of every directory the kernel looks into
        self.alias = alias or lower.root  # where the shadow appears to programs
        self.store = store
        root = os.stat(lower.root)
        self.owner = (root.st_uid, root.st_gid)  # of every entry the shadow makes
        self.layer = Layer()
        self.inodes = Inodes()
        self.merged = Merged(lower, self.layer, self.owner)
        self.contents = Contents(lower)

    # Read-only views for tests and statistics.
    @property
    def entries(self) -> dict[RelPath, Override]:
        return self.layer.entries

    @property
    def base(self) -> Manifest:
        return self.layer.base

    @property
    def ino_of(self) -> dict[RelPath, int]:
        return self.inodes.ino_of

    @property
    def orphans(self) -> dict[int, Override]:
        return self.inodes.orphans

    # -- switching and collecting ----------------------------------------------------------

    def activate(self, changes: Delta) -> Invalidation:
        """Show the last activated manifest with `changes` applied; what programs wrote since
        the last activation is dropped. Costs O(changes + writes), whatever the manifest's size."""
        manifest = patched(self.layer.base, changes)
        changed = self.layer.changed(manifest, changes)
        invalidation = self.inodes.switched(changed)
        for path in changed:
            # Detached nodes need no invalidation: once their entries are gone only open
            # files reach them, and those keep the state they opened (see _detach).
            self._detach(path)
        self.layer.show(manifest, changed)
        self.contents.keep_open((o for o in changes.values() if o is not None),
                                self._overrides_in_use)  # fmt: skip
        return self._forget_entry_times(invalidation)

    def _overrides_in_use(self) -> Iterable[Override]:
        """What reads may still reach: the shown overrides and those of open orphans."""
        return itertools.chain(self.layer.entries.values(), self.inodes.orphans.values())

    def _forget_entry_times(self, invalidation: Invalidation) -> Invalidation:
        """Directories whose entries programs changed show their own times again; the kernel
        forgets the times it cached for them (as many as there were writes)."""
        known = self.inodes.ino_of
        touched = [known[path] for path in self.merged.entry_times if path in known]
        self.merged.entry_times.clear()
        return replace(invalidation, inodes=tuple(dict.fromkeys((*invalidation.inodes, *touched))))

    def collect(self) -> dict[RelPath, Override | None]:
        """What programs changed since activation: path -> frozen override, None = reverted."""
        return self.layer.collect()

    def lower_changed(self, changes: Iterable[tuple[RelPath, bool]]) -> Invalidation:
        """What the kernel must forget after the user changed their folder (see Inodes)."""
        return self.inodes.lower_changed(changes)

    # -- lookups and attributes ------------------------------------------------------------

    def lookup(self, parent_ino: int, name: str) -> tuple[int, Stat]:
        path = self.inodes.dir_path(parent_ino)
        self.watch(path)
        if name == "..":
            path = parent(path)
        elif name != ".":
            path = join(path, name)
        st = self.merged.stat(path)
        if st is None:
            raise fail(errno.ENOENT)
        ino = self._ino(path)
        self.inodes.counted(ino)
        return ino, st

    def counted(self, ino: int) -> None:
        """The kernel took a reference to `ino` without a lookup (a readdirplus entry)."""
        self.inodes.counted(ino)

    def forget(self, ino: int, count: int) -> None:
        self.inodes.forget(ino, count)

    def getattr(self, ino: int) -> Stat:
        path, override = self._node(ino)
        st = self.merged.of_override(override, path) if override is not None else None
        if override is None and path is not None:
            st = self.merged.stat(path)
        if st is None:
            raise fail(errno.ENOENT)
        return st if path is not None else replace(st, nlink=0)  # open, but unlinked

    def setattr(
        self, ino: int, size: int | None = None, mode: int | None = None,
        mtime_ns: int | None = None, atime_ns: int | None = None, uid: int | None = None,
        gid: int | None = None,
    ) -> Stat:  # fmt: skip
        """Change what is given (None: left as it is); the kernel checked the caller may."""
        if size is not None:
            self._writable(ino, keep=size > 0).truncate(size)
            self._touch(ino)
        if (mode, mtime_ns, atime_ns, uid, gid) != (None,) * 5:
            override = self._owned(ino)
            self._put(ino, metadata.changed(override, time.time_ns(), self.owner, mode=mode,
                                            mtime_ns=mtime_ns, atime_ns=atime_ns, uid=uid,
                                            gid=gid))  # fmt: skip
        return self.getattr(ino)

    def readlink(self, ino: int) -> bytes:
        path, override = self._node(ino)
        target = self.merged.link_target(path, override)
        return confine_link(target, parent(path or ROOT), self.lower.root, self.alias)

    def getxattr(self, ino: int, name: str) -> bytes:
        source = self.merged.lower_of(*self._node(ino))
        if source is None:
            raise fail(errno.ENODATA)
        return self.lower.getxattr(source, name)

    def listxattr(self, ino: int) -> list[str]:
        source = self.merged.lower_of(*self._node(ino))
        return [] if source is None else self.lower.listxattr(source)

    # -- directories -----------------------------------------------------------------------

    def readdir(self, ino: int, start: int) -> Iterator[tuple[int, str, int, Stat]]:
        """(next offset, name, inode, attributes) from `start`, "." and ".." first; the
        caller counts lookups (the kernel takes none for the two dots).

        A listing is taken when a read starts at offset 0 and served from there, so one
        read of a directory sees one state; it is dropped when the read passes its end."""

        def take() -> list[tuple[str, int, Stat]]:
            path = self.inodes.dir_path(ino)
            self.watch(path)
            up = parent(path) if path else ROOT  # the root's ".." is itself, as at a mount
            dots = [(".", ino, self.getattr(ino)), ("..", self._ino(up), self.merged.stat(up))]
            entries = [(n, self._ino(join(path, n)), st) for n, st in self.merged.list(path)]
            return [(n, i, st) for n, i, st in dots if st is not None] + entries

        listing = self.inodes.listing(ino, start, take)
        for offset, (name, entry_ino, st) in enumerate(listing[start:], start + 1):
            yield offset, name, entry_ino, st

    def mkdir(self, parent_ino: int, name: str, mode: int,
              caller: Owner | None = None) -> tuple[int, Stat]:  # fmt: skip
        path, directory, uid, gid = self._new_entry(parent_ino, name, caller)
        mode = metadata.new_dir_mode(mode, directory)
        self.layer.set(path, Dir(mode=mode, mtime_ns=time.time_ns(), uid=uid, gid=gid))
        self._entries_changed(parent_ino)
        return self.lookup(parent_ino, name)

    def rmdir(self, parent_ino: int, name: str) -> None:
        path, st = self._existing(parent_ino, name)
        if not stat.S_ISDIR(st.mode):
            raise fail(errno.ENOTDIR)
        if not self.merged.is_empty_dir(path):
            raise fail(errno.ENOTEMPTY)
        self._remove(path)
        self._entries_changed(parent_ino)

    # -- files -----------------------------------------------------------------------------

    def create(self, parent_ino: int, name: str, mode: int,
               caller: Owner | None = None) -> tuple[int, Stat]:  # fmt: skip
        path, _, uid, gid = self._new_entry(parent_ino, name, caller)
        content = Buffer(self.store)
        self.layer.set(path, File(content, None, stat.S_IMODE(mode), time.time_ns(), uid=uid,  # type: ignore[arg-type]
                                  gid=gid))  # fmt: skip
        self._entries_changed(parent_ino)
        return self.lookup(parent_ino, name)

    def symlink(self, parent_ino: int, name: str, target: bytes,
                caller: Owner | None = None) -> tuple[int, Stat]:  # fmt: skip
        path, _, uid, gid = self._new_entry(parent_ino, name, caller)
        self.layer.set(path, Symlink(target, time.time_ns(), uid=uid, gid=gid))
        self._entries_changed(parent_ino)
        return self.lookup(parent_ino, name)

    def mknod(self, parent_ino: int, name: str, mode: int, rdev: int,
              caller: Owner | None = None) -> tuple[int, Stat]:  # fmt: skip
        """A FIFO, a socket's node or a device node (the kernel checked CAP_MKNOD)."""
        if stat.S_ISREG(mode):
            return self.create(parent_ino, name, mode, caller)
        kind = metadata.special_mode(mode, rdev)
        path, _, uid, gid = self._new_entry(parent_ino, name, caller)
        self.layer.set(path, Special(kind, rdev, time.time_ns(), uid=uid, gid=gid))
        self._entries_changed(parent_ino)
        return self.lookup(parent_ino, name)

    def link(self, ino: int, parent_ino: int, name: str) -> tuple[int, Stat]:
        """One more name for `ino`; a lower file is recorded once for all its names."""
        source = self.inodes.path_of.get(ino)
        if source is None:
            raise fail(errno.ENOENT)  # open, but unlinked
        path, _ = self._new_path(parent_ino, name)
        if stat.S_ISDIR(self.getattr(ino).mode):
            raise fail(errno.EPERM)  # the kernel refuses first; nothing is copied up for it
        override = self._owned(ino)
        assert not isinstance(override, Dir)
        if override.link is None:
            override = replace(override, link=new_link())
        linked = metadata.relinked(override, time.time_ns())
        self.layer.set_all(source, linked)
        self.layer.set(path, linked)
        self.inodes.alias(path, ino)
        self._entries_changed(parent_ino)
        return self.lookup(parent_ino, name)

    def unlink(self, parent_ino: int, name: str) -> None:
        path, st = self._existing(parent_ino, name)
        if stat.S_ISDIR(st.mode):
            raise fail(errno.EISDIR)
        self._remove(path)
        self._entries_changed(parent_ino)

    def open(self, ino: int, truncate: bool = False) -> None:
        """Check that `ino` can be read (only without the no-open patch: the kernel asks)."""
        if truncate:
            self._writable(ino, keep=False).truncate(0)
            self._touch(ino)
        path, override = self._node(ino)
        if isinstance(override, File) and override.blob is not None:
            return
        if self.merged.content_source(path, override) is None:
            raise fail(errno.ENOENT)

    def read(self, ino: int, offset: int, size: int) -> bytes:
        path, override = self._node(ino)
        blob = override.blob if isinstance(override, File) else None
        source = self.merged.content_source(path, override) if blob is None else None
        if blob is None and source is None:
            raise fail(errno.ENOENT)
        return self.contents.read(blob, source, offset, size)

    def write(self, ino: int, offset: int, data: bytes) -> int:
        written = self._writable(ino).write(offset, data)
        self._touch(ino)
        return written

    # -- renames ---------------------------------------------------------------------------

    def rename(
        self, old_parent: int, old_name: str, new_parent: int, new_name: str, flags: int
    ) -> None:
        if self._rename(old_parent, old_name, new_parent, new_name, flags):
            for directory in {old_parent, new_parent}:
                self._entries_changed(directory)

    def _rename(
        self, old_parent: int, old_name: str, new_parent: int, new_name: str, flags: int
    ) -> bool:
        """Rename; False when nothing changed (a name renamed onto itself or its link)."""
        old, old_st = self._existing(old_parent, old_name)
        new = join(self.inodes.dir_path(new_parent), new_name)
        new_st = self.merged.stat(new)
        if flags not in (0, RENAME_NOREPLACE, RENAME_EXCHANGE):  # unknown bits, or both
            raise fail(errno.EINVAL)
        if flags & RENAME_NOREPLACE and new_st is not None:
            raise fail(errno.EEXIST)
        if flags & RENAME_EXCHANGE:
            if new_st is None:
                raise fail(errno.ENOENT)
            self._exchange(old, new)
            return True
        if old == new or self.layer.same_inode(old, new):
            return False
        if is_within(new, old):
            raise fail(errno.EINVAL)
        if new_st is not None:
            self.merged.check_replaceable(old_st, new, new_st)
        moved = self.merged.subtree(old, old_st)
        if not stat.S_ISDIR(old_st.mode):  # a renamed file's ctime changes
            moved[old] = metadata.relinked(moved[old], time.time_ns())  # type: ignore[arg-type]
        if new_st is not None:
            self._remove(new)
        self._remove(old, keep_inodes=True)
        self.inodes.move(old, new, stat.S_ISDIR(old_st.mode))
        for rel, override in moved.items():
            self.layer.set(rebase(rel, old, new), override)
        return True

    def _exchange(self, a: RelPath, b: RelPath) -> None:
        if is_within(a, b) or is_within(b, a):
            raise fail(errno.EINVAL)
        a_st, b_st = self.merged.stat(a), self.merged.stat(b)
        assert a_st is not None and b_st is not None
        tree_a, tree_b = self.merged.subtree(a, a_st), self.merged.subtree(b, b_st)
        for path in (a, b):
            for rel in self.layer.below(path, True):
                self.layer.pop(rel)
        self.inodes.exchange(a, b)
        for rel, override in tree_a.items():
            self.layer.set(rebase(rel, a, b), override)
        for rel, override in tree_b.items():
            self.layer.set(rebase(rel, b, a), override)

    # -- statistics ------------------------------------------------------------------------

    def statistics(self) -> dict[str, int]:
        return {
            "overrides": len(self.layer.entries),
            "inodes": len(self.inodes.ino_of),
            "orphans": len(self.inodes.orphans),
            "memory_bytes": self.store.in_memory,
        }

    # -- internals -------------------------------------------------------------------------

    def _node(self, ino: int) -> tuple[RelPath | None, Override | None]:
        path = self.inodes.path_of.get(ino)
        if path is not None:
            return path, self.layer.get(path)
        override = self.inodes.orphans.get(ino)
        if override is None:
            raise fail(errno.ENOENT)
        return None, override

    def _existing(self, parent_ino: int, name: str) -> tuple[RelPath, Stat]:
        """The path of an entry that must exist, and its attributes."""
        path = join(self.inodes.dir_path(parent_ino), name)
        st = self.merged.stat(path)
        if st is None:
            raise fail(errno.ENOENT)
        return path, st

    def _new_path(self, parent_ino: int, name: str) -> tuple[RelPath, Stat]:
        """The path of an entry about to be made, and its directory's attributes."""
        directory = self.inodes.dir_path(parent_ino)
        path = join(directory, name)
        if self.merged.stat(path) is not None:
            raise fail(errno.EEXIST)
        st = self.merged.stat(directory)
        assert st is not None  # the kernel holds the directory it names
        return path, st

    def _new_entry(
        self, parent_ino: int, name: str, caller: Owner | None
    ) -> tuple[RelPath, Stat, int | None, int | None]:
        """`_new_path`, and the owner `caller` gives the entry it makes there."""
        path, directory = self._new_path(parent_ino, name)
        return (path, directory, *metadata.new_owner(caller, directory, self.owner))

    def _ino(self, path: RelPath) -> int:
        """`path`'s inode: for one more name of a linked entry, the inode of the others."""
        ino = self.inodes.ino_of.get(path)
        if ino is not None:
            return ino
        override = self.layer.get(path)
        for name in self.layer.names(override) if override is not None else ():
            if name in self.inodes.ino_of:
                return self.inodes.alias(path, self.inodes.ino_of[name])
        return self.inodes.ino(path)

    def _owned(self, ino: int) -> metadata.Owned:
        override = self._materialize(ino)
        assert not isinstance(override, Whiteout)  # a whiteout shows as ENOENT
        return override

    def _materialize(self, ino: int) -> Override:
        path, override = self._node(ino)
        if override is None:
            assert path is not None
            st = self.merged.stat(path)
            if st is None:
                raise fail(errno.ENOENT)
            override = self.merged.snapshot(path, st)
            self._put(ino, override)
        return override

    def _writable(self, ino: int, keep: bool = True) -> Buffer:
        """The node's content as a mutable buffer, copying it up on first write."""
        override = self._materialize(ino)
        if not isinstance(override, File):
            raise fail(errno.EISDIR if isinstance(override, Dir) else errno.EINVAL)
        if isinstance(override.blob, Buffer):
            return override.blob
        buffer = Buffer(self.store, self.contents.whole(override) if keep else b"")
        self._put(ino, replace(override, blob=buffer, origin=None))  # type: ignore[arg-type]
        return buffer

    def _touch(self, ino: int) -> None:
        _, override = self._node(ino)
        if isinstance(override, File):
            self._put(ino, metadata.written(override, time.time_ns()))

    def _entries_changed(self, directory_ino: int) -> None:
        """A directory gained or lost an entry: its mtime and ctime move, as on any local
        filesystem. Kept beside the manifest, not in it (see Merged.entry_times)."""
        path = self.inodes.path_of.get(directory_ino)
        if path is not None:
            self.merged.entry_times[path] = time.time_ns()

    def _put(self, ino: int, override: Override) -> None:
        path = self.inodes.path_of.get(ino)
        if path is None:
            self.inodes.orphans[ino] = override
        else:
            self.layer.set_all(path, override)

    def _remove(self, path: RelPath, keep_inodes: bool = False) -> None:
        """Delete `path` and all below it; a whiteout hides what the user's folder has there."""
        st = self.merged.stat(path)
        is_dir = st is not None and stat.S_ISDIR(st.mode)
        if not keep_inodes:
            self._detach(path)
        shows_lower = self.merged.shows_lower(path)
        override = self.layer.get(path)
        for rel in self.layer.below(path, is_dir):
            self.layer.pop(rel)
        if shows_lower:
            self.layer.set(path, WHITEOUT)
        others = self.layer.names(override) if override is not None else set()
        if others and not keep_inodes:  # the inode lost a name: its other names show it
            self.layer.set_all(min(others), metadata.relinked(override, time.time_ns()))  # type: ignore[arg-type]

    def _detach(self, path: RelPath) -> None:
        """Unbind `path` and its descendants from their inodes; what the kernel still holds
        (an open file does) keeps a snapshot of its state as an orphan."""
        for rel, ino in self.inodes.detach(path, self.merged.is_dir(path)):
            if self.inodes.held(ino):
                snapshot = self.merged.snapshot_of(rel)
                if snapshot is not None:
                    self.inodes.orphans[ino] = snapshot
