"""Pure parsers for magic arguments: positions and search/replace blocks.

A search/replace block (the `%%stage --replace` cell format) is

    <<<<<<< SEARCH
    text that occurs exactly once in the file
    =======
    the text that replaces it
    >>>>>>> REPLACE

Marker lines stand alone (trailing spaces allowed); a cell holds one or more blocks, applied
in order, each to the result of the one before; text between blocks is ignored. An empty
SEARCH part is refused (it would match everywhere): stage the whole file instead.

IPython strips doctest prompts (`>>>`) from the start of cell lines before a cell magic sees
them, which turns `>>>>>>> REPLACE` into `>>>> REPLACE`; the closing marker is therefore
recognised with four to seven `>`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .. import edits
from ..errors import StagingError

SEARCH, DIVIDER, REPLACE = "<<<<<<< SEARCH", "=======", ">>>>>>> REPLACE"
_REPLACE = re.compile(r"^>{4,7} REPLACE$")
_POSITION = re.compile(r"^(?P<path>.+):(?P<line>\d+):(?P<column>\d+)$")


@dataclass(frozen=True)
class Position:
    path: str
    line: int  # 1-based
    column: int  # 1-based


@dataclass(frozen=True)
class Block:
    search: str
    replace: str


def parse_position(text: str) -> Position:
    """`pkg/mod.py:3:5` -> Position; ValueError naming the expected form."""
    match = _POSITION.match(text.strip())
    if match is None:
        raise ValueError(f"position {text!r}: give PATH:LINE:COLUMN, e.g. pkg/mod.py:3:5")
    line, column = int(match["line"]), int(match["column"])
    if line < 1 or column < 1:
        raise ValueError(f"position {text!r}: lines and columns are 1-based")
    return Position(match["path"], line, column)


def parse_blocks(cell: str) -> list[Block]:
    """The search/replace blocks of a cell; StagingError naming the line that is wrong."""
    blocks: list[Block] = []
    part: list[str] | None = None
    search: list[str] | None = None
    for number, line in enumerate(cell.splitlines(keepends=True), 1):
        marker = line.rstrip()
        if marker == SEARCH:
            if part is not None:
                raise StagingError(f"line {number}: {SEARCH!r} inside an open block")
            part, search = [], None
        elif marker == DIVIDER and part is not None and search is None:
            search, part = part, []
        elif _REPLACE.match(marker):
            if part is None or search is None:
                raise StagingError(f"line {number}: {REPLACE!r} without {SEARCH!r} and "
                                   f"{DIVIDER!r} before it")  # fmt: skip
            blocks.append(_block(search, part, number))
            part, search = None, None
        elif part is not None:
            part.append(line)
    if part is not None:
        raise StagingError(f"the last block is not closed by {REPLACE!r}")
    if not blocks:
        raise StagingError(f"no search/replace blocks: each is {SEARCH!r}, old lines, "
                           f"{DIVIDER!r}, new lines, {REPLACE!r}")  # fmt: skip
    return blocks


def _block(search: list[str], replace: list[str], number: int) -> Block:
    if not "".join(search):
        raise StagingError(f"block ending at line {number}: the SEARCH part is empty")
    return Block("".join(search), "".join(replace))


def apply_blocks(text: str, blocks: list[Block], path: str) -> str:
    """Apply blocks in order (each search must occur exactly once); all or nothing."""
    for block in blocks:
        text = edits.replace_once(text, block.search, block.replace, path)
    return text
