from bank.account import Account


def test_deposit_then_withdraw():
    acc = Account("ada", 10)
    acc.deposit(5)
    acc.withdraw(3)
    assert acc.balance == 12
    assert acc.history == [("deposit", 5), ("withdraw", 3)]
