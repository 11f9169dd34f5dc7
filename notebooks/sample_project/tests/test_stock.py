from inventory import Item, Stock


def test_add_and_value():
    stock = Stock()
    stock.add(Item("a1", "apple", 0.5), 4)
    assert stock.level("a1") == 4
    assert stock.value() == 2.0


def test_remove_below_zero_is_refused():
    stock = Stock()
    stock.add(Item("a1", "apple", 0.5), 1)
    stock.remove("a1", 2)
    assert stock.level("a1") == 0
