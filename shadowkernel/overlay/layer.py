"""The live override layer: the activated manifest with what programs wrote on top.

`entries` is a plain dict of overrides; beside it the layer keeps the indexes every
lookup needs at once: each directory's overridden children (`kids`), how many overrides
sit below each first path component (`tops`, so the many paths under none resolve without
a walk), which paths programs changed since the last activation (`dirty`), the paths of
each hard-link group (`links`: the names of one inode, which hold one override), and the
number of directory overrides in each directory (`subdirs`, for its link count).

No I/O: file content is a `Buffer` or a `Blob`; `collect` freezes buffers into blobs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from ..paths import RelPath, parent
from .buffer import Buffer
from .store import (
    EMPTY,
    Dir,
    File,
    Linkable,
    Manifest,
    Override,
    lower_source,
    paths_below,
    with_blob,
)


class Layer:
    def __init__(self) -> None:
        self.base: Manifest = EMPTY  # the last activated manifest
        self.entries: dict[RelPath, Override] = {}
        self.kids: dict[RelPath, set[str]] = {}
        self.tops: Counter[str] = Counter()  # first path component -> overrides below it
        self.dirty: set[RelPath] = set()  # paths programs changed since the last activation
        self.links: dict[str, set[RelPath]] = {}  # hard-link group -> its paths
        self.subdirs: Counter[RelPath] = Counter()  # directory -> its Dir children

    def get(self, path: RelPath) -> Override | None:
        return self.entries.get(path)

    def children(self, directory: RelPath) -> set[str]:
        """Names of `directory`'s children that have an override."""
        return self.kids.get(directory, set())

    def below(self, path: RelPath, is_dir: bool) -> list[RelPath]:
        return paths_below(self.entries, path, is_dir)

    def source(self, path: RelPath) -> RelPath | None:
        """`lower_source`, answered at once for the many paths under no override at all."""
        if _top(path) not in self.tops:
            return path
        return lower_source(self.entries, path)

    def names(self, override: Override) -> set[RelPath]:
        """The paths of a linked override's inode (empty for one not linked)."""
        link = override.link if isinstance(override, Linkable) else None
        return self.links.get(link, set()) if link is not None else set()

    def nlink(self, override: Override) -> int:
        return len(self.names(override)) or 1

    def same_inode(self, a: RelPath, b: RelPath) -> bool:
        """Whether `a` and `b` are two names of one inode (hard links)."""
        override = self.entries.get(a)
        return override is not None and b in self.names(override)

    def set_all(self, path: RelPath, override: Override) -> None:
        """Set `override` at `path` and at every other name of its inode."""
        for name in self.names(override) - {path}:
            self.set(name, override)
        self.set(path, override)

    def set(self, path: RelPath, override: Override) -> None:
        old = self.entries.get(path)
        if old is None:
            self.tops[_top(path)] += 1
        else:
            self._unlink(path, old)
        if path and isinstance(override, Dir) != isinstance(old, Dir):
            self.subdirs[parent(path)] += 1 if isinstance(override, Dir) else -1
        self.entries[path] = override
        if isinstance(override, Linkable) and override.link is not None:
            self.links.setdefault(override.link, set()).add(path)
        self.dirty.add(path)
        if path:
            self.kids.setdefault(parent(path), set()).add(path.rsplit("/", 1)[-1])

    def pop(self, path: RelPath) -> None:
        old = self.entries.pop(path, None)
        if old is None:
            return
        self._unlink(path, old)
        if path and isinstance(old, Dir):
            self.subdirs[parent(path)] -= 1
        self.dirty.add(path)
        top = _top(path)
        self.tops[top] -= 1
        if not self.tops[top]:
            del self.tops[top]
        if path:
            siblings = self.kids.get(parent(path))
            if siblings is not None:
                siblings.discard(path.rsplit("/", 1)[-1])

    def _unlink(self, path: RelPath, old: Override) -> None:
        link = old.link if isinstance(old, Linkable) else None
        group = self.links.get(link) if link is not None else None
        if group is not None:
            group.discard(path)
            if not group:
                del self.links[link]  # type: ignore[arg-type]

    def changed(self, manifest: Manifest, changes: Iterable[RelPath]) -> list[RelPath]:
        """Paths whose override differs from `manifest`'s: among `changes` and what
        programs wrote since the last activation."""
        return sorted(
            p for p in self.dirty.union(changes) if self.entries.get(p) != manifest.get(p)
        )

    def show(self, manifest: Manifest, paths: Iterable[RelPath]) -> None:
        """Make `manifest` the activated one, taking its overrides for `paths`."""
        for path in paths:
            override = manifest.get(path)
            if override is None:
                self.pop(path)
            else:
                self.set(path, override)
        self.base = manifest
        self.dirty.clear()

    def collect(self) -> dict[RelPath, Override | None]:
        """What programs changed since activation: path -> frozen override, None = reverted.
        The names of one inode get one frozen override, as they shared one buffer."""
        out: dict[RelPath, Override | None] = {}
        frozen_buffers: dict[int, Override] = {}
        for path in sorted(self.dirty):
            override = self.entries.get(path)
            if override == self.base.get(path):
                continue
            out[path] = None if override is None else frozen(override, frozen_buffers)
        return out


def frozen(override: Override, memo: dict[int, Override]) -> Override:
    """`override` with its buffer frozen into a blob, once per override (see `collect`)."""
    if not (isinstance(override, File) and isinstance(override.blob, Buffer)):
        return override
    if id(override) not in memo:
        memo[id(override)] = with_blob(override, override.blob.freeze())
    return memo[id(override)]


def _top(path: str) -> str:
    return path.partition("/")[0]
