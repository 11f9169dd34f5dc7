import pytest
from bank.account import Account


def test_negative_deposit():
    with pytest.raises(ValueError):
        Account("ada").deposit(-5)
