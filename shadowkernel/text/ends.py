"""What two texts (or two byte strings) share at their ends: the length of their common prefix
and suffix, found by galloping then bisection on `startswith`/`endswith` at an offset (memcmp
in C, not a loop over characters; only the probe of one side is copied, and no further than
the shared part reaches; bytes' probes are views, not copies). An incremental `didChange`
(lsp/documents) and a version recorded as its change from the previous one (workspace/staging,
workspace/durable) both cost O(len) compares this way."""

from __future__ import annotations

from typing import AnyStr, cast

GALLOP = 4_096  # the first probe's length; each equal probe doubles the next one


def common_prefix(a: AnyStr, b: AnyStr, a0: int, a1: int, b0: int, b1: int) -> int:
    """Length of the common prefix of a[a0:a1] and b[b0:b1]."""
    low, high, step = 0, min(a1 - a0, b1 - b0), GALLOP
    while low < high:  # gallop: the shared part is usually long (an edit somewhere inside)
        middle = min(low + step, high)
        if not a.startswith(b[b0 + low : b0 + middle], a0 + low):
            high = middle - 1
            break
        low, step = middle, step * 2
    while low < high:
        middle = (low + high + 1) // 2
        if a.startswith(b[b0 + low : b0 + middle], a0 + low):
            low = middle
        else:
            high = middle - 1
    return low


def common_suffix(a: AnyStr, b: AnyStr, a0: int, a1: int, b0: int, b1: int) -> int:
    """Length of the common suffix of a[a0:a1] and b[b0:b1]."""
    low, high, step = 0, min(a1 - a0, b1 - b0), GALLOP
    while low < high:
        middle = min(low + step, high)
        if not a.endswith(b[b1 - middle : b1 - low], a0, a1 - low):
            high = middle - 1
            break
        low, step = middle, step * 2
    while low < high:
        middle = (low + high + 1) // 2
        if a.endswith(b[b1 - middle : b1 - low], a0, a1 - low):
            low = middle
        else:
            high = middle - 1
    return low


def ends(a: AnyStr, b: AnyStr) -> tuple[int, int]:
    """(prefix, suffix): how much `a` and `b` share at their start and, after it, at their end
    (the two never overlap: prefix + suffix <= min(len(a), len(b)))."""
    probes = view(b) if isinstance(b, bytes) else b
    prefix = common_prefix(a, probes, 0, len(a), 0, len(b))
    return prefix, common_suffix(a, probes, prefix, len(a), prefix, len(b))


def view(data: bytes) -> bytes:
    """`data` as a memoryview, for the probe side above: its slices are views, not copies
    (`startswith`/`endswith` take any buffer). Typed as bytes, which it reads as."""
    return cast(bytes, memoryview(data))
