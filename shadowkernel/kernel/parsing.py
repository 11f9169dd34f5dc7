"""Pure parsers for magic arguments: positions, and the `%%stage --replace` cell.

The cell holds SEARCH/REPLACE blocks in the grammar of `text.blocks` (one grammar for cells
and model replies), applied in order, each to the result of the one before; the cell is
strict: the first misplaced marker, an unclosed block or an empty SEARCH part is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import ArgumentError
from ..text.blocks import Block, apply_blocks, parse_blocks

__all__ = ["Block", "Position", "apply_blocks", "parse_blocks", "parse_position"]

_POSITION = re.compile(r"^(?P<path>.+):(?P<line>\d+):(?P<column>\d+)$")


@dataclass(frozen=True)
class Position:
    path: str
    line: int  # 1-based
    column: int  # 1-based


def parse_position(text: str) -> Position:
    """`pkg/mod.py:3:5` -> Position; ArgumentError naming the expected form."""
    match = _POSITION.match(text.strip())
    if match is None:
        raise ArgumentError(f"position {text!r}: give PATH:LINE:COLUMN, e.g. pkg/mod.py:3:5")
    line, column = int(match["line"]), int(match["column"])
    if line < 1 or column < 1:
        raise ArgumentError(f"position {text!r}: lines and columns are 1-based")
    return Position(match["path"], line, column)
