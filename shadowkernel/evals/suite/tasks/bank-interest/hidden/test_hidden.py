from bank.account import Account


def test_history_and_rounding():
    acc = Account("ada", 10)
    acc.apply_interest(0.0333)
    assert acc.balance == 10.33
    assert acc.history == [("interest", 0.33)]


def test_zero_interest_not_recorded():
    acc = Account("ada", 0)
    acc.apply_interest(0.05)
    assert acc.history == []
