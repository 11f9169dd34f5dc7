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
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol

from ..errors import ClosedError, StagingError
from ..overlay.store import Blob, Dir, Override, freeze
from ..paths import RelPath, parent
from .accept import merge_plan
from .folder import Folder
from .scratch import Scratch
from .staging import (
    DEFAULT_MODE,
    DELTA_RUN,
    LINK,
    Ends,
    Files,
    Version,
    changes_from,
    small_change,
    staged,
)

Base = tuple[bytes | None, int]  # the user's bytes of a path (None: absent) and its mode


class Clock:
    """When each base was taken from the folder, in one order across branches: a merge takes
    the older of two bases (see `common_base`). The durable record keeps each version's
    moments; a restore brings them back and moves the clock past them, so a restored branch
    (a merge's too, whose moments are its sides') keeps its place among old and new ones."""

    def __init__(self) -> None:
        self._last = 0
        self._lock = threading.Lock()

    def tick(self) -> int:
        with self._lock:
            self._last += 1
            return self._last

    def past(self, moments: Iterable[int]) -> None:
        with self._lock:
            self._last = max([self._last, *moments])


MOMENTS = Clock()


@dataclass(frozen=True)
class Conflicts:
    """What the merge that made a branch left conflicted: each path and how ("markers": it
    holds git's conflict markers; "binary": a's bytes; "deleted": one side deleted it, it
    holds the other's), and the branch names its markers carry."""

    paths: Mapping[RelPath, str] = field(default_factory=dict)
    labels: tuple[str, str] = ("", "")

    def holds_markers(self, data: bytes | None) -> bool:
        """`data` still holds a conflict block this merge's markers open and close."""
        if data is None:
            return False
        a, b = self.labels
        lines = {line.rstrip(b"\r") for line in data.split(b"\n")}  # CRLF files' too
        return f"<<<<<<< {a}".encode() in lines and f">>>>>>> {b}".encode() in lines


class Journal(Protocol):
    """Where a branch's changes are recorded before they are made (the durable store)."""

    def version(
        self, state: BranchState, version: Version, data: Mapping[RelPath, bytes | None],
        bases: Mapping[RelPath, Base], taken: Mapping[RelPath, int],
        conflicts: Conflicts | None = None, changes: Mapping[RelPath, Ends] = {},
    ) -> None: ...  # fmt: skip
    def scratch(self, state: BranchState, written: Mapping[RelPath, Override | None]) -> None: ...
    def rebase(
        self, state: BranchState, bases: Mapping[RelPath, Base], taken: Mapping[RelPath, int]
    ) -> None: ...
    def drop(self, state: BranchState) -> None: ...


def _blob(version: Version, path: RelPath) -> Blob | None:
    """The blob holding `path`'s bytes in `version`'s manifest (None: a link, or none)."""
    blob = getattr(version.manifest.get(path), "blob", None)
    return blob if isinstance(blob, Blob) else None


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
        self.taken: dict[RelPath, int] = {}  # when each base was taken (`MOMENTS`)
        # what the merge that made this branch left conflicted, and which of those paths a
        # later version staged: accept refuses the others (`unresolved`)
        self.conflicts = Conflicts()
        self.restaged: set[RelPath] = set()
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
        taken: Mapping[RelPath, int] | None = None,
        conflicts: Conflicts | None = None,
    ) -> int:
        """Make one new version with `data` (path -> bytes, None: deleted) and `modes` (the
        paths whose mode changes; LINK makes a symlink); paths touched for the first time take
        their base from `bases` (taken at the moments `taken` gives, else now), else from the
        user's folder now. A file below a file, or in place of a folder, is refused. A merge
        gives the `conflicts` it leaves in this version."""
        with self.lock:
            self.check_open()
            check_kinds(self.head, data, folder)
            given = bases or {}
            new_bases = {p: given[p] if p in given else folder.entry(p)
                         for p in data if p not in self.bases}  # fmt: skip
            version = self.next_version(data, op, new_bases, modes or {}, folder, make)
            moments = {p: (taken or {}).get(p) or MOMENTS.tick() for p in new_bases}
            changes = changes_from(self.head.files, data)
            if self.journal is not None:
                self.journal.version(self, version, data, new_bases, moments, conflicts, changes)
            self.append(version, data, new_bases, moments, conflicts, changes)
            return version.number

    def next_version(
        self, data: Mapping[RelPath, bytes | Blob | None], op: str,
        new_bases: Mapping[RelPath, Base], modes: Mapping[RelPath, int], folder: Folder,
        make: Callable[[bytes], Blob],
    ) -> Version:  # fmt: skip
        """The version after the head with `data` and `modes` (nothing recorded yet): a path
        keeps the mode the branch gave it until deleted, else shows its base's. A restore
        gives some bytes as the blob already holding them (read back when asked)."""
        head = self.head
        kept = {p: m for p, m in head.modes.items() if data.get(p, b"") is not None}
        version_modes = {**kept, **modes}
        shown = {**{p: m for p, (_, m) in new_bases.items()}, **self.modes, **version_modes}
        for path, content in data.items():  # bytes over a deleted symlink: a regular file now
            if content is not None and path not in version_modes and shown.get(path) == LINK:
                version_modes[path] = shown[path] = DEFAULT_MODE
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
        self, version: Version, data: Mapping[RelPath, object], bases: Mapping[RelPath, Base],
        taken: Mapping[RelPath, int] | None = None, conflicts: Conflicts | None = None,
        changes: Mapping[RelPath, Ends] = {},
    ) -> None:  # fmt: skip
        """Record a version made from `data` (its paths leave the scratch layer) and the bases
        of the paths it touched first (taken now, unless `taken` says when); a merge's version
        brings the `conflicts` it leaves, any later one resolves the paths it stages.
        `changes`: what its bytes share with the head's (`changes_from`), if known."""
        with self.lock:
            if conflicts is not None:
                self.conflicts, self.restaged = conflicts, set()
            else:
                self.restaged.update(p for p in data if p in self.conflicts.paths)
            for path, (base, mode) in bases.items():
                self.bases[path] = base
                self.modes[path] = mode
                self.taken[path] = (taken or {}).get(path) or MOMENTS.tick()
            self.scratch.discard(data)
            self.versions.append(version)
            for path in data:
                self._release_superseded(path, changes.get(path))

    def _release_superseded(self, path: RelPath, shared: Ends | None) -> None:
        """The versions before the head keep the bytes of `path` it replaced only as their
        manifest's blob, read back when asked for (staging.Files): spilled past the memory
        budget, they leave memory; in memory, the blob keeps only their change from the
        head's, when it is small (`shared`: what the two share) and the run of changes before
        it is short. Consecutive versions share one bytes object and one blob per path; the
        walk stops where they no longer do (so each version is released once)."""
        versions = self.versions  # the fork, then at least the head
        older, index = versions[-2].files.held(path), len(versions) - 2
        if older is None:  # deleted, released already, or untouched
            return
        sharing: list[Version] = []
        while index >= 0 and versions[index].files.held(path) is older:
            sharing.append(versions[index])
            index -= 1
        blob = _blob(sharing[0], path)
        if blob is None or blob.size != len(older):
            return
        if blob.data is older:  # in memory, whole
            newer = _blob(versions[-1], path)
            before = _blob(versions[index], path) if index >= 0 else None
            if newer is None or shared is None or not small_change(len(older), shared):
                return
            run = 1  # the changes in a row that end with this one, so reads stay short
            if before is not None and before.change is not None and before.change.newer is blob:
                run += before.change.run
            if run > DELTA_RUN:
                return
            blob.shrink(newer, *shared, run)
        elif blob.in_memory:
            return
        for version in sharing:
            version.files.release(path, blob)

    def absorb(self, written: Mapping[RelPath, Override | None]) -> None:
        """What a run wrote joins the scratch layer (later runs see it)."""
        with self.lock:
            if self.journal is not None:
                self.journal.scratch(self, written)
            self.scratch.absorb(written)

    def rebase(
        self, bases: Mapping[RelPath, Base], taken: Mapping[RelPath, int] | None = None
    ) -> None:
        """New bases (bytes and mode) for touched paths (after accept: the user's files now
        equal the branch's), taken now (a restore says when)."""
        with self.lock:
            moments = {
                p: (taken or {}).get(p) or MOMENTS.tick()
                for p, (base, _) in bases.items()
                if p not in self.bases or self.bases[p] != base
            }  # same bytes: as old
            if self.journal is not None:
                self.journal.rebase(self, bases, moments)
            self.taken.update(moments)
            for path, (base, mode) in bases.items():
                self.bases[path] = base
                self.modes[path] = mode

    def drop(self) -> None:
        with self.lock:
            if self.journal is not None:
                self.journal.drop(self)
            self.status = "dropped"
            self.scratch.clear()

    def unresolved(self) -> dict[RelPath, str]:
        """The paths the merge that made this branch left conflicted (-> how) that no later
        version staged, or whose text still holds a conflict block of its markers."""
        with self.lock:
            files, conflicts = self.head.files, self.conflicts
            return {p: how for p, how in sorted(conflicts.paths.items())
                    if p not in self.restaged
                    or how == "markers" and conflicts.holds_markers(files.get(p))}  # fmt: skip

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


def entry_bytes(version: Version, path: RelPath, folder: Folder) -> bytes | None:
    """Like `file_bytes`, but a symlink of the user's folder is its target, as a version
    holds a link (a merge compares both sides' entries, links included)."""
    if path in version.files:
        return version.files[path]
    return folder.entry(path)[0]


def check_kinds(head: Version, data: Mapping[RelPath, bytes | None], folder: Folder) -> None:
    """StagingError naming the path in the way when `data` puts a file below a file, or a
    file where a folder holds files: in the branch's view after `data` (the user's folder for
    paths the branch never touched). Else the shadow would show the file turned into a folder,
    and accept could not write it."""
    for path, content in data.items():
        if content is None:
            continue
        _check_folders_above(head, data, folder, path)
        if folder.holds_files(path):
            raise StagingError(f"{path}: is a folder in the user's folder; stage the files in "
                               "it, not the folder")  # fmt: skip
        inside = _staged_inside(head, data, path)
        if inside is not None:
            raise StagingError(f"{path}: is a folder in the branch (it holds {inside}); delete "
                               "what it holds first, or stage the file elsewhere")  # fmt: skip


def _check_folders_above(
    head: Version, data: Mapping[RelPath, bytes | None], folder: Folder, path: RelPath
) -> None:
    """Each folder above `path` is one, or absent, or a file deleted in the branch."""
    above = parent(path)
    while above:
        if above in data or above in head.files:  # staged: a file, or deleted (None)
            if (data[above] if above in data else head.files[above]) is not None:
                raise StagingError(f"{path}: {above} is a file in the branch, not a "
                                   f"folder; delete {above} first, or stage the file "
                                   "elsewhere")  # fmt: skip
        elif folder.is_dir(above):
            return  # the user's folder: everything above is a folder too
        elif folder.blocks(above):
            raise StagingError(f"{path}: {above} is a file in the user's folder, not a folder; "
                               f"delete {above} first, or stage the file elsewhere")  # fmt: skip
        above = parent(above)


def _staged_inside(
    head: Version, data: Mapping[RelPath, bytes | None], path: RelPath
) -> RelPath | None:
    """A file the branch holds inside `path` after `data`, when it made `path` a folder."""
    if not isinstance(head.manifest.get(path), Dir):
        return None  # the branch made no folder there: no need to scan what it touched
    prefix = path + "/"
    for inside in sorted({*head.files, *data}):
        if inside.startswith(prefix):
            content = data[inside] if inside in data else head.files.get(inside)
            if content is not None:
                return RelPath(inside)
    return None


def common_base(a: BranchState, b: BranchState, path: RelPath) -> tuple[Base, int]:
    """The base a merge of `a` and `b` takes for `path`, and when it was taken: of the two
    branches' bases, the one taken from the folder first. The folder's history is a line and
    each base a point on it (a first touch, or an accept that moved it), so the older point
    is the one both branches descend from, as git's merge base is; the newer one already
    holds what one side brought (an accepted edit), and a merge over it would undo that."""
    sides = [side for side in (a, b) if path in side.bases]
    first = min(sides, key=lambda side: side.taken.get(path, 0))  # a tie: a's, as before
    return (first.bases[path], first.modes[path]), first.taken.get(path, 0)


def merge(
    merged: BranchState, a: BranchState, b: BranchState, folder: Folder,
    make: Callable[[bytes], Blob],
) -> tuple[RelPath, ...]:  # fmt: skip
    """Stage on the fresh `merged` the three-way merge of `a` and `b` (per hunk, as `git
    merge-file` merges): their common base (`common_base`) becomes its base. Returns the
    conflicted paths. Those both changed in overlapping lines hold git's conflict markers
    (`<<<<<<< a`, `=======`, `>>>>>>> b`: the merge style, no base section). A binary file
    keeps a's bytes, a file one side deleted keeps the other side's. `merged` remembers every
    conflicted path in its version (so also in the durable record), and accept refuses it
    until each is staged again (resolved)."""
    with a.lock, b.lock:
        ours, theirs = a.head, b.head
        paths = sorted({*ours.files, *theirs.files})
        common = {p: common_base(a, b, p) for p in paths}
        bases = {p: base for p, ((base, _), _) in common.items()}
        mine = {p: entry_bytes(ours, p, folder) for p in paths}
        other = {p: entry_bytes(theirs, p, folder) for p in paths}
        modes = {**{p: b.mode(theirs, p, folder) for p in theirs.modes},
                 **{p: a.mode(ours, p, folder) for p in ours.modes}}  # fmt: skip
    plan = merge_plan(mine, bases.get, other.get, (a.name, "base", b.name))
    result = {p: plan.writes.get(p, other[p]) for p in paths}
    result |= {p: plan.marked.get(p, mine[p] if mine[p] is not None else other[p])
               for p in plan.conflicts}  # fmt: skip
    changed = {p: d for p, d in result.items() if d != bases[p] or p in modes}
    how = {p: "markers" if p in plan.marked else "deleted" if None in (mine[p], other[p])
           else "binary" for p in plan.conflicts if p in changed}  # fmt: skip
    conflicts = Conflicts(how, (a.name, b.name))
    if changed:
        merged.stage(changed, f"merge {a.name}@{ours.number} + {b.name}@{theirs.number}",
                     folder, make, {p: common[p][0] for p in changed},
                     {p: m for p, m in modes.items() if p in changed},
                     {p: common[p][1] for p in changed}, conflicts)  # fmt: skip
    return tuple(plan.conflicts)
