"""Which base line each line of an edited file comes from: the alignment behind the `new` column.

`line_map(base, new)` works on bytes (LSP's line breaks, \\n, \\r\\n and \\r, are the only ones
`bytes.splitlines` knows) and costs what the edit spans, not what the file holds:

1. the common prefix and suffix are found on the raw bytes (a few memcmp calls) and cut back to
   whole lines; for one edit, only the lines between them are looked at;
2. in that middle, lines unique to both sides anchor the alignment (patience diff: the longest
   increasing run of anchors), and the stretches between anchors are aligned the same way, a
   few levels deep;
3. what is left is a hunk of replaced lines, where a new line is paired with a base line the
   edit *touched but did not remove*: equal but for whitespace and a trailing comment, or
   mostly the same characters.

Nothing is quadratic in the file: a hunk is paired exhaustively only while small (`PAIR_CELLS`),
greedily in a short window beyond that.

Caveat: step 3 is a heuristic. A rewritten line that still reads much like the old one keeps
the old line's identity, so a lint with the same code and message on it stays old.
"""

from __future__ import annotations

import bisect
import difflib
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

PAIR_CELLS = 2_500  # largest hunk (base lines x new lines) paired exhaustively
WINDOW = 8  # how far ahead a greedy pairing looks in a larger hunk
DEPTH = 4  # levels of anchoring before a stretch is treated as one hunk
SIMILAR = 0.75  # difflib ratio above which an edited line is the same line touched
_SPACE = re.compile(rb"\s+")


@dataclass(frozen=True)
class LineMap:
    """1-based new line -> 1-based base line, or None for a line the edit added.

    The first `prefix` lines are the same on both sides; then come `base_middle` base lines
    and `new_middle` new lines, mapped by `middle` (new line -> base line, for those that have
    one); every later line is the same on both sides again, shifted.
    """

    prefix: int
    base_middle: int
    new_middle: int
    middle: dict[int, int] = field(default_factory=dict)

    def get(self, line: int) -> int | None:
        if line <= self.prefix:
            return line
        if line > self.prefix + self.new_middle:
            return line + self.base_middle - self.new_middle
        return self.middle.get(line)

    def pairs(self, new_lines: int) -> dict[int, int]:
        """Every mapped line of a new text of `new_lines` lines (walks them all: for tests)."""
        lines = (self.get(n) for n in range(1, new_lines + 1))
        return {n: b for n, b in enumerate(lines, 1) if b is not None}


def line_map(base: bytes, new: bytes) -> LineMap:
    """How `new` lines map to `base` lines (see the module docstring)."""
    start = _prefix_cut(base, new)
    base_end, new_end = _suffix_cut(base, new, start)
    prefix = _count_lines(base, start)
    a = base[start:base_end].splitlines()
    b = new[start:new_end].splitlines()
    middle = {prefix + j + 1: prefix + i + 1
              for i, j in _align(a, b, 0, len(a), 0, len(b), DEPTH)}  # fmt: skip
    return LineMap(prefix, len(a), len(b), middle)


# -- step 1: the common prefix and suffix, in whole lines ---------------------------------------


def _common_prefix(a: bytes, b: bytes) -> int:
    """Length of the longest common prefix (memcmp over chunks that double, then halve)."""
    return _common_run(a, b, lambda data, low, high: data[low:high])


def _common_suffix(a: bytes, b: bytes) -> int:
    return _common_run(a, b, lambda data, low, high: data[len(data) - high : len(data) - low])


def _common_run(a: bytes, b: bytes, chunk: Callable[[bytes, int, int], bytes]) -> int:
    n, low, step, growing = min(len(a), len(b)), 0, 4096, True
    while low < n:
        high = min(low + step, n)
        if chunk(a, low, high) == chunk(b, low, high):
            low = high
            step = step * 2 if growing else step
        elif high - low == 1:
            return low
        else:
            step, growing = max((high - low) // 2, 1), False
    return low


def _prefix_cut(a: bytes, b: bytes) -> int:
    """The end of the last whole line both start with (just after a \\n)."""
    common = _common_prefix(a, b)
    if common == len(a) == len(b):
        return common
    return a.rfind(b"\n", 0, common) + 1


def _suffix_cut(a: bytes, b: bytes, start: int) -> tuple[int, int]:
    """Where the whole lines both end with begin, in `a` and in `b` (never before `start`)."""
    limit = min(len(a), len(b)) - start
    common = min(_common_suffix(a, b), limit) if limit > 0 else 0
    at, at_b = len(a) - common, len(b) - common
    if common and at == start and b[at_b - 1 : at_b] in (b"\n", b""):
        return at, at_b  # the common tail begins at a line start on both sides
    # Else a line of the tail begins after a \n inside it (the byte before the tail differs).
    found = a.find(b"\n", at) if common else -1
    if found < 0:
        return len(a), len(b)
    return found + 1, found + 1 + len(b) - len(a)


def _count_lines(data: bytes, end: int) -> int:
    """Line breaks in data[:end] (LSP's: \n, \r\n, \r)."""
    if data.find(b"\r", 0, end) < 0:
        return data.count(b"\n", 0, end)
    return data.count(b"\n", 0, end) + data.count(b"\r", 0, end) - data.count(b"\r\n", 0, end)


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
