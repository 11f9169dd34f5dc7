from intervals.core import total_length


def test_disjoint_and_nested():
    assert total_length([[10, 12], [0, 5], [1, 2]]) == 7


def test_empty():
    assert total_length([]) == 0
