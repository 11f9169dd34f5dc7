import pytest
from stats.basic import mean, variance


def test_message():
    with pytest.raises(ValueError, match="mean of empty data"):
        mean([])


def test_variance_empty():
    with pytest.raises(ValueError):
        variance([])
