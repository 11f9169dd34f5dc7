def merge(intervals):
    """Overlapping or touching intervals merged; the result is sorted by start."""
    result = []
    for start, end in intervals:
        if result and start <= result[-1][1]:
            result[-1][1] = max(result[-1][1], end)
        else:
            result.append([start, end])
    return result


def overlaps(a, b):
    """True when the closed intervals a and b share at least one point."""
    return a[0] < b[1] and b[0] < a[1]


def total_length(intervals):
    """The total length the intervals cover, overlapping parts counted once."""
    return sum(end - start for start, end in intervals)
