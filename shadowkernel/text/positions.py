"""Lines, columns and offsets of a text: the one line-break rule and the LSP column units.

A line ends at `\\n`, `\\r\\n` or `\\r`, as in LSP, and nowhere else (`str.splitlines` would also
break at `\\v`, `\\f`, `\\x1c`-`\\x1e`, `\\x85`, `\\u2028` and `\\u2029`, which are ordinary
characters to editors, diffs and language servers). The API speaks 1-based lines and 1-based
columns counted in code points (Python `str` indices + 1); LSP counts a line's characters in
the position encoding a server negotiated: UTF-16 units unless it agreed to UTF-8 or UTF-32.
"""

from __future__ import annotations

import re
from typing import Literal

from ..errors import StagingError

Encoding = Literal["utf-8", "utf-16", "utf-32"]

LINE_BREAK = re.compile(r"\r\n|\r|\n")
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")
_OTHER_BREAKS = "\v\f\x1c\x1d\x1e\x85\u2028\u2029"  # where else str.splitlines breaks


def lines(text: str) -> list[str]:
    """The lines of `text` without their line breaks (a final break leaves an empty line)."""
    if "\r" not in text:
        return text.split("\n")  # the same answer, several times faster (every synced document)
    return LINE_BREAK.split(text)


def line_starts(text: str) -> list[int]:
    """Offsets where each line begins."""
    return [0, *(m.end() for m in LINE_BREAK.finditer(text))]


def split_lines(text: str, keepends: bool = False) -> list[str]:
    """`str.splitlines` with LSP's line breaks (no empty line after a final break)."""
    if not any(char in text for char in _OTHER_BREAKS):
        return text.splitlines(keepends)  # the same answer, several times faster
    parts = _LINE.findall(text)
    return parts if keepends else [part.rstrip("\r\n") for part in parts]


def terminated(text: str) -> str:
    """`text` ending in a line break: itself if it is empty or already ends in one, else with
    `\\n` added (so notes can follow its last line, and a fence closes on a line of its own)."""
    return text if not text or text.endswith(("\n", "\r")) else text + "\n"


def offset(text: str, starts: list[int], line: int, column: int) -> int:
    """The index of 1-based (line, column) in `text`, clamped to the line's content; a line
    past the end means the end (LSP allows that)."""
    if line < 1 or column < 1:
        raise StagingError(f"edit position {line}:{column}: lines and columns are 1-based")
    if line > len(starts):
        return len(text)
    begin = starts[line - 1]
    end = starts[line] if line < len(starts) else len(text)
    content = text[begin:end].rstrip("\r\n")
    return begin + min(column - 1, len(content))


def _units(char: str, encoding: Encoding) -> int:
    code = ord(char)
    if encoding == "utf-32":
        return 1
    if encoding == "utf-16":
        return 2 if code > 0xFFFF else 1
    return len(char.encode("utf-8", "surrogatepass"))


def to_character(line: str, index: int, encoding: Encoding) -> int:
    """Code-point index in `line` -> LSP character offset in `encoding`."""
    if encoding == "utf-32" or line.isascii():  # a code point is one unit
        return min(index, len(line))
    return sum(_units(c, encoding) for c in line[:index])


def from_character(line: str, character: int, encoding: Encoding) -> int:
    """LSP character offset -> code-point index (clamped to the line; a position inside a
    surrogate pair or a multi-byte character rounds up to the next code point)."""
    if encoding == "utf-32" or line.isascii():  # a code point is one unit
        return min(max(character, 0), len(line))
    units = 0
    for index, char in enumerate(line):
        if units >= character:
            return index
        units += _units(char, encoding)
    return len(line)
