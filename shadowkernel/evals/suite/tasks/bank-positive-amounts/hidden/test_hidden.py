import pytest
from bank.account import Account


@pytest.mark.parametrize("amount", [0, -1])
def test_deposit_rejects(amount):
    acc = Account("ada", 10)
    with pytest.raises(ValueError):
        acc.deposit(amount)
    assert acc.balance == 10 and acc.history == []


@pytest.mark.parametrize("amount", [0, -1])
def test_withdraw_rejects(amount):
    acc = Account("ada", 10)
    with pytest.raises(ValueError):
        acc.withdraw(amount)
    assert acc.balance == 10 and acc.history == []
