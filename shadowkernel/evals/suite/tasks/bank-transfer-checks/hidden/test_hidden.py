import pytest
from bank.account import Account, InsufficientFunds, transfer


def test_overdraw_changes_nothing():
    a, b = Account("a", 1), Account("b", 0)
    with pytest.raises(InsufficientFunds):
        transfer(a, b, 5)
    assert (a.balance, b.balance) == (1, 0)
    assert a.history == [] and b.history == []


def test_history():
    a, b = Account("a", 10), Account("b", 0)
    transfer(a, b, 4)
    assert a.history == [("withdraw", 4)]
    assert b.history == [("deposit", 4)]
