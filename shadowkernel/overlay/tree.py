"""The overlay's live view: the user's folder, the active overrides, and what programs wrote.

`Tree` answers every filesystem operation by inode, the way the FUSE adapter needs it,
and raises only `OSError(errno)`. It never writes the user's folder: all reads of it go
through `Lower`, and every change lands in `entries` (the live override layer).

Inodes are keyed to paths and stay stable while a path keeps its state, so tools that
record st_ino (git) keep their caches. A node that loses its path (unlink, replacement
by rename, or a branch switch that changes it) becomes an *orphan*: it keeps a snapshot
of its state until the kernel forgets it (an open file keeps the kernel's reference).

Files and directories are read and written by inode, never through per-open handles: with
the patched pyfuse3 the kernel stops sending open and release altogether (see fuse.py).
"""

from __future__ import annotations

import errno
import itertools
import os
import stat
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace

from ..paths import ROOT, RelPath, is_within, join, parent, rebase
from .buffer import Buffer
from .lower import Lower
from .store import (
    EMPTY,
    WHITEOUT,
    Blob,
    BlobStore,
    Delta,
    Dir,
    File,
    Manifest,
    Override,
    Symlink,
    Whiteout,
    lower_source,
    patched,
)

ROOT_INO = 1
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2


def fail(code: int) -> OSError:
    return OSError(code, os.strerror(code))


@dataclass(frozen=True, slots=True)
class Stat:
    mode: int
    size: int
    mtime_ns: int
    nlink: int = 1
    uid: int = 0
    gid: int = 0
    rdev: int = 0
    atime_ns: int = 0
    ctime_ns: int = 0


@dataclass(frozen=True)
class Invalidation:
    """What the kernel must forget after a switch: entries by (parent inode, name), inodes."""

    entries: tuple[tuple[int, str], ...]
    inodes: tuple[int, ...]
    changed: int  # paths whose override differs, known to the kernel or not


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
        self.uid, self.gid = root.st_uid, root.st_gid
        self.base: Manifest = EMPTY
        self.entries: dict[RelPath, Override] = {}
        self.kids: dict[RelPath, set[str]] = {}
        self.tops: Counter[str] = Counter()  # first path component -> overrides below it
        self.dirty: set[RelPath] = set()  # paths programs changed since the last activation
        self.ino_of: dict[RelPath, int] = {ROOT: ROOT_INO}
        self.path_of: dict[int, RelPath] = {ROOT_INO: ROOT}
        self.orphans: dict[int, Override] = {}
        self.lookups: Counter[int] = Counter()
        self.listings: dict[int, list[tuple[str, int, Stat]]] = {}  # directories being read
        self._inos = itertools.count(ROOT_INO + 1)
        self._spill_fds: dict[str, int] = {}

    # -- switching and collecting ----------------------------------------------------------

    def activate(self, changes: Delta) -> Invalidation:
        """Show the last activated manifest with `changes` applied; what programs wrote since
        the last activation is dropped. Costs O(changes + writes), whatever the manifest's size."""
        manifest = patched(self.base, changes)
        changed = sorted(
            p for p in self.dirty.union(changes) if self.entries.get(p) != manifest.get(p)
        )
        entries, inodes = [], []
        for path in changed:
            parent_ino = self.ino_of.get(parent(path))
            if parent_ino is not None and path:
                entries.append((parent_ino, path.rsplit("/", 1)[-1]))
                inodes.append(parent_ino)
            # Detached nodes need no invalidation: once their entries are gone only open
            # files reach them, and those keep the state they opened (see _detach).
            self._detach(path)
        for path in changed:
            override = manifest.get(path)
            if override is None:
                self._pop(path)
            else:
                self._set(path, override)
        self.base = manifest
        self.dirty.clear()
        self._open_spills(o for o in changes.values() if o is not None)
        return Invalidation(tuple(entries), tuple(dict.fromkeys(inodes)), len(changed))

    def collect(self) -> dict[RelPath, Override | None]:
        """What programs changed since activation: path -> frozen override, None = reverted."""
        delta: dict[RelPath, Override | None] = {}
        for path in sorted(self.dirty):
            override = self.entries.get(path)
            if override == self.base.get(path):
                continue
            delta[path] = None if override is None else self._frozen(override)
        return delta

    def lower_changed(self, changes: Iterable[tuple[RelPath, bool]]) -> Invalidation:
        """What the kernel must forget after the user changed their folder: for each
        (path, listing_changed), the path's node, and if the name appeared or vanished, the
        parent's entry for it and the parent's cached listing."""
        entries, inodes = [], []
        for path, listing_changed in changes:
            if path in self.ino_of:
                inodes.append(self.ino_of[path])
            parent_ino = self.ino_of.get(parent(path))
            if listing_changed and path and parent_ino is not None:
                entries.append((parent_ino, path.rsplit("/", 1)[-1]))
                inodes.append(parent_ino)
        return Invalidation(tuple(dict.fromkeys(entries)), tuple(dict.fromkeys(inodes)),
                            len(entries))  # fmt: skip

    def _frozen(self, override: Override) -> Override:
        if isinstance(override, File) and isinstance(override.blob, Buffer):
            return replace(override, blob=override.blob.freeze())
        return override

    def _open_spills(self, overrides: Iterable[Override]) -> None:
        # Keep an fd on every spilled blob in use, so its file can go away under us.
        for override in overrides:
            blob = override.blob if isinstance(override, File) else None
            if blob is not None and blob.spill and blob.spill not in self._spill_fds:
                self._spill_fds[blob.spill] = os.open(blob.spill, os.O_RDONLY | os.O_CLOEXEC)

    # -- lookups and attributes ------------------------------------------------------------

    def lookup(self, parent_ino: int, name: str) -> tuple[int, Stat]:
        path = self._dir_path(parent_ino)
        self.watch(path)
        if name == "..":
            path = parent(path)
        elif name != ".":
            path = join(path, name)
        st = self._stat_path(path)
        if st is None:
            raise fail(errno.ENOENT)
        ino = self._ino(path)
        self.lookups[ino] += 1
        return ino, st

    def forget(self, ino: int, count: int) -> None:
        left = self.lookups[ino] - count
        if left > 0:
            self.lookups[ino] = left
            return
        del self.lookups[ino]
        self.orphans.pop(ino, None)
        self.listings.pop(ino, None)

    def getattr(self, ino: int) -> Stat:
        path, override = self._node(ino)
        st = self._stat_override(override) if override is not None else None
        if override is None and path is not None:
            st = self._stat_path(path)
        if st is None:
            raise fail(errno.ENOENT)
        return st

    def setattr(self, ino: int, size: int | None, mode: int | None, mtime_ns: int | None) -> Stat:
        if size is not None:
            self._writable(ino, keep=size > 0).truncate(size)
            self._touch(ino)
        if mode is not None or mtime_ns is not None:
            override = self._materialize(ino)
            changes: dict[str, int] = {}
            if mode is not None and isinstance(override, (File, Dir)):  # links have no mode
                changes["mode"] = stat.S_IMODE(mode)
            if mtime_ns is not None and not isinstance(override, Whiteout):
                changes["mtime_ns"] = mtime_ns
            if changes:
                self._put(ino, replace(override, **changes))  # type: ignore[arg-type]
        return self.getattr(ino)

    def readlink(self, ino: int) -> bytes:
        path, override = self._node(ino)
        if isinstance(override, Symlink):
            target = override.target
        elif override is None and path is not None:
            source = self._source(path)
            if source is None:
                raise fail(errno.ENOENT)
            target = self.lower.readlink(source)
        else:
            raise fail(errno.EINVAL)
        return confine_link(target, parent(path or ROOT), self.lower.root, self.alias)

    def getxattr(self, ino: int, name: str) -> bytes:
        source = self._lower_of(ino)
        if source is None:
            raise fail(errno.ENODATA)
        return self.lower.getxattr(source, name)

    def listxattr(self, ino: int) -> list[str]:
        source = self._lower_of(ino)
        return [] if source is None else self.lower.listxattr(source)

    def _lower_of(self, ino: int) -> RelPath | None:
        """The lower entry that `ino` shows unchanged, if any (its xattrs show through)."""
        path, override = self._node(ino)
        if override is None and path is not None:
            return self._source(path)
        return override.origin if isinstance(override, (File, Dir)) else None

    # -- directories -----------------------------------------------------------------------

    def readdir(self, ino: int, start: int) -> Iterator[tuple[int, str, int, Stat]]:
        """(next offset, name, inode, attributes) from `start`; the caller counts lookups.

        A listing is taken when a read starts at offset 0 and served from there, so one
        read of a directory sees one state; it is dropped when the read passes its end."""
        listing = self.listings.get(ino) if start else None
        if listing is None:
            path = self._dir_path(ino)
            self.watch(path)
            listing = [(name, self._ino(join(path, name)), st) for name, st in self._list(path)]
            self.listings[ino] = listing
        if start >= len(listing):
            self.listings.pop(ino, None)
        for offset, (name, entry_ino, st) in enumerate(listing[start:], start + 1):
            yield offset, name, entry_ino, st

    def mkdir(self, parent_ino: int, name: str, mode: int) -> tuple[int, Stat]:
        path = self._new_path(parent_ino, name)
        self._set(path, Dir(mode=stat.S_IMODE(mode), mtime_ns=time.time_ns()))
        return self.lookup(parent_ino, name)

    def rmdir(self, parent_ino: int, name: str) -> None:
        path, st = self._existing(parent_ino, name)
        if not stat.S_ISDIR(st.mode):
            raise fail(errno.ENOTDIR)
        if next(iter(self._list(path)), None) is not None:
            raise fail(errno.ENOTEMPTY)
        self._remove(path)

    # -- files -----------------------------------------------------------------------------

    def create(self, parent_ino: int, name: str, mode: int) -> tuple[int, Stat]:
        path = self._new_path(parent_ino, name)
        buffer = Buffer(self.store)
        self._set(path, File(blob=buffer, mode=stat.S_IMODE(mode), mtime_ns=time.time_ns()))  # type: ignore[arg-type]
        return self.lookup(parent_ino, name)

    def symlink(self, parent_ino: int, name: str, target: bytes) -> tuple[int, Stat]:
        path = self._new_path(parent_ino, name)
        self._set(path, Symlink(target=target, mtime_ns=time.time_ns()))
        return self.lookup(parent_ino, name)

    def unlink(self, parent_ino: int, name: str) -> None:
        path, st = self._existing(parent_ino, name)
        if stat.S_ISDIR(st.mode):
            raise fail(errno.EISDIR)
        self._remove(path)

    def open(self, ino: int, truncate: bool = False) -> None:
        """Check that `ino` can be read (only without the no-open patch: the kernel asks)."""
        if truncate:
            self._writable(ino, keep=False).truncate(0)
            self._touch(ino)
        path, override = self._node(ino)
        if isinstance(override, File) and override.blob is not None:
            return
        if self._content_source(path, override) is None:
            raise fail(errno.ENOENT)

    def read(self, ino: int, offset: int, size: int) -> bytes:
        path, override = self._node(ino)
        blob = override.blob if isinstance(override, File) else None
        if blob is None:
            # Opened per read: reads reach us only past the kernel's page cache, and a fresh
            # open follows an editor that replaced the user's file.
            source = self._content_source(path, override)
            if source is None:
                raise fail(errno.ENOENT)
            return self.lower.pread(source, size, offset)
        if isinstance(blob, Buffer):
            return blob.read(offset, size)
        return self._read_blob(blob, offset, size)

    def write(self, ino: int, offset: int, data: bytes) -> int:
        written = self._writable(ino).write(offset, data)
        self._touch(ino)
        return written

    # -- renames ---------------------------------------------------------------------------

    def rename(
        self, old_parent: int, old_name: str, new_parent: int, new_name: str, flags: int
    ) -> None:
        old, old_st = self._existing(old_parent, old_name)
        new = join(self._dir_path(new_parent), new_name)
        new_st = self._stat_path(new)
        if (
            flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE)
            or flags == RENAME_NOREPLACE | RENAME_EXCHANGE
        ):
            raise fail(errno.EINVAL)
        if flags & RENAME_NOREPLACE and new_st is not None:
            raise fail(errno.EEXIST)
        if flags & RENAME_EXCHANGE:
            if new_st is None:
                raise fail(errno.ENOENT)
            return self._exchange(old, new)
        if old == new:
            return
        if is_within(new, old):
            raise fail(errno.EINVAL)
        if new_st is not None:
            self._check_replaceable(old_st, new, new_st)
        moved = self._subtree(old, old_st)
        if new_st is not None:
            self._remove(new)
        self._remove(old, keep_inodes=True)
        self._move_inodes(old, new, stat.S_ISDIR(old_st.mode))
        for rel, override in moved.items():
            self._set(rebase(rel, old, new), override)

    def _check_replaceable(self, old_st: Stat, new: RelPath, new_st: Stat) -> None:
        if stat.S_ISDIR(new_st.mode):
            if not stat.S_ISDIR(old_st.mode):
                raise fail(errno.EISDIR)
            if next(iter(self._list(new)), None) is not None:
                raise fail(errno.ENOTEMPTY)
        elif stat.S_ISDIR(old_st.mode):
            raise fail(errno.ENOTDIR)

    def _exchange(self, a: RelPath, b: RelPath) -> None:
        if is_within(a, b) or is_within(b, a):
            raise fail(errno.EINVAL)
        a_st, b_st = self._stat_path(a), self._stat_path(b)
        assert a_st is not None and b_st is not None
        tree_a, tree_b = self._subtree(a, a_st), self._subtree(b, b_st)
        for path in (a, b):
            for rel in [p for p in self.entries if is_within(p, path)]:
                self._pop(rel)
        swap = {p: rebase(p, a, b) for p in self.ino_of if is_within(p, a)}
        swap.update({p: rebase(p, b, a) for p in self.ino_of if is_within(p, b)})
        inos = {p: self.ino_of.pop(p) for p in swap}
        for old_path, new_path in swap.items():
            self.ino_of[new_path] = inos[old_path]
            self.path_of[inos[old_path]] = new_path
        for rel, override in tree_a.items():
            self._set(rebase(rel, a, b), override)
        for rel, override in tree_b.items():
            self._set(rebase(rel, b, a), override)

    def _subtree(self, path: RelPath, st: Stat) -> dict[RelPath, Override]:
        """Overrides that carry `path` and everything below it to another name."""
        below = self._below(self.entries, path, stat.S_ISDIR(st.mode))
        moved = {p: self.entries[p] for p in below if p != path}
        moved[path] = self._snapshot(path, st)
        return moved

    # -- statistics ------------------------------------------------------------------------

    def statistics(self) -> dict[str, int]:
        return {
            "overrides": len(self.entries),
            "inodes": len(self.ino_of),
            "orphans": len(self.orphans),
            "memory_bytes": self.store.in_memory,
        }

    # -- internals -------------------------------------------------------------------------

    def _node(self, ino: int) -> tuple[RelPath | None, Override | None]:
        path = self.path_of.get(ino)
        if path is not None:
            return path, self.entries.get(path)
        override = self.orphans.get(ino)
        if override is None:
            raise fail(errno.ENOENT)
        return None, override

    def _dir_path(self, ino: int) -> RelPath:
        path = self.path_of.get(ino)
        if path is None:
            raise fail(errno.ENOENT)  # a directory that was removed or switched away
        return path

    def _ino(self, path: RelPath) -> int:
        ino = self.ino_of.get(path)
        if ino is None:
            ino = next(self._inos)
            self.ino_of[path] = ino
            self.path_of[ino] = path
        return ino

    def _existing(self, parent_ino: int, name: str) -> tuple[RelPath, Stat]:
        """The path of an entry that must exist, and its attributes."""
        path = join(self._dir_path(parent_ino), name)
        st = self._stat_path(path)
        if st is None:
            raise fail(errno.ENOENT)
        return path, st

    def _new_path(self, parent_ino: int, name: str) -> RelPath:
        path = join(self._dir_path(parent_ino), name)
        if self._stat_path(path) is not None:
            raise fail(errno.EEXIST)
        return path

    def _stat_path(self, path: RelPath) -> Stat | None:
        override = self.entries.get(path)
        if override is not None:
            return self._stat_override(override)
        source = self._source(path)
        return None if source is None else self._stat_lower(source)

    def _stat_lower(self, source: RelPath) -> Stat | None:
        st = self.lower.lstat(source)
        return None if st is None else _stat(st)

    def _stat_override(self, override: Override) -> Stat | None:
        if isinstance(override, Whiteout):
            return None
        if isinstance(override, Symlink):
            return self._synthetic(stat.S_IFLNK | 0o777, len(override.target), override.mtime_ns)
        if isinstance(override, Dir):
            return self._synthetic(stat.S_IFDIR | override.mode, 4096, override.mtime_ns, nlink=2)
        if override.blob is not None:
            size = override.blob.size
        else:
            lower = self._stat_lower(override.origin) if override.origin is not None else None
            if lower is None:
                return None
            size = lower.size
        return self._synthetic(stat.S_IFREG | override.mode, size, override.mtime_ns)

    def _synthetic(self, mode: int, size: int, mtime_ns: int, nlink: int = 1) -> Stat:
        return Stat(mode=mode, size=size, mtime_ns=mtime_ns, nlink=nlink, uid=self.uid,
                    gid=self.gid, atime_ns=mtime_ns, ctime_ns=mtime_ns)  # fmt: skip

    def _list(self, path: RelPath) -> Iterator[tuple[str, Stat]]:
        source = self._source(path)
        listing = self.lower.scan(source) if source is not None else []
        own = self.kids.get(path, set())
        for name, lower_st in listing:
            if name not in own:
                yield name, _stat(lower_st)
        for name in sorted(own):
            st = self._stat_override(self.entries[join(path, name)])
            if st is not None:
                yield name, st

    def _shows_lower(self, path: RelPath) -> bool:
        """Whether the user's folder has an entry that would show at `path` without an override."""
        source = self._source(parent(path))
        return (
            source is not None
            and self.lower.lstat(join(source, path.rsplit("/", 1)[-1])) is not None
        )

    def _content_source(self, path: RelPath | None, override: Override | None) -> RelPath | None:
        if isinstance(override, File):
            return override.origin
        return None if path is None else self._source(path)

    def _snapshot(self, path: RelPath, st: Stat) -> Override:
        """An override that reproduces `path`'s current state wherever it is put."""
        override = self.entries.get(path)
        if override is not None:
            return override
        source = self._source(path)
        mode = stat.S_IMODE(st.mode)
        if stat.S_ISDIR(st.mode):
            return Dir(origin=source, mode=mode, mtime_ns=st.mtime_ns)
        if stat.S_ISLNK(st.mode):
            return Symlink(target=self.lower.readlink(source), mtime_ns=st.mtime_ns)  # type: ignore[arg-type]
        return File(origin=source, mode=mode, mtime_ns=st.mtime_ns)

    def _materialize(self, ino: int) -> Override:
        path, override = self._node(ino)
        if override is None:
            assert path is not None
            st = self._stat_path(path)
            if st is None:
                raise fail(errno.ENOENT)
            override = self._snapshot(path, st)
            self._put(ino, override)
        return override

    def _writable(self, ino: int, keep: bool = True) -> Buffer:
        """The node's content as a mutable buffer, copying it up on first write."""
        override = self._materialize(ino)
        if not isinstance(override, File):
            raise fail(errno.EISDIR if isinstance(override, Dir) else errno.EINVAL)
        if isinstance(override.blob, Buffer):
            return override.blob
        buffer = Buffer(self.store, self._content(override) if keep else b"")
        self._put(ino, replace(override, blob=buffer, origin=None))  # type: ignore[arg-type]
        return buffer

    def _content(self, override: File) -> bytes:
        if override.blob is not None:
            return self._read_blob(override.blob, 0, override.blob.size)
        assert override.origin is not None
        return self.lower.read(override.origin)

    def _read_blob(self, blob: Blob, offset: int, size: int) -> bytes:
        if blob.data is not None:
            return blob.data[offset : offset + size]
        fd = self._spill_fds.get(blob.spill)  # type: ignore[arg-type]
        return os.pread(fd, size, offset) if fd is not None else blob.read(offset, size)

    def _touch(self, ino: int) -> None:
        _, override = self._node(ino)
        if isinstance(override, File):
            self._put(ino, replace(override, mtime_ns=time.time_ns()))

    def _put(self, ino: int, override: Override) -> None:
        path = self.path_of.get(ino)
        if path is None:
            self.orphans[ino] = override
        else:
            self._set(path, override)

    def _source(self, path: RelPath) -> RelPath | None:
        """`lower_source`, answered at once for the many paths under no override at all."""
        if _top(path) not in self.tops:
            return path
        return lower_source(self.entries, path)

    def _set(self, path: RelPath, override: Override) -> None:
        if path not in self.entries:
            self.tops[_top(path)] += 1
        self.entries[path] = override
        self.dirty.add(path)
        if path:
            self.kids.setdefault(parent(path), set()).add(path.rsplit("/", 1)[-1])

    def _pop(self, path: RelPath) -> None:
        if self.entries.pop(path, None) is None:
            return
        self.dirty.add(path)
        top = _top(path)
        self.tops[top] -= 1
        if not self.tops[top]:
            del self.tops[top]
        if path:
            siblings = self.kids.get(parent(path))
            if siblings is not None:
                siblings.discard(path.rsplit("/", 1)[-1])

    def _remove(self, path: RelPath, keep_inodes: bool = False) -> None:
        """Delete `path` and all below it; a whiteout hides what the user's folder has there."""
        st = self._stat_path(path)
        is_dir = st is not None and stat.S_ISDIR(st.mode)
        if not keep_inodes:
            self._detach(path)
        shows_lower = self._shows_lower(path)
        for rel in self._below(self.entries, path, is_dir):
            self._pop(rel)
        if shows_lower:
            self._set(path, WHITEOUT)

    def _detach(self, path: RelPath) -> list[int]:
        """Unbind `path` and its descendants from their inodes, keeping what the kernel holds."""
        if not path:
            return []
        inos = []
        for rel in self._below(self.ino_of, path, self._is_dir(path)):
            ino = self.ino_of.pop(rel)
            del self.path_of[ino]
            inos.append(ino)
            if self.lookups[ino]:  # the kernel still holds it (an open file does)
                snapshot = self._snapshot_of(rel)
                if snapshot is not None:
                    self.orphans[ino] = snapshot
        return inos

    def _snapshot_of(self, path: RelPath) -> Override | None:
        """`path`'s current state as an override, or None if it does not exist."""
        override = self.entries.get(path)
        if override is not None:
            return None if isinstance(override, Whiteout) else override
        st = self._stat_path(path)
        return None if st is None else self._snapshot(path, st)

    def _is_dir(self, path: RelPath) -> bool:
        override = self.entries.get(path)
        if override is not None:  # answered without a stat of the user's folder
            return isinstance(override, Dir)
        st = self._stat_path(path)
        return st is not None and stat.S_ISDIR(st.mode)

    def _move_inodes(self, old: RelPath, new: RelPath, is_dir: bool) -> None:
        for rel in self._below(self.ino_of, old, is_dir):
            ino = self.ino_of.pop(rel)
            moved = rebase(rel, old, new)
            self.ino_of[moved] = ino
            self.path_of[ino] = moved

    @staticmethod
    def _below(keys: Mapping[RelPath, object], path: RelPath, is_dir: bool) -> list[RelPath]:
        """`path` and, for a directory, every key below it (a scan only directories pay)."""
        if not is_dir:
            return [path] if path in keys else []
        return [p for p in keys if is_within(p, path)]


def confine_link(target: bytes, directory: RelPath, root: str, alias: str) -> bytes:
    """A link target as programs in the shadow must see it.

    A target that resolves into the user's folder is redirected to the same place in the
    shadow, so nothing reached through a link writes the user's files; a relative target
    that stays inside is returned unchanged; one that leaves resolves where it did.
    """
    if root == alias:
        return target
    broot, balias = os.fsencode(root), os.fsencode(alias)
    here = os.fsencode(directory)
    if target.startswith(b"/"):
        where = os.path.normpath(target)
        return balias + where[len(broot) :] if is_within(where, broot) else target
    lexical = os.path.normpath(os.path.join(here, target))
    if lexical != b".." and not lexical.startswith(b"../"):
        return target
    where = os.path.normpath(os.path.join(broot, lexical))
    if is_within(where, broot):
        return os.path.relpath(balias + where[len(broot) :], os.path.join(balias, here))
    return where


def _stat(st: os.stat_result) -> Stat:
    return Stat(
        mode=st.st_mode, size=st.st_size, mtime_ns=st.st_mtime_ns, nlink=st.st_nlink,
        uid=st.st_uid, gid=st.st_gid, rdev=st.st_rdev, atime_ns=st.st_atime_ns,
        ctime_ns=st.st_ctime_ns,
    )  # fmt: skip


def _top(path: str) -> str:
    return path.partition("/")[0]

