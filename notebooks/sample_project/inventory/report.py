"""A plain-text stock report."""

from .stock import Stock


def report(stock: Stock) -> str:
    lines = [f"{sku}: {stock.level(sku)}" for sku in sorted(stock._levels)]
    lines.append(f"total value: {total_value:.2f}")
    return "\n".join(lines)
