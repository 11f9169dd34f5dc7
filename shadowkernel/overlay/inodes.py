"""The inode table: which inode number the kernel knows each path by, and which it holds.

Inodes are keyed to paths and stay stable while a path keeps its state, so tools that
record st_ino (git) keep their caches. A node that loses its path (unlink, replacement
by rename, or a branch switch that changes it) becomes an *orphan*: the table keeps the
override it had until the kernel forgets it (an open file keeps the kernel's reference).

Plain bookkeeping over dicts, no I/O; errors are `OSError(errno)` as the FUSE edge wants.
"""

from __future__ import annotations

import errno
import itertools
import os
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from ..paths import ROOT, RelPath, parent, rebase
from .store import Override, paths_below

ROOT_INO = 1
T = TypeVar("T")


def fail(code: int) -> OSError:
    return OSError(code, os.strerror(code))


@dataclass(frozen=True)
class Invalidation:
    """What the kernel must forget after a switch: entries by (parent inode, name), inodes."""

    entries: tuple[tuple[int, str], ...]
    inodes: tuple[int, ...]
    changed: int  # paths whose override differs, known to the kernel or not


class Inodes:
    def __init__(self) -> None:
        self.ino_of: dict[RelPath, int] = {ROOT: ROOT_INO}
        self.path_of: dict[int, RelPath] = {ROOT_INO: ROOT}
        self.orphans: dict[int, Override] = {}
        self.lookups: Counter[int] = Counter()  # references the kernel holds
        self.names: dict[int, set[RelPath]] = {}  # every path of an inode with hard links
        self.listings: dict[int, list[Any]] = {}  # directories being read, by inode
        self._next = itertools.count(ROOT_INO + 1)

    def ino(self, path: RelPath) -> int:
        """`path`'s inode, numbered on first sight."""
        ino = self.ino_of.get(path)
        if ino is None:
            ino = next(self._next)
            self.ino_of[path] = ino
            self.path_of[ino] = path
        return ino

    def alias(self, path: RelPath, ino: int) -> int:
        """Bind `path` to the existing `ino` as one more of its names (a hard link)."""
        self.names.setdefault(ino, {self.path_of[ino]}).add(path)
        self.ino_of[path] = ino
        return ino

    def dir_path(self, ino: int) -> RelPath:
        path = self.path_of.get(ino)
        if path is None:
            raise fail(errno.ENOENT)  # a directory that was removed or switched away
        return path

    def counted(self, ino: int) -> None:
        """The kernel took one more reference to `ino` (a lookup, a readdirplus entry)."""
        self.lookups[ino] += 1

    def forget(self, ino: int, count: int) -> bool:
        """Drop `count` references; True when the kernel holds none any more."""
        left = self.lookups[ino] - count
        if left > 0:
            self.lookups[ino] = left
            return False
        del self.lookups[ino]
        self.orphans.pop(ino, None)
        self.listings.pop(ino, None)
        return True

    def listing(self, ino: int, start: int, take: Callable[[], list[T]]) -> list[T]:
        """The listing of directory `ino` that a read from offset `start` serves: taken when
        a read starts at 0, so one read sees one state; dropped when a read passes its end."""
        listing = self.listings.get(ino) if start else None
        if listing is None:
            listing = self.listings[ino] = take()
        if start >= len(listing):
            self.listings.pop(ino, None)
        return listing

    def held(self, ino: int) -> bool:
        return bool(self.lookups[ino])

    def detach(self, path: RelPath, is_dir: bool) -> list[tuple[RelPath, int]]:
        """Unbind `path` and what is below it from their inodes: (path, inode) of each that
        lost its last name (an inode with other names stays bound to one of them)."""
        if not path:
            return []
        out = []
        for rel in paths_below(self.ino_of, path, is_dir):
            ino = self.ino_of.pop(rel)
            others = self.names.get(ino, set()) - {rel}
            if others:
                self._rename(ino, rel, None)
                self.path_of[ino] = min(others)
            else:
                del self.path_of[ino]
                self.names.pop(ino, None)
                out.append((rel, ino))
        return out

    def move(self, old: RelPath, new: RelPath, is_dir: bool) -> None:
        """The inodes of `old` and what is below it now name the same places below `new`."""
        for rel in paths_below(self.ino_of, old, is_dir):
            ino = self.ino_of.pop(rel)
            self.bind(rebase(rel, old, new), ino, was=rel)

    def exchange(self, a: RelPath, b: RelPath) -> None:
        """The inodes of two disjoint subtrees trade places."""
        swap = {p: rebase(p, a, b) for p in paths_below(self.ino_of, a, True)}
        swap.update({p: rebase(p, b, a) for p in paths_below(self.ino_of, b, True)})
        inos = {p: self.ino_of.pop(p) for p in swap}
        for old_path, new_path in swap.items():
            self.bind(new_path, inos[old_path])
        for ino in set(inos.values()) & self.names.keys():
            self.names[ino] = {swap.get(p, p) for p in self.names[ino]}

    def bind(self, path: RelPath, ino: int, was: RelPath | None = None) -> None:
        self.ino_of[path] = ino
        self.path_of[ino] = path
        if was is not None:
            self._rename(ino, was, path)

    def _rename(self, ino: int, was: RelPath, now: RelPath | None) -> None:
        names = self.names.get(ino)
        if names is not None:
            names.discard(was)
            if now is not None:
                names.add(now)

    # -- what the kernel must forget -------------------------------------------------------

    def switched(self, changed: list[RelPath]) -> Invalidation:
        """After a switch that changed the overrides of `changed`: each path's entry in its
        parent (where the kernel knows the parent), and the parents' cached listings."""
        entries, inodes = [], []
        for path in changed:
            parent_ino = self.ino_of.get(parent(path))
            if parent_ino is not None and path:
                entries.append((parent_ino, path.rsplit("/", 1)[-1]))
                inodes.append(parent_ino)
        return Invalidation(tuple(entries), tuple(dict.fromkeys(inodes)), len(changed))

    def lower_changed(self, changes: Iterable[tuple[RelPath, bool]]) -> Invalidation:
        """After the user changed their folder: for each (path, listing_changed), the path's
        node, and if the name appeared or vanished, the parent's entry for it and the
        parent's cached listing."""
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
