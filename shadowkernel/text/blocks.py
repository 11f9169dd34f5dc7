"""SEARCH/REPLACE blocks: one grammar for the `%%stage --replace` cell and a model's reply.

A block is

    <<<<<<< SEARCH
    text that occurs exactly once in the file
    =======
    the text that replaces it
    >>>>>>> REPLACE

Marker lines stand alone (trailing whitespace allowed) with 5 to 9 `<` and `=`, and 4 to 9
`>`: models vary the count, and IPython strips doctest prompts (`>>>`) from the start of cell
lines before a cell magic sees them, which turns `>>>>>>> REPLACE` into `>>>> REPLACE`. Text
between blocks is ignored; the non-blank line just before a block (skipping a code fence
opened right before it) is its `label`. A model's reply names the file there, so when
scanned `labelled` a SEARCH line with no line before it (since the text's start or the last
block) is prose, not a block.

`scan_blocks` never raises: a marker that does not fit where it stands is kept as text of
the open block and reported as a problem, so a lenient reader (a model's reply) takes what it
can and a strict one (`parse_blocks`, for a cell) refuses the first problem.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import StagingError
from .positions import line_starts, split_lines

SEARCH, DIVIDER, REPLACE = "<<<<<<< SEARCH", "=======", ">>>>>>> REPLACE"
_SEARCH = re.compile(r"<{5,9} SEARCH")
_DIVIDER = re.compile(r"={5,9}")
_REPLACE = re.compile(r">{4,9} REPLACE")
_FENCE = "```"


@dataclass(frozen=True)
class Block:
    search: str
    replace: str
    label: str | None = None  # the line before the block; None when nothing precedes it
    start: int = 0  # offset where the block begins (at its label line when it has one)
    end: int = 0  # offset just past its REPLACE line


@dataclass(frozen=True)
class Scan:
    blocks: tuple[Block, ...]
    problems: tuple[str, ...]  # what did not fit, in line order
    opened: bool  # whether any SEARCH line was seen


def scan_blocks(text: str, *, labelled: bool = False) -> Scan:
    """The blocks of `text` and the problems met on the way (see the module docstring).

    `labelled`: a block needs a line before it (since the text's start or the last block),
    as a model's reply names the file there; a SEARCH line without one is prose.
    """
    lines, starts = split_lines(text, keepends=True), line_starts(text)
    blocks: list[Block] = []
    problems: list[str] = []
    part: list[str] | None = None  # the lines of the part being read, None outside a block
    search: list[str] | None = None  # the SEARCH part, once its divider was seen
    opened_at, gap_start = 0, 0  # the open block's SEARCH line; first line after the last block
    opened = False
    for index, line in enumerate(lines):
        number, marker = index + 1, line.rstrip()
        if part is None:
            if _SEARCH.fullmatch(marker):
                opened = True
                if index > gap_start or not labelled:
                    part, search, opened_at = [], None, index
            elif _REPLACE.fullmatch(marker):
                problems.append(f"line {number}: {REPLACE!r} without {SEARCH!r} and "
                                f"{DIVIDER!r} before it")  # fmt: skip
            continue
        if search is None and _DIVIDER.fullmatch(marker):
            search, part = part, []
        elif search is not None and _REPLACE.fullmatch(marker):
            if not "".join(search):
                problems.append(f"block ending at line {number}: the SEARCH part is empty")
            label, first = _label(lines[gap_start:opened_at])
            begin = starts[gap_start + first] if label is not None else starts[opened_at]
            end = starts[index + 1] if index + 1 < len(starts) else len(text)
            blocks.append(Block("".join(search), "".join(part), label, begin, end))
            part, search, gap_start = None, None, index + 1
        else:
            problems.extend(_misplaced(marker, number))
            part.append(line)
    if part is not None:
        problems.append(f"the last block is not closed by {REPLACE!r}")
    return Scan(tuple(blocks), tuple(problems), opened)


def _misplaced(marker: str, number: int) -> Iterable[str]:
    """A problem for a SEARCH or REPLACE marker inside an open block (kept as its text)."""
    if _SEARCH.fullmatch(marker):
        yield f"line {number}: {SEARCH!r} inside an open block"
    elif _REPLACE.fullmatch(marker):
        yield f"line {number}: {REPLACE!r} without {SEARCH!r} and {DIVIDER!r} before it"


def _label(gap: list[str]) -> tuple[str | None, int]:
    """(label, its index in `gap`): the last non-blank line of the gap before a block, or
    before a fence that opens right before it; '' when the gap is blank, None when empty."""
    if not gap:
        return None, 0
    body = gap[:-1] if len(gap) > 1 and gap[-1].startswith(_FENCE) else gap
    filled = [i for i, line in enumerate(body) if line.strip()]
    first = filled[-1] if filled else 0
    return body[first].strip(), first


def parse_blocks(text: str) -> list[Block]:
    """The blocks of a cell; StagingError naming the first line that is wrong."""
    scan = scan_blocks(text)
    if scan.problems:
        raise StagingError(scan.problems[0])
    if not scan.blocks:
        raise StagingError(f"no search/replace blocks: each is {SEARCH!r}, old lines, "
                           f"{DIVIDER!r}, new lines, {REPLACE!r}")  # fmt: skip
    return list(scan.blocks)


def apply_blocks(text: str, blocks: Iterable[Block], path: str) -> str:
    """Apply blocks in order (each search must occur exactly once); all or nothing."""
    for block in blocks:
        text = replace_once(text, block.search, block.replace, path)
    return text


def replace_once(text: str, old: str, new: str, path: str) -> str:
    """`text` with the one occurrence of `old` replaced by `new`."""
    if not old:
        raise StagingError(f"{path}: the search text is empty; give the text to replace")
    count = text.count(old)
    if count != 1:
        what = "does not occur" if count == 0 else f"occurs {count} times"
        hint = "check it against the file" if count == 0 else "add lines to make it unique"
        raise StagingError(f"{path}: the search text {_clip(old)!r} {what}; {hint}")
    return text.replace(old, new, 1)


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
