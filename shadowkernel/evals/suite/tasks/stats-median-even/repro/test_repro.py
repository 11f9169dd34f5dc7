from stats.basic import median


def test_even():
    assert median([1, 2, 3, 4]) == 2.5
