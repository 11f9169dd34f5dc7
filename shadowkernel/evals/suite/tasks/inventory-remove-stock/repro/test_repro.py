import pytest
from inventory.store import Inventory


def test_cannot_go_negative():
    inv = Inventory()
    inv.add("pear", 1.0, 1)
    with pytest.raises(ValueError):
        inv.remove("pear", 2)
