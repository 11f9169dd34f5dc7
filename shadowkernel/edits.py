"""Pure edit application: unified diffs, search/replace, LSP text edits, diff rendering.

Everything here maps texts to texts and raises `StagingError` naming the file and what did
not fit; nothing reads or writes files, so a branch can validate a whole edit before it
makes a new version (bad input leaves the branch unchanged).

Caveats: hunks must match their context exactly (no fuzz), but may sit at another line than
the header says (nearest match wins), and line endings are compared without their `\\r`.
Git extended headers (renames, modes, binary patches) are not applied: a rename is a
deletion plus a creation here.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlparse

from .errors import PathError, StagingError
from .lsp.documents import Encoding, from_character
from .lsp.lints import Edit
from .paths import RelPath, rel

MAX_TEXT_BYTES = 8 * 2**20  # a source file larger than this is almost surely not source

# What a multi-file edit produces: new text per path, None where the file is deleted.
Changes = dict[RelPath, str | None]


# -- text content -----------------------------------------------------------------------------


def decode(data: bytes, path: str) -> str:
    """Bytes of a file as text, or StagingError saying why it is not editable text."""
    if len(data) > MAX_TEXT_BYTES:
        raise StagingError(f"{path}: {len(data)} bytes is over the {MAX_TEXT_BYTES} byte limit "
                           "for staged text; stage smaller files")  # fmt: skip
    if b"\0" in data:
        raise StagingError(f"{path}: binary content (it holds NUL bytes); only text is staged")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise StagingError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def encode(text: str, path: str) -> bytes:
    """Text to stage as bytes, with the same limits as `decode`."""
    if not isinstance(text, str):
        raise StagingError(f"{path}: text must be str, got {type(text).__name__}")
    if "\0" in text:
        raise StagingError(f"{path}: binary content (it holds NUL characters); only text is staged")
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise StagingError(f"{path}: text is not encodable as UTF-8 ({exc.reason})") from None
    if len(data) > MAX_TEXT_BYTES:
        raise StagingError(f"{path}: {len(data)} bytes is over the {MAX_TEXT_BYTES} byte limit "
                           "for staged text; stage smaller files")  # fmt: skip
    return data


# -- search / replace ---------------------------------------------------------------------------


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


# -- unified diffs ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Hunk:
    old_start: int  # 1-based line of the first old line (0 with an empty old side)
    old: tuple[str, ...]  # context and removed lines, with their line ends
    new: tuple[str, ...]  # context and added lines
    header: str


@dataclass(frozen=True)
class FilePatch:
    old_path: RelPath | None  # None: /dev/null, the file is created
    new_path: RelPath | None  # None: the file is deleted
    hunks: tuple[Hunk, ...]

    @property
    def path(self) -> RelPath:
        return self.new_path if self.new_path is not None else self.old_path  # type: ignore[return-value]


_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_NO_NEWLINE = "\\ No newline at end of file"


def parse_patch(patch: str) -> list[FilePatch]:
    """The files of a unified diff (git or plain); StagingError on anything malformed."""
    lines = patch.splitlines(keepends=True)
    files: list[FilePatch] = []
    i = 0
    while i < len(lines):
        if not lines[i].startswith("--- "):
            i += 1  # git's "diff --git", "index ...", prose around the diff
            continue
        if i + 1 >= len(lines) or not lines[i + 1].startswith("+++ "):
            raise StagingError(f"patch line {i + 1}: '---' header without a '+++' line after it")
        old, new = _header_paths(lines[i], lines[i + 1], i + 1)
        hunks, i = _parse_hunks(lines, i + 2, new or old or "")
        if not hunks:
            raise StagingError(f"patch: file {new or old!r} has headers but no hunks ('@@ ...')")
        files.append(FilePatch(old, new, tuple(hunks)))
    if not files:
        raise StagingError("patch: no file headers found; give a unified diff ('--- a/x', "
                           "'+++ b/x', '@@ -l,n +l,n @@' hunks)")  # fmt: skip
    return files


def _header_paths(
    old_line: str, new_line: str, number: int
) -> tuple[RelPath | None, RelPath | None]:
    old, new = _header_name(old_line[4:]), _header_name(new_line[4:])
    if old is None and new is None:
        raise StagingError(f"patch line {number}: both sides are /dev/null")
    # git prefixes a/ and b/; strip them only when both sides (that exist) carry them.
    named = [n for n in (old, new) if n is not None]
    strip = all(n.startswith(("a/", "b/")) for n in named)
    try:
        return tuple(None if n is None else rel(n[2:] if strip else n) for n in (old, new))  # type: ignore[return-value]
    except PathError as exc:
        raise PathError(f"patch line {number}: {exc}") from None


def _header_name(text: str) -> str | None:
    name = text.rstrip("\r\n").split("\t")[0].strip()
    if name.startswith('"') and name.endswith('"'):
        name = name[1:-1]
    return None if name == "/dev/null" else name


def _parse_hunks(lines: list[str], i: int, path: str) -> tuple[list[Hunk], int]:
    hunks = []
    while i < len(lines) and lines[i].startswith("@@"):
        match = _HUNK.match(lines[i])
        if not match:
            raise StagingError(f"patch line {i + 1} ({path}): malformed hunk header "
                               f"{lines[i].rstrip()!r}; expected '@@ -l,n +l,n @@'")  # fmt: skip
        hunk, i = _parse_hunk(lines, i, match, path)
        hunks.append(hunk)
    return hunks, i


def _parse_hunk(lines: list[str], i: int, match: re.Match[str], path: str) -> tuple[Hunk, int]:
    header = lines[i].rstrip("\r\n")
    old_start = int(match[1])
    old_left = int(match[2]) if match[2] is not None else 1
    new_left = int(match[4]) if match[4] is not None else 1
    old: list[str] = []
    new: list[str] = []
    i += 1
    while old_left > 0 or new_left > 0:
        if i >= len(lines):
            raise StagingError(f"patch ({path}): hunk {header!r} ends early; it promises "
                               f"{old_left} more old and {new_left} more new lines")  # fmt: skip
        line = lines[i]
        tag, body = (line[0], line[1:]) if line.strip("\r\n") else (" ", "\n")
        if tag == " " and old_left > 0 and new_left > 0:
            old.append(body)
            new.append(body)
            old_left, new_left = old_left - 1, new_left - 1
        elif tag == "-" and old_left > 0:
            old.append(body)
            old_left -= 1
        elif tag == "+" and new_left > 0:
            new.append(body)
            new_left -= 1
        elif tag == "\\":
            pass  # a marker between lines; handled below
        else:
            raise StagingError(f"patch line {i + 1} ({path}): {line.rstrip()!r} does not fit "
                               f"hunk {header!r} (wrong line counts in the header?)")  # fmt: skip
        i += 1
        _strip_if_no_newline(lines, i, tag, old, new)
        if i < len(lines) and lines[i].startswith(_NO_NEWLINE):
            i += 1
    return Hunk(old_start, tuple(old), tuple(new), header), i


def _strip_if_no_newline(
    lines: list[str], i: int, tag: str, old: list[str], new: list[str]
) -> None:
    """'\\ No newline at end of file' after a line: that line has no line end."""
    if i >= len(lines) or not lines[i].startswith(_NO_NEWLINE):
        return
    sides = {" ": (old, new), "-": (old,), "+": (new,)}.get(tag, ())
    for side in sides:
        side[-1] = side[-1].rstrip("\r\n")


def apply_patch(patch: str, read: Callable[[RelPath], str | None]) -> Changes:
    """Apply a unified diff to the texts `read` gives (None: the file does not exist)."""
    changes: Changes = {}

    def current(path: RelPath) -> str | None:
        return changes[path] if path in changes else read(path)

    for fp in parse_patch(patch):
        source = fp.old_path
        text = "" if source is None else current(source)
        if text is None:
            raise StagingError(f"patch: {source!r} does not exist; create files with "
                               "'--- /dev/null'")  # fmt: skip
        if source is None and fp.new_path is not None and current(fp.new_path) is not None:
            raise StagingError(f"patch: {fp.new_path!r} already exists but the patch creates it "
                               "('--- /dev/null')")  # fmt: skip
        result = apply_hunks(text, fp.hunks, fp.path)
        if fp.new_path is None:
            if result.strip():
                raise StagingError(f"patch: deleting {source!r} but the hunks leave text in it")
            changes[source] = None  # type: ignore[index]
            continue
        if source is not None and source != fp.new_path:
            changes[source] = None
        changes[fp.new_path] = result
    return changes


def apply_hunks(text: str, hunks: Sequence[Hunk], path: str) -> str:
    lines = text.splitlines(keepends=True)
    newline = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    out: list[str] = []
    position = 0  # index in `lines` up to which everything was copied to `out`
    shift = 0  # how far hunks so far were found from their headers' lines
    for hunk in hunks:
        expected = max(hunk.old_start - 1, 0) + shift if hunk.old else hunk.old_start + shift
        at = _find(lines, hunk.old, expected, position)
        if at is None:
            raise StagingError(f"patch: hunk {hunk.header!r} does not apply to {path}: its "
                               f"context/removed lines {_first_lines(hunk.old)} are not in "
                               "the file (after the previous hunk); diff against the current "
                               "text")  # fmt: skip
        shift = at - max(hunk.old_start - 1, 0) if hunk.old else shift
        out.extend(lines[position:at])
        out.extend(_with_newline(line, newline) for line in hunk.new)
        position = at + len(hunk.old)
    out.extend(lines[position:])
    return "".join(out)


def _find(lines: list[str], old: tuple[str, ...], expected: int, start: int) -> int | None:
    """The index nearest `expected` (not before `start`) where `old` matches."""
    if not old:
        return min(max(expected, start), len(lines))
    candidates = range(start, len(lines) - len(old) + 1)
    for at in sorted(candidates, key=lambda k: (abs(k - expected), k)):
        if all(_same(lines[at + k], line) for k, line in enumerate(old)):
            return at
    return None


def _same(file_line: str, patch_line: str) -> bool:
    ends = file_line.endswith(("\n", "\r")), patch_line.endswith(("\n", "\r"))
    return file_line.rstrip("\r\n") == patch_line.rstrip("\r\n") and ends[0] == ends[1]


def _with_newline(line: str, newline: str) -> str:
    return line[:-1].rstrip("\r") + newline if line.endswith("\n") else line


def _first_lines(lines: Sequence[str], count: int = 3) -> str:
    shown = [line.rstrip("\r\n") for line in lines[:count]]
    return repr(shown)[:200] + (" ..." if len(lines) > count else "")


# -- LSP text edits -------------------------------------------------------------------------------


# A replacement in 1-based lines and code-point columns (end exclusive): the same value a
# quick fix carries, so fixes apply without translation.
TextEdit = Edit


def apply_text_edits(text: str, edits: Iterable[TextEdit], path: str) -> str:
    """Apply non-overlapping edits (all positions refer to the original text)."""
    starts = line_starts(text)
    spans = sorted(
        ((_offset(text, starts, e.line, e.column), _offset(text, starts, e.end_line, e.end_column),
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


def line_starts(text: str) -> list[int]:
    """Offsets where each line begins (LSP line breaks: \\n, \\r\\n, \\r)."""
    return [0, *(m.end() for m in re.finditer(r"\r\n|\r|\n", text))]


def _offset(text: str, starts: list[int], line: int, column: int) -> int:
    if line < 1 or column < 1:
        raise StagingError(f"edit position {line}:{column}: lines and columns are 1-based")
    if line > len(starts):
        return len(text)  # LSP allows positions past the end; they mean the end
    begin = starts[line - 1]
    end = starts[line] if line < len(starts) else len(text)
    content = text[begin:end].rstrip("\r\n")
    return begin + min(column - 1, len(content))


def workspace_edit_changes(
    edit: Any,
    to_path: Callable[[str], RelPath],
    read: Callable[[RelPath], str | None],
    encoding: Encoding = "utf-16",
) -> Changes:
    """Apply an LSP WorkspaceEdit (lsprotocol object or JSON dict) to the texts `read` gives.

    Handles `changes`, `documentChanges` text edits and create/rename/delete file operations,
    in order. Positions are LSP's: 0-based lines, characters in `encoding`.
    """
    data = _as_json(edit)
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
    lines = text.split("\n")

    def position(p: Mapping[str, int]) -> tuple[int, int]:
        line = int(p["line"])
        content = lines[line].rstrip("\r") if 0 <= line < len(lines) else ""
        return line + 1, from_character(content, int(p["character"]), encoding) + 1

    start, end = position(edit["range"]["start"]), position(edit["range"]["end"])
    return TextEdit(path, *start, *end, edit["newText"])


def _as_json(edit: Any) -> dict[str, Any]:
    if isinstance(edit, Mapping):
        return dict(edit)
    try:
        from lsprotocol import converters

        return converters.get_converter().unstructure(edit)  # type: ignore[no-any-return]
    except Exception as exc:  # any failure means: not a WorkspaceEdit we understand
        raise StagingError(f"workspace edit: expected an lsprotocol WorkspaceEdit or its JSON "
                           f"dict, got {type(edit).__name__} ({exc})") from None  # fmt: skip


def uri_to_rel(uri: str, roots: Sequence[str]) -> RelPath:
    """A file URI below one of `roots` (the shadow mount, the user's folder) as a RelPath."""
    parsed = urlparse(uri)
    if parsed.scheme not in ("file", ""):
        raise PathError(f"uri {uri!r} is not a file URI")
    absolute = unquote(parsed.path)
    for root in roots:
        prefix = root.rstrip("/") + "/"
        if absolute.startswith(prefix):
            return rel(absolute[len(prefix) :])
    raise PathError(f"uri {uri!r} lies outside the workspace ({', '.join(roots)})")


# -- rendering ----------------------------------------------------------------------------------


def render_diff(path: str, old: bytes | None, new: bytes | None, context: int = 3) -> str:
    """One file's unified diff in git's form (a/, b/, /dev/null), '' when equal."""
    if old == new:
        return ""
    a = "/dev/null" if old is None else f"a/{path}"
    b = "/dev/null" if new is None else f"b/{path}"
    try:
        old_text = "" if old is None else old.decode("utf-8")
        new_text = "" if new is None else new.decode("utf-8")
    except UnicodeDecodeError:
        return f"diff --git a/{path} b/{path}\nBinary files {a} and {b} differ\n"
    lines = difflib.unified_diff(
        old_text.splitlines(keepends=True), new_text.splitlines(keepends=True), a, b, n=context
    )
    out = []
    for line in lines:
        if line.startswith(("---", "+++")):
            out.append(line.rstrip("\n") + "\n")
        elif not line.endswith("\n"):
            out.append(line + "\n" + _NO_NEWLINE + "\n")
        else:
            out.append(line)
    return f"diff --git a/{path} b/{path}\n" + "".join(out)
