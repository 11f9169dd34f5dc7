from inventory.store import Inventory


def test_header():
    assert Inventory().to_csv() == "name,price,quantity\n"
