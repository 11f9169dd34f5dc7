from intervals import core


def test_gaps():
    assert core.gaps([[2, 3]], 0, 5) == [[0, 2], [3, 5]]
