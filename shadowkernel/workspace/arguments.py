"""Checks of what callers pass to the public API, each failing with an `ArgumentError` that
names the argument and what it accepts (a plain TypeError from deep inside helps nobody).

The API is called by people in notebooks and by agents through the faces, so a wrong type is
ordinary bad input, not a bug. Only types and ranges are checked here; what a value means (a
path inside the workspace, a patch that applies) is checked where it is used.
"""

from __future__ import annotations

import inspect
import math
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from ..errors import ArgumentError
from ..paths import RelPath, rel
from ..text.positions import lines

T = TypeVar("T")


def text(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise ArgumentError(f"{name}={show(value)}: give a str")
    return value


def path(name: str, value: object) -> RelPath:
    """A file's path relative to the workspace ("" or "." names its root: no file)."""
    if not isinstance(value, str | os.PathLike):
        raise ArgumentError(f"{name}={show(value)}: give a path relative to the workspace, "
                            "as a str")  # fmt: skip
    found = rel(value)
    if not found:
        raise ArgumentError(f"{name}={show(value)}: the path is empty; give a file's path "
                            "relative to the workspace, e.g. 'pkg/mod.py'")  # fmt: skip
    return found


def paths(name: str, value: object) -> list[RelPath] | None:
    """None, or a list of workspace paths (a lone str is refused: it is not a list of them)."""
    return _listed(name, value, "paths", path)


def names(name: str, value: object) -> list[str] | None:
    return _listed(name, value, "names", text)


def _listed(
    name: str, value: object, what: str, each: Callable[[str, object], T]
) -> list[T] | None:
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ArgumentError(f"{name}={show(value)}: give a list of {what}, e.g. [{show(value)}]")
    return [each(name, v) for v in value]


# git's rules for a branch name (`git check-ref-format --branch`), checked in this order.
_BAD_CHARS = frozenset(" ~^:?*[\\\x7f") | {chr(c) for c in range(32)}
_NAME_RULES: tuple[tuple[str, Callable[[str, list[str]], bool]], ...] = (
    ("it may not start with '-'", lambda n, _: n.startswith("-")),
    ("'HEAD' names the current commit", lambda n, _: n == "HEAD"),
    ("it may not contain control characters, space, '~', '^', ':', '?', '*', '[' or '\\'",
     lambda n, _: any(c in _BAD_CHARS for c in n)),
    ("it may not contain '..'", lambda n, _: ".." in n),
    ("it may not contain '@{'", lambda n, _: "@{" in n),
    ("it may not start or end with '/', or contain '//'", lambda _, parts: "" in parts),
    ("no part of it may start with '.'", lambda _, parts: any(p.startswith(".") for p in parts)),
    ("no part of it may end with '.lock'",
     lambda _, parts: any(p.endswith(".lock") for p in parts)),
    ("it may not end with '.'", lambda n, _: n.endswith(".")),
)  # fmt: skip


# git keeps a ref as a file (refs/heads/agent/NAME, and NAME.lock while it moves), so a name
# past the file system's 255 bytes per file name fails at commit; longer helps nobody.
NAME_BYTES = 200


def branch_name(value: object) -> str:
    """A branch name git would accept (`git check-ref-format --branch`) of at most
    NAME_BYTES bytes in UTF-8, or ArgumentError naming the rule it breaks."""
    if not isinstance(value, str) or not value:
        raise ArgumentError(f"name={show(value)}: give a non-empty str")
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > NAME_BYTES:
        raise ArgumentError(f"branch name {show(value)} is {size} bytes long in UTF-8; give "
                            f"at most {NAME_BYTES} (git keeps a branch as a file)")  # fmt: skip
    parts = value.split("/")
    for rule, broken in _NAME_RULES:
        if broken(value, parts):
            raise ArgumentError(f"branch name {show(value)} is not one git accepts: {rule}")
    return value


def mode(name: str, value: object) -> int | None:
    """None (keep the file's mode), or permission bits such as 0o755 or 0o644."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 0o777:
        raise ArgumentError(f"{name}={show(value)}: give permission bits such as 0o755 "
                            "(executable) or 0o644, or None to keep the file's mode")  # fmt: skip
    return value


def data(name: str, value: object) -> bytes:
    if not isinstance(value, bytes | bytearray | memoryview):
        raise ArgumentError(f"{name}={show(value)}: give bytes")
    return bytes(value)


def position(line: object, column: object) -> tuple[int, int]:
    for name, value in (("line", line), ("column", column)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ArgumentError(f"{name}={show(value)}: positions are 1-based ints "
                                "(line 1, column 1 is the file's first character)")  # fmt: skip
    return line, column  # type: ignore[return-value]


def within(where: str, text: str, line: int, column: int) -> None:
    """ArgumentError unless 1-based (line, column) is a position of `text`, columns counted
    in characters as `text.positions` counts them. As in an editor, the cursor may sit just
    after a line's last character (column = its length + 1) and on the empty line after a
    final line break; past those a server clamps (an answer for another place) or fails."""
    found = lines(text)
    if line > len(found):
        count = len(found) - (found[-1] == "")  # a final break starts no line of text
        raise ArgumentError(f"position {line}:{column} of {where}: the file has "
                            f"{_many(count, 'line')}; line {line} is past its end (the file "
                            f"ends at line {len(found)}, column {len(found[-1]) + 1})")  # fmt: skip
    length = len(found[line - 1])
    if column > length + 1:
        raise ArgumentError(f"position {line}:{column} of {where}: line {line} has "
                            f"{_many(length, 'character')}; column {column} is past its end "
                            f"(the end of the line is column {length + 1}; columns count "
                            "characters, a tab as one)")  # fmt: skip


def _many(n: int, what: str) -> str:
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


def count(name: str, value: object, least: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ArgumentError(f"{name}={show(value)}: give {what} (an int >= {least})")
    return value


def seconds(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ArgumentError(f"{name}={show(value)}: give a positive number of seconds")
    if math.isinf(value):
        raise ArgumentError(f"{name}={show(value)}: give a finite number of seconds")
    return float(value)


def flag(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ArgumentError(f"{name}={show(value)}: give True or False")
    return value


def command(value: object) -> str | list[str]:
    if isinstance(value, str):
        return value
    if isinstance(value, Sequence) and all(isinstance(v, str) for v in value):
        return list(value)
    raise ArgumentError(f"cmd={show(value)}: give a shell command as a str, or an argv list "
                        "of str")  # fmt: skip


def options(function: Callable[..., Any], given: Mapping[str, Any], *, taken: set[str]) -> None:
    """Keyword options meant for `function`: unknown names are refused with the known ones."""
    known = {p.name for p in inspect.signature(function).parameters.values()
             if p.kind is inspect.Parameter.KEYWORD_ONLY} - taken  # fmt: skip
    unknown = sorted(set(given) - known)
    if unknown:
        raise ArgumentError(f"unknown option {', '.join(unknown)}; known: "
                            f"{', '.join(sorted(known))}")  # fmt: skip


def show(value: object) -> str:
    """A value as an error message quotes it: its repr, cut at 60 characters."""
    shown = repr(value)
    return shown if len(shown) <= 60 else shown[:57] + "..."
