"""Which bytes accepting a branch writes, and the three-way merges behind it (pure but for
`text.merge.merge_file`, which asks git where git is installed).

Accept writes a branch's file only where the user's file still equals the branch's base;
where the user changed it too, a clean three-way merge is written instead, and an overlap is a
conflict that stops the whole accept. The same merge joins two branches in `merge_check`,
where a conflicted file holds git's conflict markers. A plan never touches a protected path
(version-control metadata, the user's `protect=` globs: DESIGN invariant 7).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ..paths import RelPath
from ..text.merge import Labels, merge_file


@dataclass(frozen=True)
class Accepted:
    """What accept() did to the user's folder."""

    written: tuple[RelPath, ...]
    deleted: tuple[RelPath, ...]
    merged: tuple[RelPath, ...]  # written with the user's own changes merged in


@dataclass
class Plan:
    """Bytes to write per path (None: delete), which of them are merges, and the conflicts."""

    writes: dict[RelPath, bytes | None] = field(default_factory=dict)
    merged: list[RelPath] = field(default_factory=list)
    conflicts: list[RelPath] = field(default_factory=list)
    # a conflicted path's merge with conflict markers (absent: a binary file, or one side
    # deleted it while the other changed it)
    marked: dict[RelPath, bytes] = field(default_factory=dict)
    protected: list[RelPath] = field(default_factory=list)  # left alone, whatever they hold


def merge_bytes(
    base: bytes | None, mine: bytes | None, theirs: bytes | None, labels: Labels
) -> tuple[bytes | None, bytes | None]:
    """(a clean merge, or None; the merge with conflict markers, or None). A file created on
    both sides merges over an empty base, as git's add/add does."""
    if mine is None or theirs is None:
        return None, None  # deleted on one side while changed on the other
    result = merge_file(base or b"", mine, theirs, labels)
    if result is None:
        return None, None  # binary
    return (None, result.data) if result.conflicts else (result.data, None)


def merge_plan(
    paths: Mapping[RelPath, bytes | None],
    base: Callable[[RelPath], bytes | None],
    theirs: Callable[[RelPath], bytes | None],
    labels: Labels = ("ours", "base", "theirs"),
    protected: Callable[[RelPath], object] = lambda path: None,
) -> Plan:
    """Bring `paths` (path -> my bytes) onto `theirs`, both sides changed from `base`.
    Paths where theirs already equals mine, or mine equals the base, need no write; paths
    `protected` names (a truthy reason) are listed, never planned."""
    plan = Plan()
    for path, mine in sorted(paths.items()):
        if protected(path):
            plan.protected.append(path)
            continue
        ancestor, other = base(path), theirs(path)
        if other == mine or mine == ancestor:
            continue  # nothing to bring over (mine is unchanged: theirs stands)
        if other == ancestor:
            plan.writes[path] = mine
            continue
        clean, marked = merge_bytes(ancestor, mine, other, labels)
        if clean is None:
            plan.conflicts.append(path)
            if marked is not None:
                plan.marked[path] = marked
        else:
            plan.writes[path] = clean
            plan.merged.append(path)
    return plan
