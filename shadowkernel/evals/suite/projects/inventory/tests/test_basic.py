from inventory.store import Inventory


def test_add_twice_adds_up():
    inv = Inventory()
    inv.add("apple", 0.5, 3)
    inv.add("apple", 0.5, 2)
    assert inv.items["apple"].quantity == 5
