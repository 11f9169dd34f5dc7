from inventory.store import Inventory


def test_quantity_counts():
    inv = Inventory()
    inv.add("apple", 0.5, 3)
    assert inv.total_value() == 1.5
