import pytest
from bank.account import Account, InsufficientFunds, transfer


def test_overdraw():
    with pytest.raises(InsufficientFunds):
        transfer(Account("a", 1), Account("b"), 5)
