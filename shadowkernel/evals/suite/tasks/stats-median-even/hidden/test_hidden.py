from stats.basic import median


def test_even_unsorted():
    assert median([10, 1, 4, 3]) == 3.5


def test_odd_still_works():
    assert median([5, 1, 3]) == 3
