"""The live override layer: the activated manifest with what programs wrote on top.

`entries` is a plain dict of overrides; beside it the layer keeps the indexes every
lookup needs at once: each directory's overridden children (`kids`), how many overrides
sit below each first path component (`tops`, so the many paths under none resolve without
a walk), and which paths programs changed since the last activation (`dirty`).

No I/O: file content is a `Buffer` or a `Blob`; `collect` freezes buffers into blobs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import replace

from ..paths import RelPath, parent
from .buffer import Buffer
from .store import EMPTY, File, Manifest, Override, lower_source, paths_below


class Layer:
    def __init__(self) -> None:
        self.base: Manifest = EMPTY  # the last activated manifest
        self.entries: dict[RelPath, Override] = {}
        self.kids: dict[RelPath, set[str]] = {}
        self.tops: Counter[str] = Counter()  # first path component -> overrides below it
        self.dirty: set[RelPath] = set()  # paths programs changed since the last activation

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

    def set(self, path: RelPath, override: Override) -> None:
        if path not in self.entries:
            self.tops[_top(path)] += 1
        self.entries[path] = override
        self.dirty.add(path)
        if path:
            self.kids.setdefault(parent(path), set()).add(path.rsplit("/", 1)[-1])

    def pop(self, path: RelPath) -> None:
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
        """What programs changed since activation: path -> frozen override, None = reverted."""
        out: dict[RelPath, Override | None] = {}
        for path in sorted(self.dirty):
            override = self.entries.get(path)
            if override == self.base.get(path):
                continue
            out[path] = None if override is None else frozen(override)
        return out


def frozen(override: Override) -> Override:
    if isinstance(override, File) and isinstance(override.blob, Buffer):
        return replace(override, blob=override.blob.freeze())
    return override


def _top(path: str) -> str:
    return path.partition("/")[0]
