from intervals.core import total_length


def test_overlap_once():
    assert total_length([[0, 4], [2, 6]]) == 6
