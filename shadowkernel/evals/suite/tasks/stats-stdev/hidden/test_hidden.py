import math

from stats.basic import stdev, variance


def test_population():
    assert stdev([2, 4, 4, 4, 5, 5, 7, 9]) == 2


def test_sample():
    assert variance([1, 2, 3, 4], sample=True) == 5 / 3
    assert math.isclose(stdev([1, 2, 3, 4], sample=True), math.sqrt(5 / 3))
