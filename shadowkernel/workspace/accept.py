"""Which bytes accepting a branch writes, and the three-way merges behind it (pure).

Accept writes a branch's file only where the user's file still equals the branch's base;
where the user changed it too, a clean three-way merge is written instead, and an overlap is a
conflict that stops the whole accept. The same merge joins two branches in `merge_check`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ..paths import RelPath
from ..text.merge import merge3


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


def merge_bytes(base: bytes | None, mine: bytes | None, theirs: bytes | None) -> bytes | None:
    """A clean three-way merge of text files, or None (a conflict, or not mergeable)."""
    if base is None or mine is None or theirs is None:
        return None  # created or deleted on one side while changed on the other
    try:
        texts = [d.decode("utf-8") for d in (base, mine, theirs)]
    except UnicodeDecodeError:
        return None
    result = merge3(*texts)
    return None if result.text is None else result.text.encode("utf-8")


def merge_plan(
    paths: Mapping[RelPath, bytes | None],
    base: Callable[[RelPath], bytes | None],
    theirs: Callable[[RelPath], bytes | None],
) -> Plan:
    """Bring `paths` (path -> my bytes) onto `theirs`, both sides changed from `base`.
    Paths where theirs already equals mine, or mine equals the base, need no write."""
    plan = Plan()
    for path, mine in sorted(paths.items()):
        ancestor, other = base(path), theirs(path)
        if other == mine or mine == ancestor:
            continue  # nothing to bring over (mine is unchanged: theirs stands)
        if other == ancestor:
            plan.writes[path] = mine
            continue
        result = merge_bytes(ancestor, mine, other)
        if result is None:
            plan.conflicts.append(path)
        else:
            plan.writes[path] = result
            plan.merged.append(path)
    return plan
