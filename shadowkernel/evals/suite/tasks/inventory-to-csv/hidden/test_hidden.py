from inventory.store import Inventory


def test_rows_sorted():
    inv = Inventory()
    inv.add("pear", 1.5, 2)
    inv.add("fig", 0.25, 7)
    assert inv.to_csv() == "name,price,quantity\nfig,0.25,7\npear,1.5,2\n"
