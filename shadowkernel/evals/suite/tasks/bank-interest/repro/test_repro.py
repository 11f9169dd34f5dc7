from bank.account import Account


def test_interest():
    acc = Account("ada", 100)
    acc.apply_interest(0.05)
    assert acc.balance == 105
