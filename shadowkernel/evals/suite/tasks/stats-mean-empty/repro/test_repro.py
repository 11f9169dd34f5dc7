import pytest
from stats.basic import mean


def test_empty():
    with pytest.raises(ValueError):
        mean([])
