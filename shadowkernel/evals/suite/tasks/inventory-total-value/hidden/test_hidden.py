from inventory.store import Inventory


def test_several_items():
    inv = Inventory()
    inv.add("apple", 0.5, 4)
    inv.add("melon", 3.0, 2)
    assert inv.total_value() == 8.0


def test_empty():
    assert Inventory().total_value() == 0
