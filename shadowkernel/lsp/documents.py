"""Pure document model: URIs and positions (languages: see languages.py).

The API speaks 1-based lines and 1-based columns counted in Unicode code points (Python
`str` indices + 1); LSP speaks 0-based lines and a character offset in the negotiated
position encoding (UTF-16 unless the server agreed to something else). Everything here is
plain code without I/O so it can be tested directly.
"""

from __future__ import annotations

import fnmatch
import pathlib
import posixpath
import re
from typing import Literal
from urllib.parse import unquote, urlparse

from lsprotocol import types as lsp

from ..paths import RelPath, rel

Encoding = Literal["utf-8", "utf-16", "utf-32"]

# LSP ends lines at \n, \r\n or \r only; str.splitlines() would also split on \v, \f, \u2028...
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def matches(path: str, patterns: tuple[str, ...]) -> bool:
    """True when the file's base name matches one of the glob patterns (e.g. '*.py')."""
    base = posixpath.basename(path)
    return any(fnmatch.fnmatchcase(base, pattern) for pattern in patterns)


def path_to_uri(root: pathlib.Path, path: RelPath) -> str:
    return (root / path).as_uri()


def uri_to_path(roots: tuple[pathlib.Path, ...], uri: str) -> tuple[str, bool]:
    """(path, in_workspace): a RelPath when the URI lies below one of the roots (the root as
    given and its resolved form, since servers may resolve symlinks), else the absolute path."""
    absolute = file_uri_path(uri)
    for root in roots:
        try:
            return rel(pathlib.PurePosixPath(absolute).relative_to(root).as_posix()), True
        except ValueError:
            continue
    return absolute, False


def file_uri_path(uri: str) -> str:
    parsed = urlparse(uri)
    if parsed.scheme not in ("file", ""):
        return uri
    return unquote(parsed.path)


def lines(text: str) -> list[str]:
    return _LINE_BREAK.split(text)


def _units(char: str, encoding: Encoding) -> int:
    code = ord(char)
    if encoding == "utf-32":
        return 1
    if encoding == "utf-16":
        return 2 if code > 0xFFFF else 1
    return len(char.encode("utf-8", "surrogatepass"))


def to_character(line: str, index: int, encoding: Encoding) -> int:
    """Code-point index in `line` -> LSP character offset in `encoding`."""
    if encoding == "utf-32":
        return min(index, len(line))
    return sum(_units(c, encoding) for c in line[:index])


def from_character(line: str, character: int, encoding: Encoding) -> int:
    """LSP character offset -> code-point index (clamped to the line; a position inside a
    surrogate pair or a multi-byte character rounds up to the next code point)."""
    if encoding == "utf-32":
        return min(character, len(line))
    units = 0
    for index, char in enumerate(line):
        if units >= character:
            return index
        units += _units(char, encoding)
    return len(line)


class TextIndex:
    """A text split into lines once, for converting many positions."""

    def __init__(self, text: str, encoding: Encoding = "utf-16") -> None:
        self.lines = lines(text)
        self.encoding = encoding

    def _line(self, line0: int) -> str:
        return self.lines[line0] if 0 <= line0 < len(self.lines) else ""

    def to_lsp(self, line: int, column: int) -> lsp.Position:
        """1-based (line, column in code points) -> LSP Position."""
        line0 = max(line - 1, 0)
        character = to_character(self._line(line0), max(column - 1, 0), self.encoding)
        return lsp.Position(line0, character)

    def from_lsp(self, position: lsp.Position) -> tuple[int, int]:
        """LSP Position -> 1-based (line, column in code points)."""
        index = from_character(self._line(position.line), position.character, self.encoding)
        return position.line + 1, index + 1

    def span(self, range_: lsp.Range) -> tuple[int, int, int, int]:
        """LSP Range -> 1-based (line, column, end_line, end_column); the end is exclusive."""
        return (*self.from_lsp(range_.start), *self.from_lsp(range_.end))
