from intervals.core import overlaps


def test_touching_both_ways():
    assert overlaps([1, 3], [3, 5])
    assert overlaps([3, 5], [1, 3])


def test_disjoint():
    assert not overlaps([1, 2], [3, 4])


def test_point_interval():
    assert overlaps([2, 2], [1, 3])
