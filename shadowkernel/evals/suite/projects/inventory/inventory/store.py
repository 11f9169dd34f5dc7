import json
from dataclasses import dataclass, field


@dataclass
class Item:
    name: str
    price: float
    quantity: int = 0


@dataclass
class Inventory:
    items: dict = field(default_factory=dict)

    def add(self, name, price, quantity=1):
        if name in self.items:
            self.items[name].quantity += quantity
        else:
            self.items[name] = Item(name, price, quantity)

    def remove(self, name, quantity=1):
        item = self.items[name]
        item.quantity -= quantity

    def total_value(self):
        total = 0
        for item in self.items.values():
            total += item.price
        return total

    def low_stock(self, threshold):
        return [item.name for item in self.items.values() if item.quantity < threshold]
