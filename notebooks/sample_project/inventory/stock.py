"""Items and the stock that holds them."""

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Item:
    sku: str
    name: str
    price: float


class Stock:
    def __init__(self) -> None:
        self._levels: dict[str, int] = {}
        self._items: dict[str, Item] = {}

    def add(self, item: Item, count: int = 1) -> None:
        self._items[item.sku] = item
        self._levels[item.sku] = self._levels.get(item.sku, 0) + count

    def remove(self, sku: str, count: int = 1) -> None:
        self._levels[sku] = self._levels[sku] - count

    def level(self, sku: str) -> int:
        return self._levels.get(sku, 0)

    def value(self) -> float:
        return sum(self._items[sku].price * n for sku, n in self._levels.items())
