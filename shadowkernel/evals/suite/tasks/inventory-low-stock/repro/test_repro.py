from inventory.store import Inventory


def test_at_threshold():
    inv = Inventory()
    inv.add("fig", 1.0, 2)
    assert inv.low_stock(2) == ["fig"]
