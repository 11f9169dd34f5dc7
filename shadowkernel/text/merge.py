"""Pure three-way merge of texts, by lines, for accepting a branch the user changed meanwhile.

`merge3(base, ours, theirs)`: each side's changes against `base` are hunks (a base line range
and its replacement). Hunks of both sides that overlap or touch form one region; a region
changed by one side only takes that side, one changed identically by both takes it once, and
anything else is a conflict. Adjacent changes count as a conflict (as in git): a merge that
silently interleaves two edits of neighbouring lines is the kind of surprise accept must not
produce. Lines end where `positions` says (`\\n`, `\\r\\n`, `\\r`).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from .positions import split_lines


@dataclass(frozen=True)
class Change:
    start: int  # base line range [start, end) replaced by `lines`
    end: int
    lines: tuple[str, ...]
    side: int  # 0: ours, 1: theirs


@dataclass(frozen=True)
class Merge:
    text: str | None  # None when there are conflicts
    conflicts: tuple[tuple[int, int], ...]  # 1-based base line ranges (inclusive start, end)

    @property
    def clean(self) -> bool:
        return self.text is not None


def changes(base: list[str], other: list[str], side: int) -> list[Change]:
    matcher = difflib.SequenceMatcher(a=base, b=other, autojunk=False)
    return [
        Change(i1, i2, tuple(other[j1:j2]), side)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes()
        if tag != "equal"
    ]


def regions(all_changes: list[Change]) -> list[list[Change]]:
    """Group changes whose base ranges overlap or touch, in base order."""
    groups: list[list[Change]] = []
    end = -1
    for change in sorted(all_changes, key=lambda c: (c.start, c.end, c.side)):
        if groups and change.start <= end:
            groups[-1].append(change)
            end = max(end, change.end)
        else:
            groups.append([change])
            end = change.end
    return groups


def side_text(base: list[str], group: list[Change], side: int, lo: int, hi: int) -> list[str]:
    """Base lines [lo, hi) with one side's changes of the group applied."""
    out, position = [], lo
    for change in (c for c in group if c.side == side):
        out.extend(base[position : change.start])
        out.extend(change.lines)
        position = change.end
    out.extend(base[position:hi])
    return out


def merge3(base: str, ours: str, theirs: str) -> Merge:
    b = split_lines(base, keepends=True)
    both = changes(b, split_lines(ours, keepends=True), 0)
    both += changes(b, split_lines(theirs, keepends=True), 1)
    out: list[str] = []
    conflicts: list[tuple[int, int]] = []
    position = 0
    for group in regions(both):
        lo, hi = min(c.start for c in group), max(c.end for c in group)
        out.extend(b[position:lo])
        mine, yours = side_text(b, group, 0, lo, hi), side_text(b, group, 1, lo, hi)
        sides = {c.side for c in group}
        if sides == {0} or mine == yours:
            out.extend(mine)
        elif sides == {1}:
            out.extend(yours)
        else:
            conflicts.append((lo + 1, max(hi, lo + 1)))
        position = hi
    out.extend(b[position:])
    if conflicts:
        return Merge(None, tuple(conflicts))
    return Merge("".join(out), ())
