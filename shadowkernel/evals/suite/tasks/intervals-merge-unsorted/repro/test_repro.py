from intervals.core import merge


def test_unsorted():
    assert merge([[5, 6], [1, 2], [2, 3]]) == [[1, 3], [5, 6]]
