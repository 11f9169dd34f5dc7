from inventory.store import Inventory


def test_sorted_and_inclusive():
    inv = Inventory()
    inv.add("pear", 1.0, 1)
    inv.add("fig", 1.0, 2)
    inv.add("kiwi", 1.0, 9)
    assert inv.low_stock(2) == ["fig", "pear"]
