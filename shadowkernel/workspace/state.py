"""A branch's state, as one object: its chain of versions, the user's bytes and modes of each
path when the branch first touched it (its bases), its scratch layer, and the lock that guards
them all. `Branch` owns one; runs and merges take it; the durable store persists it.

Staging is the one way a version is made: `BranchState.stage` validates everything first (the
manifest is built before anything changes), then records it in the `journal` (the durable
store, when there is one: the call returns once the version is on disk), then appends it, so
bad input or a failed write changes nothing.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Protocol

from ..errors import ClosedError
from ..overlay.store import Blob, Override, freeze
from ..paths import RelPath
from .accept import merge_plan
from .folder import Folder
from .scratch import Scratch
from .staging import Files, Version, staged

Base = tuple[bytes | None, int]  # the user's bytes of a path (None: absent) and its mode


class Journal(Protocol):
    """Where a branch's changes are recorded before they are made (the durable store)."""

    def version(
        self, state: BranchState, version: Version, data: Mapping[RelPath, bytes | None],
        bases: Mapping[RelPath, Base],
    ) -> None: ...  # fmt: skip
    def scratch(self, state: BranchState, written: Mapping[RelPath, Override | None]) -> None: ...
    def rebase(self, state: BranchState, bases: Mapping[RelPath, Base]) -> None: ...
    def drop(self, state: BranchState) -> None: ...


def fork() -> Version:
    """Every branch's version 0: nothing touched."""
    return Version(0, Files({}), freeze({}), "fork")


class BranchState:
    """The versions, bases, modes and scratch layer of the branch `name`; `lock` guards them.
    `key` names it in the durable store (names can be reused after a drop)."""

    def __init__(self, name: str, key: str | None = None) -> None:
        self.name = name
        self.key = key or uuid.uuid4().hex
        self.journal: Journal | None = None
        self.lock = threading.RLock()
        self.versions: list[Version] = [fork()]
        self.bases: dict[RelPath, bytes | None] = {}
        self.modes: dict[RelPath, int] = {}
        self.scratch = Scratch()
        self.status = "open"  # or "dropped"

    @property
    def head(self) -> Version:
        return self.versions[-1]

    def check_open(self) -> None:
        if self.status != "open":
            raise ClosedError(f"branch {self.name!r} was {self.status}; fork a new one")

    def stage(
        self,
        data: Mapping[RelPath, bytes | None],
        op: str,
        folder: Folder,
        make: Callable[[bytes], Blob],
        bases: Mapping[RelPath, Base] | None = None,
        modes: Mapping[RelPath, int] | None = None,
    ) -> int:
        """Make one new version with `data` (path -> bytes, None: deleted) and `modes` (the
        paths whose mode changes; LINK makes a symlink); paths touched for the first time take
        their base from `bases`, else from the user's folder now."""
        with self.lock:
            self.check_open()
            given = bases or {}
            new_bases = {p: given[p] if p in given else folder.entry(p)
                         for p in data if p not in self.bases}  # fmt: skip
            version = self.next_version(data, op, new_bases, modes or {}, folder, make)
            if self.journal is not None:
                self.journal.version(self, version, data, new_bases)
            self.append(version, data, new_bases)
            return version.number

    def next_version(
        self, data: Mapping[RelPath, bytes | None], op: str, new_bases: Mapping[RelPath, Base],
        modes: Mapping[RelPath, int], folder: Folder, make: Callable[[bytes], Blob],
    ) -> Version:  # fmt: skip
        """The version after the head with `data` and `modes` (nothing recorded yet): a path
        keeps the mode the branch gave it until deleted, else shows its base's."""
        head = self.head
        kept = {p: m for p, m in head.modes.items() if data.get(p, b"") is not None}
        version_modes = {**kept, **modes}
        shown = {**{p: m for p, (_, m) in new_bases.items()}, **self.modes, **version_modes}
        manifest = staged(head.manifest, data, shown, make, folder.is_dir)
        files = head.files.changed(data)
        return Version(head.number + 1, files, manifest, op, MappingProxyType(version_modes))

    def mode(self, version: Version, path: RelPath, folder: Folder) -> int:
        """The mode of `path` at `version`: the branch's, else its base's, else the user's."""
        if path in version.modes:
            return version.modes[path]
        if path in self.modes:
            return self.modes[path]
        return folder.entry(path)[1]

    def append(
        self, version: Version, data: Mapping[RelPath, object], bases: Mapping[RelPath, Base]
    ) -> None:
        """Record a version made from `data` (its paths leave the scratch layer) and the bases
        of the paths it touched first."""
        with self.lock:
            for path, (base, mode) in bases.items():
                self.bases[path] = base
                self.modes[path] = mode
            self.scratch.discard(data)
            self.versions.append(version)
            self._release_superseded(data)

    def _release_superseded(self, paths: Iterable[RelPath]) -> None:
        """The versions before the head keep the bytes of `paths` it replaced only as their
        manifest's blob: spilled past the memory budget, they leave memory (staging.Files).
        Consecutive versions share one bytes object per path; the walk stops where they no
        longer do (so each version is released once)."""
        versions = self.versions  # the fork, then at least the head
        for path in paths:
            older, index = versions[-2].files.held(path), len(versions) - 2
            while older is not None and index >= 0:
                version = versions[index]
                if version.files.held(path) is not older:
                    break
                blob = getattr(version.manifest.get(path), "blob", None)
                if isinstance(blob, Blob) and blob.data is None and blob.size == len(older):
                    version.files.release(path, blob)  # spilled: read back when asked for
                index -= 1

    def absorb(self, written: Mapping[RelPath, Override | None]) -> None:
        """What a run wrote joins the scratch layer (later runs see it)."""
        with self.lock:
            if self.journal is not None:
                self.journal.scratch(self, written)
            self.scratch.absorb(written)

    def rebase(self, bases: Mapping[RelPath, Base]) -> None:
        """New bases (bytes and mode) for touched paths (after accept: the user's files now
        equal the branch's)."""
        with self.lock:
            if self.journal is not None:
                self.journal.rebase(self, bases)
            for path, (base, mode) in bases.items():
                self.bases[path] = base
                self.modes[path] = mode

    def drop(self) -> None:
        with self.lock:
            if self.journal is not None:
                self.journal.drop(self)
            self.status = "dropped"
            self.scratch.clear()

    def base_bytes(self, path: RelPath, folder: Folder) -> bytes | None:
        """The branch's base of `path`: as first touched, else the user's file now."""
        if path in self.bases:
            return self.bases[path]
        return folder.content(path)


def file_bytes(version: Version, path: RelPath, folder: Folder) -> bytes | None:
    """The bytes of `path` at `version`: staged, else the user's file (None: absent)."""
    if path in version.files:
        return version.files[path]
    return folder.content(path)


def merge(
    merged: BranchState, a: BranchState, b: BranchState, folder: Folder,
    make: Callable[[bytes], Blob],
) -> tuple[RelPath, ...]:  # fmt: skip
    """Stage on the fresh `merged` the three-way merge of `a` and `b` (per hunk, as `git
    merge-file` merges): their common base (each path's base as the branch that touched it
    first recorded it) becomes its base. Returns the paths both changed in overlapping lines:
    they hold the merge with conflict markers labelled with the branch names and `base`."""
    with a.lock, b.lock:
        ours, theirs = a.head, b.head
        paths = sorted({*ours.files, *theirs.files})
        bases = {**b.bases, **a.bases}
        base_modes = {**b.modes, **a.modes}
        mine = {p: file_bytes(ours, p, folder) for p in paths}
        other = {p: file_bytes(theirs, p, folder) for p in paths}
        modes = {**{p: b.mode(theirs, p, folder) for p in theirs.modes},
                 **{p: a.mode(ours, p, folder) for p in ours.modes}}  # fmt: skip
    plan = merge_plan(mine, bases.get, other.get, (a.name, "base", b.name))
    result = {p: plan.writes.get(p, other[p]) for p in paths}
    result |= {p: plan.marked.get(p, mine[p] if mine[p] is not None else other[p])
               for p in plan.conflicts}  # fmt: skip
    changed = {p: d for p, d in result.items() if d != bases[p] or p in modes}
    if changed:
        merged.stage(changed, f"merge {a.name}@{ours.number} + {b.name}@{theirs.number}",
                     folder, make, {p: (bases[p], base_modes[p]) for p in changed},
                     {p: m for p, m in modes.items() if p in changed})  # fmt: skip
    return tuple(plan.conflicts)
