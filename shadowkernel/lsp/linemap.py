"""Which base line each line of an edited file comes from: the alignment behind the `new` column.

`line_map(base, new)` works on bytes (LSP's line breaks, \\n, \\r\\n and \\r, are the only ones
`bytes.splitlines` knows) and costs what the edit spans, not what the file holds:

1. the common prefix and suffix are found on the raw bytes (`text.ends`) and cut back to
   whole lines; for one edit, only the lines between them are looked at. Where what is left
   is large (edits in several places), a few lines from its middle found exactly once on
   both sides split it in two, and each half is matched the same way (bytes.find, memcmp);
2. in what is left, lines unique to both sides anchor the alignment (patience diff: the longest
   increasing run of anchors), and the stretches between anchors are aligned the same way, a
   few levels deep;
3. what is left is a hunk of replaced lines, where a new line is paired with a base line the
   edit *touched but did not remove*: equal but for whitespace and a trailing comment, or
   mostly the same characters.

Nothing is quadratic in the file: Python touches the lines of the edited places only (a few
C passes over the bytes per split), and a hunk is paired exhaustively only while small
(`PAIR_CELLS`), greedily in a short window beyond that. The answer is a few runs of lines.
The base's line breaks are found once per base (one bytes object, shared by a branch's
versions: `BASE_BREAKS`), so the lines before and after an edit are counted by bisection,
not by a pass over the file each time (two thirds of a map's cost on more.py).

Caveat: step 3 is a heuristic. A rewritten line that still reads much like the old one keeps
the old line's identity, so a lint with the same code and message on it stays old.
"""

from __future__ import annotations

import bisect
import difflib
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..text.ends import common_prefix, common_suffix, view
from ..text.identity import IdentityCache

PAIR_CELLS = 2_500  # largest hunk (base lines x new lines) paired exhaustively
WINDOW = 8  # how far ahead a greedy pairing looks in a larger hunk
DEPTH = 4  # levels of line anchoring before a stretch is treated as one hunk
SPLITS = 12  # levels of splitting at a probe (up to 4,096 edited places stay cheap)
PROBE_LINES = 4  # a probe: this many lines from the middle of the base's unmatched bytes
SMALL = 4_096  # unmatched regions below this many bytes go straight to the line alignment
SIMILAR = 0.75  # difflib ratio above which an edited line is the same line touched
_SPACE = re.compile(rb"\s+")
BASE_BREAKS: IdentityCache[np.ndarray | None] = IdentityCache(16)  # a base's `\n` offsets
INDEXED = 16 * 1024  # stretches at least this long are counted on the index, when there is one

Run = tuple[int, int, int]  # (first new line, first base line, lines), 1-based


@dataclass(frozen=True)
class LineMap:
    """1-based new line -> 1-based base line, or None for a line the edit added: runs of
    consecutive mapped lines, sorted (as many as the edit has places, not lines)."""

    starts: tuple[int, ...]  # each run's first new line
    bases: tuple[int, ...]  # its first base line
    lengths: tuple[int, ...]

    def get(self, line: int) -> int | None:
        k = bisect.bisect_right(self.starts, line) - 1
        if k < 0 or line >= self.starts[k] + self.lengths[k]:
            return None
        return self.bases[k] + line - self.starts[k]

    def pairs(self, new_lines: int) -> dict[int, int]:
        """Every mapped line of a new text of `new_lines` lines (walks them all: for tests)."""
        lines = (self.get(n) for n in range(1, new_lines + 1))
        return {n: b for n, b in enumerate(lines, 1) if b is not None}


def line_map(base: bytes, new: bytes) -> LineMap:
    """How `new` lines map to `base` lines (see the module docstring)."""
    runs: list[Run] = []
    if len(base) >= INDEXED:
        BASE_BREAKS.get((base,), lambda: _break_offsets(base))
    _match(base, new, 0, len(base), 0, len(new), 1, 1, runs, SPLITS)
    merged: list[list[int]] = []
    for first, origin, length in runs:
        last = merged[-1] if merged else None
        if last and last[0] + last[2] == first and last[1] + last[2] == origin:
            last[2] += length
        elif length:
            merged.append([first, origin, length])
    return LineMap(tuple(r[0] for r in merged), tuple(r[1] for r in merged),
                   tuple(r[2] for r in merged))  # fmt: skip


# -- step 1: equal bytes, in whole lines ---------------------------------------------------------


def _match(a: bytes, b: bytes, a0: int, a1: int, b0: int, b1: int, la: int, lb: int,
           runs: list[Run], splits: int) -> None:  # fmt: skip
    """Align a[a0:a1] with b[b0:b1] (both begin at a line start; la, lb: their first lines)."""
    same = common_prefix(a, view(b), a0, a1, b0, b1)
    if same == a1 - a0 == b1 - b0:
        runs.append((lb, la, _count_lines(a, a0, a1)))
        return
    cut = a.rfind(b"\n", a0, a0 + same) + 1 or a0  # the equal prefix, in whole lines
    head = _count_lines(a, a0, cut)
    runs.append((lb, la, head))
    b0, a0, la, lb = b0 + cut - a0, cut, la + head, lb + head
    a_end, b_end = _suffix_cut(a, b, a0, a1, b0, b1)
    tail = (lb + _count_lines(b, b0, b_end), la + _count_lines(a, a0, a_end),
            _count_lines(a, a_end, a1))  # fmt: skip
    _middle(a, b, a0, a_end, b0, b_end, la, lb, runs, splits)
    runs.append(tail)


def _suffix_cut(a: bytes, b: bytes, a0: int, a1: int, b0: int, b1: int) -> tuple[int, int]:
    """Where the whole lines both regions end with begin (never before a0, b0)."""
    same = common_suffix(a, view(b), a0, a1, b0, b1)
    at, at_b = a1 - same, b1 - same
    if same and at == a0 and (at_b == b0 or b[at_b - 1 : at_b] == b"\n"):
        return at, at_b  # the common tail begins at a line start on both sides
    # Else a line of the tail begins after a \n inside it (the byte before the tail differs).
    found = a.find(b"\n", at, a1) if same else -1
    if found < 0 or found + 1 > a1:
        return a1, b1
    return found + 1, found + 1 + (b1 - a1)


def _middle(a: bytes, b: bytes, a0: int, a1: int, b0: int, b1: int, la: int, lb: int,
            runs: list[Run], splits: int) -> None:  # fmt: skip
    """What differs between two equal stretches: split it at a probe found once on both sides
    (several edited places), else align its lines."""
    if a0 >= a1 or b0 >= b1:
        return  # lines only added, or only removed
    probe = _probe(a, b, a0, a1, b0, b1) if splits and a1 - a0 > SMALL else None
    if probe is None:
        for first, origin, length in _line_runs(a[a0:a1].splitlines(), b[b0:b1].splitlines()):
            runs.append((lb + first, la + origin, length))
        return
    at_a, at_b = probe
    _match(a, b, a0, at_a, b0, at_b, la, lb, runs, splits - 1)
    la, lb = la + _count_lines(a, a0, at_a), lb + _count_lines(b, b0, at_b)
    _match(a, b, at_a, a1, at_b, b1, la, lb, runs, splits - 1)


def _probe(a: bytes, b: bytes, a0: int, a1: int, b0: int, b1: int) -> tuple[int, int] | None:
    """A few whole lines from the middle of a[a0:a1] that occur exactly once there and once in
    b[b0:b1], at a line start: where both sides can be split."""
    begin = a.find(b"\n", (a0 + a1) // 2, a1) + 1
    if not begin:
        return None
    end = begin
    for _ in range(PROBE_LINES):
        end = a.find(b"\n", end, a1) + 1
        if not end:
            return None
    probe = a[begin:end]
    found = b.find(probe, b0, b1)
    if (found < 0 or b.find(probe, found + 1, b1) >= 0
            or a.find(probe, a0, begin) >= 0 or a.find(probe, begin + 1, a1) >= 0
            or not (found == b0 or b[found - 1 : found] == b"\n")):  # fmt: skip
        return None
    return begin, found


def _line_runs(a: list[bytes], b: list[bytes]) -> list[Run]:
    """0-based runs of the line alignment (steps 2 and 3) of two small line lists."""
    runs: list[Run] = []
    for i, j in _align(a, b, 0, len(a), 0, len(b), DEPTH):
        if runs and runs[-1][0] + runs[-1][2] == j and runs[-1][1] + runs[-1][2] == i:
            runs[-1] = (runs[-1][0], runs[-1][1], runs[-1][2] + 1)
        else:
            runs.append((j, i, 1))
    return runs


def _break_offsets(data: bytes) -> np.ndarray | None:
    """Where `data`'s `\n`s are (None: it holds a `\r`, whose breaks are counted instead)."""
    if b"\r" in data:
        return None
    return np.flatnonzero(np.frombuffer(data, np.uint8) == 10)


def _count_lines(data: bytes, begin: int, end: int) -> int:
    """Lines in data[begin:end], which begins at a line start (LSP's breaks: \n, \r\n, \r)."""
    if begin >= end:
        return 0
    index = BASE_BREAKS.cached((data,)) if end - begin >= INDEXED else None
    if index is not None:
        inside = int(np.searchsorted(index, end)) - int(np.searchsorted(index, begin))
        return inside + (data[end - 1] != 10)
    if data.find(b"\r", begin, end) < 0:
        breaks = data.count(b"\n", begin, end)
    else:
        breaks = (data.count(b"\n", begin, end) + data.count(b"\r", begin, end)
                  - data.count(b"\r\n", begin, end))  # fmt: skip
    return breaks + (data[end - 1] not in b"\r\n")


# -- step 2: anchors ------------------------------------------------------------------------------


def _align(a: Sequence[bytes], b: Sequence[bytes], alo: int, ahi: int, blo: int, bhi: int,
           depth: int) -> list[tuple[int, int]]:  # fmt: skip
    """(base index, new index) pairs aligning a[alo:ahi] with b[blo:bhi], in order."""
    pairs: list[tuple[int, int]] = []
    while alo < ahi and blo < bhi and a[alo] == b[blo]:
        pairs.append((alo, blo))
        alo, blo = alo + 1, blo + 1
    tail: list[tuple[int, int]] = []
    while alo < ahi and blo < bhi and a[ahi - 1] == b[bhi - 1]:
        ahi, bhi = ahi - 1, bhi - 1
        tail.append((ahi, bhi))
    anchors = _anchors(a, b, alo, ahi, blo, bhi) if depth and alo < ahi and blo < bhi else []
    if anchors:
        for i, j in anchors:
            pairs += _align(a, b, alo, i, blo, j, depth - 1)
            pairs.append((i, j))
            alo, blo = i + 1, j + 1
        pairs += _align(a, b, alo, ahi, blo, bhi, depth - 1)
    else:
        pairs += _pair_hunk(a, b, alo, ahi, blo, bhi)
    return pairs + tail[::-1]


def _anchors(a: Sequence[bytes], b: Sequence[bytes], alo: int, ahi: int, blo: int,
             bhi: int) -> list[tuple[int, int]]:  # fmt: skip
    """Lines unique on both sides, the longest run of them in the same order on both."""
    in_a, in_b = Counter(a[alo:ahi]), Counter(b[blo:bhi])
    where = {line: i for i, line in enumerate(a[alo:ahi], alo) if in_a[line] == 1}
    candidates = [(where[line], j) for j, line in enumerate(b[blo:bhi], blo)
                  if in_b[line] == 1 and line in where]  # fmt: skip
    return _longest_increasing(candidates)


def _longest_increasing(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The longest subsequence of `pairs` (increasing in the second item) increasing in the
    first too: patience sorting, O(k log k)."""
    tops: list[int] = []  # smallest last base index of a run of each length
    ends: list[int] = []  # index in `pairs` of that run's last pair
    back: list[int] = []  # each pair's predecessor in its run
    for k, (i, _) in enumerate(pairs):
        at = bisect.bisect_left(tops, i)
        back.append(ends[at - 1] if at else -1)
        if at == len(tops):
            tops.append(i)
            ends.append(k)
        else:
            tops[at], ends[at] = i, k
    run, k = [], ends[-1] if ends else -1
    while k >= 0:
        run.append(pairs[k])
        k = back[k]
    return run[::-1]


# -- step 3: lines the edit touched but kept -----------------------------------------------


def _pair_hunk(a: Sequence[bytes], b: Sequence[bytes], alo: int, ahi: int, blo: int,
               bhi: int) -> list[tuple[int, int]]:  # fmt: skip
    """Pairs of touched-but-kept lines in a replaced hunk, in order."""
    if alo >= ahi or blo >= bhi:
        return []
    same = _Same([_code(x) for x in a[alo:ahi]], [_code(y) for y in b[blo:bhi]])
    if (ahi - alo) * (bhi - blo) <= PAIR_CELLS:
        found = _pair_exhaustively(same, ahi - alo, bhi - blo)
    else:
        found, i = [], 0
        for j in range(bhi - blo):
            k = next((k for k in range(i, min(i + WINDOW, ahi - alo)) if same(k, j)), None)
            if k is not None:
                found.append((k, j))
                i = k + 1
    return [(alo + i, blo + j) for i, j in found]


def _pair_exhaustively(same: Callable[[int, int], bool], n: int, m: int) -> list[tuple[int, int]]:
    """The most pairs of same lines, in order (a longest common subsequence under `same`)."""
    best = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            best[i][j] = (best[i + 1][j + 1] + 1 if same(i, j)
                          else max(best[i + 1][j], best[i][j + 1]))  # fmt: skip
    pairs, i, j = [], 0, 0
    while i < n and j < m:
        if same(i, j) and best[i][j] == best[i + 1][j + 1] + 1:
            pairs.append((i, j))
            i, j = i + 1, j + 1
        elif best[i + 1][j] >= best[i][j + 1]:
            i += 1
        else:
            j += 1
    return pairs


class _Same:
    """`same_line` over a hunk's lines, each pair decided once."""

    def __init__(self, old: list[bytes], new: list[bytes]) -> None:
        self.old, self.new = old, new
        self.known: dict[tuple[int, int], bool] = {}

    def __call__(self, i: int, j: int) -> bool:
        if (i, j) not in self.known:
            self.known[i, j] = _same_code(self.old[i], self.new[j])
        return self.known[i, j]


def same_line(old: bytes, new: bytes) -> bool:
    """Is `new` the line `old` after an edit that touched but kept it? Equal without whitespace
    and a trailing comment (a comment appended, indentation changed), or mostly the same
    characters (a name renamed, an argument added)."""
    return _same_code(_code(old), _code(new))


def _same_code(old: bytes, new: bytes) -> bool:
    if old == new:
        return True
    if not old or not new or len(old) + len(new) > 2_000:
        return False
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    # The cheap upper bounds first: most pairs in a hunk are nothing alike.
    return (matcher.real_quick_ratio() >= SIMILAR and matcher.quick_ratio() >= SIMILAR
            and matcher.ratio() >= SIMILAR)  # fmt: skip


def _code(line: bytes) -> bytes:
    """The line without whitespace and without what follows its first `#` (a comment, most
    often; a `#` inside a string cuts both sides alike)."""
    return _SPACE.sub(b"", line.split(b"#", 1)[0])
