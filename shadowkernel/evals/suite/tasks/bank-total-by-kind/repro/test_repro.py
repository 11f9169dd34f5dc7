from bank.account import Account


def test_total_deposits():
    acc = Account("ada")
    acc.deposit(3)
    assert acc.total("deposit") == 3
