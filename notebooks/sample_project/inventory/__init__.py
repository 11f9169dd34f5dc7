"""A tiny inventory: items, stock levels and a report."""

from .stock import Item, Stock

__all__ = ["Item", "Stock"]
