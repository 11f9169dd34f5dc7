import pytest
from inventory.store import Inventory


def test_too_many_changes_nothing():
    inv = Inventory()
    inv.add("pear", 1.0, 2)
    with pytest.raises(ValueError):
        inv.remove("pear", 3)
    assert inv.items["pear"].quantity == 2


def test_zero_removes_item():
    inv = Inventory()
    inv.add("pear", 1.0, 2)
    inv.remove("pear", 2)
    assert "pear" not in inv.items


def test_partial():
    inv = Inventory()
    inv.add("pear", 1.0, 5)
    inv.remove("pear", 2)
    assert inv.items["pear"].quantity == 3
