from intervals.core import merge, overlaps


def test_merge_sorted_input():
    assert merge([[1, 3], [2, 5], [7, 8]]) == [[1, 5], [7, 8]]


def test_overlaps_inside():
    assert overlaps([0, 10], [2, 3])
