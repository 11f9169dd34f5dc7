"""Unified diffs: parsing, application to texts, and rendering in git's form.

Everything maps texts to texts and raises `StagingError` naming the file and what did not
fit; nothing reads or writes files, so a branch can validate a whole patch before it makes
a new version (bad input leaves the branch unchanged).

Caveats: hunks must match their context exactly (no fuzz), but may sit at another line than
the header says (nearest match wins), and line endings are compared without their `\\r`.
Lines end where `positions` says (`\\n`, `\\r\\n`, `\\r`). Of git's extended headers the
mode lines are applied (`old mode`/`new mode`, `new file mode`: 100644, 100755, 120000 for a
symlink), and so are `rename from`/`rename to` (a rename is a deletion plus a creation here)
and the headers of an empty file created or deleted; binary patches are refused (stage
binary files with `write_bytes`).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..errors import PathError, StagingError
from ..paths import RelPath, rel
from .positions import split_lines
from .ranges import Changes


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
    mode: int | None = None  # the new mode a git header gives (permission bits, or LINK)

    @property
    def path(self) -> RelPath:
        return self.new_path if self.new_path is not None else self.old_path  # type: ignore[return-value]


_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_NO_NEWLINE = "\\ No newline at end of file"
_GIT_HEADER = re.compile(r"^diff --git (\S+) (\S+)\s*$")
_MODE_LINE = re.compile(r"^(old mode|new mode|new file mode|deleted file mode) (\d+)\s*$")
_RENAME_LINE = re.compile(r"^rename (from|to) (.+?)\s*$")
LINK = 0o120000  # git's mode of a symlink (its content is the link's target)


def git_mode(mode: int) -> str:
    """How git writes a file's mode: 120000 (symlink), 100755 (executable) or 100644."""
    if mode == LINK:
        return "120000"
    return "100755" if mode & 0o111 else "100644"


def _parse_mode(text: str, number: int) -> int:
    value = int(text, 8)
    if value == LINK:
        return LINK
    if value & ~0o777 != 0o100000:
        raise StagingError(f"patch line {number}: mode {text} is not one git writes "
                           "(100644, 100755 or 120000)")  # fmt: skip
    return value & 0o777


def parse_patch(patch: str) -> list[FilePatch]:
    """The files of a unified diff (git or plain); StagingError on anything malformed."""
    lines = split_lines(patch, keepends=True)
    files: list[FilePatch] = []
    i = 0
    while i < len(lines):
        if _GIT_HEADER.match(lines[i]):
            i = _parse_git_file(lines, i, files)
        elif lines[i].startswith("--- "):
            i = _parse_file(lines, i, files, None)
        else:
            i += 1  # "index ...", prose around the diff
    if not files:
        raise StagingError("patch: no file headers found; give a unified diff ('--- a/x', "
                           "'+++ b/x', '@@ -l,n +l,n @@' hunks)")  # fmt: skip
    return files


def _parse_file(lines: list[str], i: int, files: list[FilePatch], mode: int | None) -> int:
    if i + 1 >= len(lines) or not lines[i + 1].startswith("+++ "):
        raise StagingError(f"patch line {i + 1}: '---' header without a '+++' line after it")
    old, new = _header_paths(lines[i], lines[i + 1], i + 1)
    hunks, i = _parse_hunks(lines, i + 2, new or old or "")
    if not hunks:
        raise StagingError(f"patch: file {new or old!r} has headers but no hunks ('@@ ...')")
    files.append(FilePatch(old, new, tuple(hunks), mode))
    return i


def _parse_git_file(lines: list[str], i: int, files: list[FilePatch]) -> int:
    """A `diff --git` block: its mode lines, then hunks, or nothing more (a mode change)."""
    header = _GIT_HEADER.match(lines[i])
    assert header is not None
    start, i = i, i + 1
    modes: dict[str, int] = {}
    renamed: dict[str, str] = {}  # "from" / "to": the paths of a rename without hunks
    while i < len(lines) and not lines[i].startswith(("--- ", "diff --git ", "@@")):
        if lines[i].startswith(("Binary files ", "GIT binary patch")):
            raise StagingError(f"patch line {i + 1}: a binary patch cannot be applied; stage "
                               "binary files with write_bytes")  # fmt: skip
        found = _MODE_LINE.match(lines[i])
        if found:
            modes[found[1]] = _parse_mode(found[2], i + 1)
        rename = _RENAME_LINE.match(lines[i])
        if rename:
            renamed[rename[1]] = rename[2]
        i += 1
    mode = modes.get("new mode", modes.get("new file mode"))
    if i < len(lines) and lines[i].startswith("--- "):
        return _parse_file(lines, i, files, mode)
    # No hunks: a rename, an empty file created or deleted, or a change of mode alone.
    old, new = _header_paths("--- " + header[1], "+++ " + header[2], start + 1)
    if renamed:
        old, new = _renamed(renamed, start + 1)
    elif "new file mode" in modes:
        old = None
    elif "deleted file mode" in modes:
        new = None
    elif "new mode" not in modes:
        return i  # nothing to apply
    files.append(FilePatch(old, new, (), mode))
    return i


def _renamed(found: dict[str, str], number: int) -> tuple[RelPath, RelPath]:
    """The paths of git's `rename from` / `rename to` lines (no a/ b/ prefixes there)."""
    if set(found) != {"from", "to"}:
        raise StagingError(f"patch line {number}: a rename needs both 'rename from' and "
                           "'rename to' lines")  # fmt: skip
    try:
        return rel(_header_name(found["from"]) or ""), rel(_header_name(found["to"]) or "")
    except PathError as exc:
        raise PathError(f"patch line {number}: {exc}") from None


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
    return apply_files(parse_patch(patch), read)


def modes(files: Sequence[FilePatch]) -> dict[RelPath, int]:
    """The modes the git headers of parsed files set, by the path each file ends at."""
    return {fp.new_path: fp.mode for fp in files if fp.mode is not None and fp.new_path}


def apply_files(files: Sequence[FilePatch], read: Callable[[RelPath], str | None]) -> Changes:
    """Apply parsed file patches to the texts `read` gives, all or none."""
    changes: Changes = {}

    def current(path: RelPath) -> str | None:
        return changes[path] if path in changes else read(path)

    for fp in files:
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
    lines = split_lines(text, keepends=True)
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


def render_diff(
    path: str,
    old: bytes | None,
    new: bytes | None,
    context: int = 3,
    old_mode: int | None = None,
    new_mode: int | None = None,
) -> str:
    """One file's diff in git's form (a/, b/, /dev/null, mode lines, `Binary files ... differ`
    with the sizes), '' when content and mode are equal. Modes default to 0644."""
    was, now = old_mode or 0o644, new_mode or 0o644
    if old == new:  # a change of mode alone, or nothing
        same = old is None or git_mode(was) == git_mode(now)
        return "" if same else _git_header(path, old, new, was, now)
    header = _git_header(path, old, new, was, now)
    a = "/dev/null" if old is None else f"a/{path}"
    b = "/dev/null" if new is None else f"b/{path}"
    old_text, new_text = _text(old), _text(new)
    if old_text is None or new_text is None:
        sizes = f"{_size(old)} -> {_size(new)}"
        return f"{header}Binary files {a} and {b} differ ({sizes})\n"
    lines = difflib.unified_diff(
        split_lines(old_text, keepends=True), split_lines(new_text, keepends=True), a, b, n=context
    )
    out = []
    for line in lines:
        if line.startswith(("---", "+++")):
            out.append(line.rstrip("\n") + "\n")
        elif not line.endswith("\n"):
            out.append(line + "\n" + _NO_NEWLINE + "\n")
        else:
            out.append(line)
    return header + "".join(out)


def _git_header(path: str, old: bytes | None, new: bytes | None, was: int, now: int) -> str:
    lines = [f"diff --git a/{path} b/{path}\n"]
    if old is None:
        lines.append(f"new file mode {git_mode(now)}\n")
    elif new is None:
        lines.append(f"deleted file mode {git_mode(was)}\n")
    elif git_mode(was) != git_mode(now):
        lines.append(f"old mode {git_mode(was)}\nnew mode {git_mode(now)}\n")
    return "".join(lines)


def _text(data: bytes | None) -> str | None:
    """Text to diff, or None for binary content (a NUL byte, or not UTF-8)."""
    if data is None:
        return ""
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _size(data: bytes | None) -> str:
    return "absent" if data is None else f"{len(data)} bytes"
