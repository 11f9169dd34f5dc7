from intervals.core import merge


def test_reverse_order():
    assert merge([[8, 9], [4, 6], [1, 5]]) == [[1, 6], [8, 9]]


def test_empty():
    assert merge([]) == []
