from intervals.core import overlaps


def test_touching():
    assert overlaps([1, 3], [3, 5])
