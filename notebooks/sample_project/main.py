"""Print a report of a small stock."""

from inventory import Item, Stock
from inventory.report import report

stock = Stock()
stock.add(Item("a1", "apple", 0.5), 4)
stock.add(Item("p2", "pear", 0.75), 2)
print(report(stock))
