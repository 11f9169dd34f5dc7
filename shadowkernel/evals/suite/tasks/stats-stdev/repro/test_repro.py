from stats import basic


def test_stdev():
    assert basic.stdev([2, 4, 4, 4, 5, 5, 7, 9]) == 2
