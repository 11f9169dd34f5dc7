"""Pure document model: LSP's positions and edits over the text core (languages: see
languages.py).

The API speaks 1-based lines and 1-based columns counted in Unicode code points (Python
`str` indices + 1); LSP speaks 0-based lines and a character offset in the negotiated
position encoding (UTF-16 unless the server agreed to something else). The line-break rule,
the column units and URI parsing live in `text/` (`positions`, `uris`); this module converts
lsprotocol values to and from them. Everything here is plain code without I/O.
"""

from __future__ import annotations

import fnmatch
import posixpath
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from lsprotocol import types as lsp

from ..errors import StagingError
from ..paths import RelPath
from ..text.ends import common_prefix, common_suffix, ends
from ..text.positions import Encoding, from_character, line_starts, lines, to_character
from ..text.ranges import Changes, apply_workspace_edit
from ..text.uris import file_uri_path, path_to_uri, uri_to_path

__all__ = [
    "Encoding", "TextIndex", "file_uri_path", "from_character", "lines", "matches",
    "path_to_uri", "changes_after", "text_change", "text_changes", "to_character", "uri_to_path",
    "workspace_edit_changes",
]  # fmt: skip


def matches(path: str, patterns: tuple[str, ...]) -> bool:
    """True when the file's base name matches one of the glob patterns (e.g. '*.py')."""
    base = posixpath.basename(path)
    return any(fnmatch.fnmatchcase(base, pattern) for pattern in patterns)


class TextIndex:
    """A text's line starts, for converting many positions: found once with a few C passes,
    or carried forward from the text before an edit (`after`: cost follows the edit). A
    line's text is sliced out when asked, so an index costs no object per line."""

    def __init__(
        self, text: str, encoding: Encoding = "utf-16", starts: np.ndarray | None = None
    ) -> None:
        self.text = text
        self.encoding = encoding
        self._starts = starts  # offset of each line's first code point; found on first use

    @property
    def starts(self) -> np.ndarray:
        if self._starts is None:
            self._starts = _line_starts(self.text)
        return self._starts

    def _line(self, line0: int) -> str:
        starts = self.starts
        if not 0 <= line0 < len(starts):
            return ""
        end = int(starts[line0 + 1]) if line0 + 1 < len(starts) else len(self.text)
        return self.text[int(starts[line0]) : end].rstrip("\r\n")

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

    def position(self, index: int) -> dict[str, int]:
        """The LSP position of code-point `index` (in a text without `\r`)."""
        line = int(np.searchsorted(self.starts, index, side="right")) - 1
        prefix = self.text[int(self.starts[line]) : index]
        return {"line": line, "character": _units_of(prefix, self.encoding)}

    def after(self, new: str, hunks: list[tuple[int, int, int, int]]) -> TextIndex:
        """The index of `new`, which is this text with each hunk (a0, a1, b0, b1: this
        text's [a0, a1) replaced by new[b0:b1], in order) applied; neither holds `\r`. The
        line breaks outside the hunks move, the hunks' own are found: no pass over `new`."""
        breaks = self.starts[1:] - 1
        pieces, cursor, shift = [np.zeros(1, np.int64)], 0, 0
        for a0, a1, b0, b1 in hunks:
            low, high = np.searchsorted(breaks, (cursor, a0))
            pieces += [breaks[low:high] + shift + 1, _breaks(new[b0:b1]) + b0 + 1]
            cursor, shift = a1, b1 - a1
        pieces.append(breaks[np.searchsorted(breaks, cursor) :] + shift + 1)
        return TextIndex(new, self.encoding, np.concatenate(pieces))


def _breaks(text: str) -> np.ndarray:
    """Offsets of every `\n` in `text` (C passes: no Python object per line)."""
    if text.isascii():
        codes = np.frombuffer(text.encode("ascii"), np.uint8)
    else:
        codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.uint32)
    return np.flatnonzero(codes == 10).astype(np.int64)


def _line_starts(text: str) -> np.ndarray:
    """Where each line begins (a final break leaves an empty last line, as `lines`)."""
    if "\r" in text:
        return np.array(line_starts(text), np.int64)
    return np.concatenate([np.zeros(1, np.int64), _breaks(text) + 1])


def _units_of(prefix: str, encoding: Encoding) -> int:
    """How many `encoding` units the code points of `prefix` take."""
    return len(prefix) if prefix.isascii() else to_character(prefix, len(prefix), encoding)


def text_change(old: str, new: str, encoding: Encoding = "utf-16") -> dict[str, Any] | None:
    """One incremental `didChange` content change turning `old` into `new`: the span between
    their common prefix and suffix, replaced. Costs O(len) in C-speed slice compares, and
    sends the edit instead of the whole file. None when the full text is the plain answer
    (no change at all: a resend; a text with `\r`, whose breaks a span could split)."""
    if old == new or "\r" in old or "\r" in new:
        return None
    start, end = ends(old, new)
    return {"range": {"start": _position(old, start, encoding),
                      "end": _position(old, len(old) - end, encoding)},
            "text": new[start : len(new) - end]}  # fmt: skip


def text_changes(old: str, new: str, encoding: Encoding = "utf-16") -> list[dict[str, Any]] | None:
    """The `didChange` content changes turning `old` into `new`, one per place the texts
    differ (as `text_change`, but two branches' edits far apart in one file send two short
    changes, not the whole stretch between them). Listed from the end of the text to its
    start: a server applies them in turn, and each one's positions, read in `old`, still hold
    because only text after it changed. None when the full text is the plain answer."""
    return changes_after(TextIndex(old, encoding), new)[0]


def changes_after(old: TextIndex, new: str) -> tuple[list[dict[str, Any]] | None, TextIndex]:
    """`text_changes(old.text, new)` with the index of `new` carried forward from `old`'s:
    what a client keeps per open document, so a sync costs what the edits span."""
    if old.text == new:
        return None, old
    if "\r" in old.text or "\r" in new:
        return None, TextIndex(new, old.encoding)
    hunks: list[tuple[int, int, int, int]] = []
    _hunks(old.text, new, 0, len(old.text), 0, len(new), hunks, SPLITS)
    changes = [{"range": {"start": old.position(a0), "end": old.position(a1)},
                "text": new[b0:b1]} for a0, a1, b0, b1 in reversed(hunks)]  # fmt: skip
    return changes, old.after(new, hunks)


SPLITS = 8  # levels of splitting at a probe (up to 256 places)
PROBE = 64  # characters from the middle of a differing stretch looked up on the other side
SMALL = 4_096  # differing stretches shorter than this are sent as they are


def _hunks(a: str, b: str, a0: int, a1: int, b0: int, b1: int,
           out: list[tuple[int, int, int, int]], depth: int) -> None:  # fmt: skip
    """Append the differing stretches of a[a0:a1] and b[b0:b1] (in order): their common
    prefix and suffix cut off, then split where a probe from a's middle occurs exactly once
    on each side (str.find: C speed, linear)."""
    prefix = common_prefix(a, b, a0, a1, b0, b1)
    a0, b0 = a0 + prefix, b0 + prefix
    suffix = common_suffix(a, b, a0, a1, b0, b1)
    a1, b1 = a1 - suffix, b1 - suffix
    if a0 == a1 and b0 == b1:
        return
    if depth and min(a1 - a0, b1 - b0) >= SMALL:
        middle = (a0 + a1 - PROBE) // 2
        probe = a[middle : middle + PROBE]
        at = _once(b, probe, b0, b1)
        if at >= 0 and _once(a, probe, a0, a1) == middle:
            _hunks(a, b, a0, middle, b0, at, out, depth - 1)
            _hunks(a, b, middle, a1, at, b1, out, depth - 1)
            return
    out.append((a0, a1, b0, b1))


def _once(text: str, probe: str, begin: int, end: int) -> int:
    """Where `probe` occurs in text[begin:end] if it occurs exactly once, else -1."""
    at = text.find(probe, begin, end)
    return at if at >= 0 and text.find(probe, at + 1, end) < 0 else -1


def _position(text: str, index: int, encoding: Encoding) -> dict[str, int]:
    """The LSP position of code-point `index` in `text` (which holds no `\r`)."""
    begin = text.rfind("\n", 0, index) + 1
    return {"line": text.count("\n", 0, index), "character": _units_of(text[begin:index], encoding)}


def workspace_edit_changes(
    edit: Any,
    to_path: Callable[[str], RelPath],
    read: Callable[[RelPath], str | None],
    encoding: Encoding = "utf-16",
) -> Changes:
    """Apply an LSP WorkspaceEdit (lsprotocol object or JSON dict) to the texts `read` gives;
    see `text.ranges.apply_workspace_edit`."""
    return apply_workspace_edit(_as_json(edit), to_path, read, encoding)


def _as_json(edit: Any) -> Mapping[str, Any]:
    if isinstance(edit, Mapping):
        return edit
    try:
        from lsprotocol import converters

        return converters.get_converter().unstructure(edit)  # type: ignore[no-any-return]
    except Exception as exc:  # any failure means: not a WorkspaceEdit we understand
        raise StagingError(f"workspace edit: expected an lsprotocol WorkspaceEdit or its JSON "
                           f"dict, got {type(edit).__name__} ({exc})") from None  # fmt: skip
