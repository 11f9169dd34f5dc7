"""Range edits of a text and multi-file edits in LSP's WorkspaceEdit shape (as JSON).

A `TextEdit` replaces 1-based (line, column) to (end_line, end_column), columns in code
points and the end exclusive: the same value a lint's quick fix carries, so fixes apply
without translation. `apply_workspace_edit` reads a WorkspaceEdit as the JSON dict LSP sends
(positions 0-based, characters in the server's encoding); turning an lsprotocol object into
that dict is lsp/'s job. Paths come from URIs through the caller's `to_path`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import StagingError
from ..paths import RelPath
from .positions import Encoding, from_character, line_starts, lines, offset

# What a multi-file edit produces: new text per path, None where the file is deleted.
Changes = dict[RelPath, str | None]


@dataclass(frozen=True)
class TextEdit:
    """One replacement in 1-based lines and code-point columns (the end is exclusive); the
    edits of a lint's quick fix (`lsp.Fix.edits`) are these."""

    path: RelPath
    line: int
    column: int
    end_line: int
    end_column: int
    new_text: str


def apply_text_edits(text: str, edits: Iterable[TextEdit], path: str) -> str:
    """Apply non-overlapping edits (all positions refer to the original text)."""
    starts = line_starts(text)
    spans = sorted(
        ((offset(text, starts, e.line, e.column), offset(text, starts, e.end_line, e.end_column),
          e) for e in edits),
        key=lambda s: (s[0], s[1]),
    )  # fmt: skip
    out, position = [], 0
    for begin, end, edit in spans:
        if end < begin:
            raise StagingError(f"{path}: edit at {edit.line}:{edit.column} ends before it starts")
        if begin < position:
            raise StagingError(f"{path}: edits overlap at line {edit.line}, column {edit.column}")
        out.append(text[position:begin])
        out.append(edit.new_text)
        position = end
    out.append(text[position:])
    return "".join(out)


def apply_workspace_edit(
    data: Mapping[str, Any],
    to_path: Callable[[str], RelPath],
    read: Callable[[RelPath], str | None],
    encoding: Encoding = "utf-16",
) -> Changes:
    """Apply a WorkspaceEdit's JSON to the texts `read` gives (None: the file does not exist).

    Handles `changes`, `documentChanges` text edits and create/rename/delete file operations,
    in order.
    """
    changes: Changes = {}

    def current(path: RelPath) -> str | None:
        return changes[path] if path in changes else read(path)

    operations: list[dict[str, Any]] = [
        {"textDocument": {"uri": uri}, "edits": edits}
        for uri, edits in (data.get("changes") or {}).items()
    ]
    operations += list(data.get("documentChanges") or [])
    if not operations:
        raise StagingError("workspace edit: it holds no changes")
    for op in operations:
        _apply_operation(op, to_path, current, changes, encoding)
    return changes


def _apply_operation(
    op: Mapping[str, Any],
    to_path: Callable[[str], RelPath],
    current: Callable[[RelPath], str | None],
    changes: Changes,
    encoding: Encoding,
) -> None:
    kind = op.get("kind")
    if kind == "create":
        path = to_path(op["uri"])
        if current(path) is None or not (op.get("options") or {}).get("ignoreIfExists"):
            changes[path] = ""
    elif kind == "rename":
        old, new = to_path(op["oldUri"]), to_path(op["newUri"])
        text = current(old)
        if text is None:
            raise StagingError(f"workspace edit: cannot rename {old!r}, it does not exist")
        changes[old], changes[new] = None, text
    elif kind == "delete":
        changes[to_path(op["uri"])] = None
    else:
        path = to_path(op["textDocument"]["uri"])
        text = current(path)
        if text is None:
            raise StagingError(f"workspace edit: {path!r} does not exist")
        edits = [_lsp_text_edit(text, path, e, encoding) for e in op.get("edits", [])]
        changes[path] = apply_text_edits(text, edits, path)


def _lsp_text_edit(
    text: str, path: RelPath, edit: Mapping[str, Any], encoding: Encoding
) -> TextEdit:
    if "range" not in edit or "newText" not in edit:
        raise StagingError(f"workspace edit: {path}: a text edit needs 'range' and 'newText'")
    content = lines(text)

    def position(p: Mapping[str, int]) -> tuple[int, int]:
        line = int(p["line"])
        here = content[line] if 0 <= line < len(content) else ""
        return line + 1, from_character(here, int(p["character"]), encoding) + 1

    start, end = position(edit["range"]["start"]), position(edit["range"]["end"])
    return TextEdit(path, *start, *end, edit["newText"])
