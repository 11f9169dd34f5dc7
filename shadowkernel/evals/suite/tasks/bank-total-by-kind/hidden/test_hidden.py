from bank.account import Account


def test_totals():
    acc = Account("ada")
    acc.deposit(3)
    acc.deposit(4)
    acc.withdraw(2)
    assert acc.total("deposit") == 7
    assert acc.total("withdraw") == 2


def test_none():
    assert Account("ada").total("withdraw") == 0
