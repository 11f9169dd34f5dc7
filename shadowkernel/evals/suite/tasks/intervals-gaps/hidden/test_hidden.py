from intervals.core import gaps


def test_unsorted_overlapping():
    assert gaps([[6, 8], [1, 2], [1, 3]], 0, 10) == [[0, 1], [3, 6], [8, 10]]


def test_fully_covered():
    assert gaps([[-5, 20]], 0, 10) == []


def test_nothing_covered():
    assert gaps([], 0, 4) == [[0, 4]]
