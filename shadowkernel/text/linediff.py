"""A line diff that chooses what git's does (pure): Myers' O(ND) diff as xdiff runs it.

The pure three-way merge (`merge.merge3`) must see the same hunks `git merge-file` sees, and
between equally short diffs git picks one by its own steps, so this follows them:

1. lines common to both ends are set aside;
2. a line that does not occur in the other file is changed, with no search; one that occurs
   too often (at least about the square root of the file's length) is changed too when it
   sits in a run of such lines (the rest of the run has no match, or many);
3. the remaining lines are compared by Myers' divide and conquer on the middle snake;
4. each group of changed lines slides up as far as equal lines allow, then down as far as
   they allow, and ends where it lines up with a change of the other file if it can pass one
   (no indent heuristic: `git merge-file` uses none).

Past 256 edits in one search, git stops looking for the shortest diff and takes a good
snake (20 equal lines far along a path) or the furthest-reaching paths; so does this one
(`tests/test_merge_git.py` reaches the second on rewritten files; the first did not occur in
the tested cases). Lines are compared as whole strings, line ends included.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

Hunk = tuple[int, int, int, int]  # (start in a, start in b, lines in a, lines in b)

_FAR = 1 << 62
_WINDOW = 100  # how far around a frequent line its run is looked at
_RUN = 4  # a frequent line in a run goes when fewer than 1 in _RUN lines of it is frequent


def split(text: str) -> list[str]:
    """Lines as git splits them: after each `\\n` only, with their line ends."""
    lines = [line + "\n" for line in text.split("\n")]
    lines[-1] = lines[-1][:-1]
    return lines if lines[-1] else lines[:-1]


def diff(a: Sequence[str], b: Sequence[str]) -> list[Hunk]:
    """The hunks turning `a` into `b`, in order."""
    changed_a, changed_b = [False] * len(a), [False] * len(b)
    head, tail = _common_ends(a, b)
    kept_a = _kept(a, head, len(a) - tail, Counter(b), changed_a)
    kept_b = _kept(b, head, len(b) - tail, Counter(a), changed_b)
    x, y = [a[i] for i in kept_a], [b[j] for j in kept_b]
    marks_x, marks_y = [False] * len(x), [False] * len(y)
    _compare(x, 0, len(x), y, 0, len(y), marks_x, marks_y)
    for marks, kept, changed in ((marks_x, kept_a, changed_a), (marks_y, kept_b, changed_b)):
        for k, index in enumerate(kept):
            changed[index] = changed[index] or marks[k]
    _compact(a, changed_a, changed_b)
    _compact(b, changed_b, changed_a)
    return _hunks(changed_a, changed_b)


def _common_ends(a: Sequence[str], b: Sequence[str]) -> tuple[int, int]:
    limit = min(len(a), len(b))
    head = 0
    while head < limit and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < limit - head and a[len(a) - 1 - tail] == b[len(b) - 1 - tail]:
        tail += 1
    return head, tail


def _kept(
    lines: Sequence[str], start: int, end: int, other: Counter[str], changed: list[bool]
) -> list[int]:
    """Indexes of lines [start, end) worth comparing; the others are marked changed."""
    many = min(_bogo_sqrt(len(lines)), 1024)
    matches = {i: other[lines[i]] for i in range(start, end)}
    kinds = {i: 0 if n == 0 else 2 if n >= many else 1 for i, n in matches.items()}
    kept = []
    for i in range(start, end):
        if kinds[i] == 1 or (kinds[i] == 2 and not _in_unmatched_run(kinds, i, start, end - 1)):
            kept.append(i)
        else:
            changed[i] = True
    return kept


def _bogo_sqrt(n: int) -> int:
    root = 1
    while n > 0:
        n >>= 2
        root <<= 1
    return root


def _in_unmatched_run(kinds: dict[int, int], i: int, first: int, last: int) -> bool:
    """Whether frequent line `i` sits among lines without a match, few of them frequent."""
    first, last = max(first, i - _WINDOW), min(last, i + _WINDOW)
    before = _run(kinds, range(i - 1, first - 1, -1))
    after = _run(kinds, range(i + 1, last + 1))
    if before[0] == 0 or after[0] == 0:
        return False
    unmatched, frequent = before[0] + after[0], before[1] + after[1] + 2  # as xdiff counts
    return frequent * _RUN < frequent + unmatched


def _run(kinds: dict[int, int], indexes: range) -> tuple[int, int]:
    """(lines without a match, frequent lines) in the run next to a line."""
    unmatched = frequent = 0
    for k in indexes:
        if kinds[k] == 0:
            unmatched += 1
        elif kinds[k] == 2:
            frequent += 1
        else:
            break
    return unmatched, frequent


def _compare(x: Sequence[str], lo1: int, hi1: int, y: Sequence[str], lo2: int, hi2: int,
             marks_x: list[bool], marks_y: list[bool]) -> None:  # fmt: skip
    """Myers' divide and conquer: mark what of x[lo1:hi1] and y[lo2:hi2] is not common. A
    half split off by a true middle snake is searched exhaustively ("minimal"); the others
    may take xdiff's shortcuts."""
    search = _Search(x, y, max(_bogo_sqrt(len(x) + len(y) + 3), _MAX_COST_MIN))
    stack = [(lo1, hi1, lo2, hi2, False)]
    while stack:
        lo1, hi1, lo2, hi2, minimal = stack.pop()
        while lo1 < hi1 and lo2 < hi2 and x[lo1] == y[lo2]:
            lo1, lo2 = lo1 + 1, lo2 + 1
        while lo1 < hi1 and lo2 < hi2 and x[hi1 - 1] == y[hi2 - 1]:
            hi1, hi2 = hi1 - 1, hi2 - 1
        if lo1 == hi1:
            marks_y[lo2:hi2] = [True] * (hi2 - lo2)
        elif lo2 == hi2:
            marks_x[lo1:hi1] = [True] * (hi1 - lo1)
        else:
            mid1, mid2, min_lo, min_hi = search.split(lo1, hi1, lo2, hi2, minimal)
            stack += [(mid1, hi1, mid2, hi2, min_hi), (lo1, mid1, lo2, mid2, min_lo)]


_SNAKE = 20  # a run of equal lines this long is a "good" snake
_HEURISTIC_MIN_COST = 256  # from this many edits, a split may be taken at a good snake
_MAX_COST_MIN = 256  # the least number of edits after which the search stops anyway
_K_HEURISTIC = 4


class _Search:
    """The middle-snake search of one comparison: x and y, and its give-up cost."""

    def __init__(self, x: Sequence[str], y: Sequence[str], max_cost: int) -> None:
        self.x, self.y, self.max_cost = x, y, max_cost

    def split(self, lo1: int, hi1: int, lo2: int, hi2: int,
              minimal: bool) -> tuple[int, int, bool, bool]:  # fmt: skip
        """(i, j) where to split the box, and whether each half must be searched minimally.
        Searched from both corners at once, diagonal by diagonal (k = index in x minus
        index in y); past a cost, a good snake or the furthest-reaching paths decide."""
        x, y = self.x, self.y
        low, high = lo1 - hi2, hi1 - lo2
        fmid, bmid = lo1 - lo2, hi1 - hi2
        odd = (fmid - bmid) & 1
        forward, backward = {fmid: lo1}, {bmid: hi1}
        fmin = fmax = fmid
        bmin = bmax = bmid
        cost = 0
        while True:
            cost += 1
            snake = False
            fmin, fmax = _widen(forward, fmin, fmax, low, high, -1)
            for k in range(fmax, fmin - 1, -2):
                i = forward[k - 1] + 1 if forward[k - 1] >= forward[k + 1] else forward[k + 1]
                start, j = i, i - k
                while i < hi1 and j < hi2 and x[i] == y[j]:
                    i, j = i + 1, j + 1
                snake = snake or i - start > _SNAKE
                forward[k] = i
                if odd and bmin <= k <= bmax and backward[k] <= i:
                    return i, j, True, True
            bmin, bmax = _widen(backward, bmin, bmax, low, high, _FAR)
            for k in range(bmax, bmin - 1, -2):
                i = backward[k - 1] if backward[k - 1] < backward[k + 1] else backward[k + 1] - 1
                start, j = i, i - k
                while i > lo1 and j > lo2 and x[i - 1] == y[j - 1]:
                    i, j = i - 1, j - 1
                snake = snake or start - i > _SNAKE
                backward[k] = i
                if not odd and fmin <= k <= fmax and i <= forward[k]:
                    return i, j, True, True
            if minimal:
                continue
            if snake and cost > _HEURISTIC_MIN_COST:
                found = self._good_snake(forward, fmin, fmax, fmid, cost, (lo1, hi1, lo2, hi2))
                if found:
                    return found[0], found[1], True, False
                found = self._good_snake_back(backward, bmin, bmax, bmid, cost,
                                              (lo1, hi1, lo2, hi2))  # fmt: skip
                if found:
                    return found[0], found[1], False, True
            if cost >= self.max_cost:
                return _furthest(forward, fmin, fmax, backward, bmin, bmax, (lo1, hi1, lo2, hi2))

    def _good_snake(self, forward: dict[int, int], fmin: int, fmax: int, fmid: int, cost: int,
                    box: tuple[int, int, int, int]) -> tuple[int, int] | None:  # fmt: skip
        """The forward path that got furthest beyond its diagonal's distance and ends in
        `_SNAKE` equal lines."""
        lo1, hi1, lo2, hi2 = box
        best, found = 0, None
        for k in range(fmax, fmin - 1, -2):
            i = forward[k]
            j = i - k
            value = (i - lo1) + (j - lo2) - abs(k - fmid)
            inside = lo1 + _SNAKE <= i < hi1 and lo2 + _SNAKE <= j < hi2
            if value > max(_K_HEURISTIC * cost, best) and inside and self._equal(i, j, -1):
                best, found = value, (i, j)
        return found

    def _good_snake_back(self, backward: dict[int, int], bmin: int, bmax: int, bmid: int,
                         cost: int, box: tuple[int, int, int, int],
                         ) -> tuple[int, int] | None:  # fmt: skip
        """The same for the backward paths: they start with `_SNAKE` equal lines."""
        lo1, hi1, lo2, hi2 = box
        best, found = 0, None
        for k in range(bmax, bmin - 1, -2):
            i = backward[k]
            j = i - k
            value = (hi1 - i) + (hi2 - j) - abs(k - bmid)
            inside = lo1 < i <= hi1 - _SNAKE and lo2 < j <= hi2 - _SNAKE
            if value > max(_K_HEURISTIC * cost, best) and inside and self._equal(i, j, 1):
                best, found = value, (i, j)
        return found

    def _equal(self, i: int, j: int, step: int) -> bool:
        """Whether the `_SNAKE` lines before (step -1) or from (step 1) i and j are equal."""
        offsets = range(-1, -_SNAKE - 1, -1) if step < 0 else range(_SNAKE)
        return all(self.x[i + n] == self.y[j + n] for n in offsets)


def _furthest(forward: dict[int, int], fmin: int, fmax: int, backward: dict[int, int],
              bmin: int, bmax: int,
              box: tuple[int, int, int, int]) -> tuple[int, int, bool, bool]:  # fmt: skip
    """Give up on the shortest path: split where the furthest-reaching path of either
    direction got (measured by i + j)."""
    lo1, hi1, lo2, hi2 = box
    fbest, fbest_i = -1, -1
    for k in range(fmax, fmin - 1, -2):
        i = min(forward[k], hi1)
        j = i - k
        if hi2 < j:
            i, j = hi2 + k, hi2
        if fbest < i + j:
            fbest, fbest_i = i + j, i
    bbest, bbest_i = _FAR, _FAR
    for k in range(bmax, bmin - 1, -2):
        i = max(lo1, backward[k])
        j = i - k
        if j < lo2:
            i, j = lo2 + k, lo2
        if i + j < bbest:
            bbest, bbest_i = i + j, i
    if (hi1 + hi2) - bbest < fbest - (lo1 + lo2):
        return fbest_i, fbest - fbest_i, True, False
    return bbest_i, bbest - bbest_i, False, True


def _widen(v: dict[int, int], kmin: int, kmax: int, low: int, high: int,
           outside: int) -> tuple[int, int]:  # fmt: skip
    """One more step of the diagonals searched, with a sentinel just past each new edge."""
    if kmin > low:
        kmin -= 1
        v[kmin - 1] = outside
    else:
        kmin += 1
    if kmax < high:
        kmax += 1
        v[kmax + 1] = outside
    else:
        kmax -= 1
    return kmin, kmax


class _Group:
    """A run of changed lines [start, end) of one file (empty between unchanged lines)."""

    def __init__(self, changed: list[bool]) -> None:
        self.changed, self.start, self.end = changed, 0, 0
        self._extend()

    def _extend(self) -> None:
        while self.end < len(self.changed) and self.changed[self.end]:
            self.end += 1

    def next(self) -> bool:
        if self.end == len(self.changed):
            return False
        self.start = self.end = self.end + 1
        self._extend()
        return True

    def previous(self) -> bool:
        if self.start == 0:
            return False
        self.end = self.start = self.start - 1
        while self.start > 0 and self.changed[self.start - 1]:
            self.start -= 1
        return True

    def slide_down(self, lines: Sequence[str]) -> bool:
        if self.end < len(lines) and lines[self.start] == lines[self.end]:
            self.changed[self.start], self.changed[self.end] = False, True
            self.start, self.end = self.start + 1, self.end + 1
            self._extend()
            return True
        return False

    def slide_up(self, lines: Sequence[str]) -> bool:
        if self.start > 0 and lines[self.start - 1] == lines[self.end - 1]:
            self.start, self.end = self.start - 1, self.end - 1
            self.changed[self.start], self.changed[self.end] = True, False
            while self.start > 0 and self.changed[self.start - 1]:
                self.start -= 1
            return True
        return False


def _compact(lines: Sequence[str], changed: list[bool], other: list[bool]) -> None:
    """Slide each group of changes up, then down as far as it goes (merging groups it meets),
    then back up to line up with the other file's last change it passed, if any."""
    group, theirs = _Group(changed), _Group(other)
    while True:
        if group.end > group.start:
            earliest, matching = _slide_fully(lines, group, theirs)
            if group.end != earliest and matching:
                while theirs.end == theirs.start:
                    group.slide_up(lines)
                    theirs.previous()
        if not group.next():
            return
        theirs.next()


def _slide_fully(lines: Sequence[str], group: _Group, theirs: _Group) -> tuple[int, bool]:
    while True:
        size = group.end - group.start
        matching = False
        while group.slide_up(lines):
            theirs.previous()
        earliest = group.end
        matching = theirs.end > theirs.start
        while group.slide_down(lines):
            theirs.next()
            matching = matching or theirs.end > theirs.start
        if size == group.end - group.start:
            return earliest, matching


def _hunks(changed_a: list[bool], changed_b: list[bool]) -> list[Hunk]:
    out: list[Hunk] = []
    i, j = len(changed_a), len(changed_b)
    while i > 0 or j > 0:
        if (i > 0 and changed_a[i - 1]) or (j > 0 and changed_b[j - 1]):
            end_i, end_j = i, j
            while i > 0 and changed_a[i - 1]:
                i -= 1
            while j > 0 and changed_b[j - 1]:
                j -= 1
            out.append((i, j, end_i - i, end_j - j))
        else:
            i, j = i - 1, j - 1
    out.reverse()
    return out
