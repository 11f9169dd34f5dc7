"""Edits an agent proposes, in any staging form, and how a reply becomes edits (pure).

Forms: a whole file (`FullText`), a unified diff (`Patch`), a search/replace (`Replace`) and a
deletion (`Delete`). `normalize` accepts those objects, their dict spellings, a mapping of
path -> text (None deletes), a reply text (see `parse_reply`), or a list of any of these; it
raises `AgentOutputError` naming what it could not understand. `to_json`/`from_json` make
edits recordable and replayable.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ..errors import ShadowError
from ..text.blocks import scan_blocks


class AgentOutputError(ShadowError, ValueError):
    """An agent returned something that is not edits."""


@dataclass(frozen=True)
class FullText:
    path: str
    text: str


@dataclass(frozen=True)
class Patch:
    diff: str


@dataclass(frozen=True)
class Replace:
    path: str
    old: str
    new: str


@dataclass(frozen=True)
class Delete:
    path: str


Edit = FullText | Patch | Replace | Delete
KINDS: dict[str, type] = {"write": FullText, "patch": Patch, "replace": Replace, "delete": Delete}
_KIND_OF = {cls: kind for kind, cls in KINDS.items()}


@dataclass(frozen=True)
class Proposal:
    """What an agent may return instead of bare edits: the edits plus what they cost."""

    edits: Any
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    reply: str | None = None  # the raw reply text, for the record


def normalize(value: Any) -> tuple[Edit, ...]:
    """Edits from anything an agent may return (see the module docstring)."""
    if value is None:
        return ()
    if isinstance(value, FullText | Patch | Replace | Delete):
        _check_types(value)
        return (value,)
    if isinstance(value, str):
        return parse_reply(value)
    if isinstance(value, Mapping):
        return (_from_dict(value),) if _looks_like_edit(value) else _from_files(value)
    if isinstance(value, Sequence):
        return tuple(edit for item in value for edit in normalize(item))
    raise AgentOutputError(f"agent returned {type(value).__name__} {_clip(repr(value))}: return "
                           "edits (FullText, Patch, Replace, Delete, their dicts, a reply text, "
                           "or a list of these)")  # fmt: skip


def _looks_like_edit(value: Mapping[Any, Any]) -> bool:
    return (
        "kind" in value
        or "diff" in value
        or "old" in value
        or ("path" in value and ("text" in value or "delete" in value))
    )


def _from_dict(value: Mapping[str, Any]) -> Edit:
    kind = value.get("kind") or _guess_kind(value)
    cls = KINDS.get(kind)
    if cls is None:
        raise AgentOutputError(f"edit {_clip(repr(dict(value)))}: kind {kind!r} is not one of "
                               f"{', '.join(KINDS)}")  # fmt: skip
    fields = {k: v for k, v in value.items() if k not in ("kind", "delete")}
    try:
        edit = cls(**fields)
    except TypeError as e:
        raise AgentOutputError(f"edit {_clip(repr(dict(value)))}: {e}") from None
    _check_types(edit)
    return edit


def _guess_kind(value: Mapping[str, Any]) -> str:
    if "diff" in value:
        return "patch"
    if "old" in value:
        return "replace"
    return "delete" if value.get("delete") else "write"


def _from_files(files: Mapping[Any, Any]) -> tuple[Edit, ...]:
    result: list[Edit] = []
    for path, text in files.items():
        edit = Delete(path) if text is None else FullText(path, text)
        _check_types(edit)
        result.append(edit)
    return tuple(result)


def _check_types(edit: Edit) -> None:
    for name, value in asdict(edit).items():
        if not isinstance(value, str):
            raise AgentOutputError(f"{type(edit).__name__}.{name} is {type(value).__name__} "
                                   f"{_clip(repr(value))}; give a string")  # fmt: skip
    if not isinstance(edit, Patch) and not edit.path.strip():
        raise AgentOutputError(f"{type(edit).__name__} has an empty path")


def to_json(edit: Edit) -> dict[str, str]:
    return {"kind": _KIND_OF[type(edit)], **asdict(edit)}


def from_json(data: Mapping[str, Any]) -> Edit:
    return _from_dict(data)


def describe(edit: Edit) -> str:
    """A short human line: 'replace in pkg/mod.py', 'patch (2 files)', ..."""
    if isinstance(edit, FullText):
        return f"write {edit.path}"
    if isinstance(edit, Replace):
        return f"replace in {edit.path}"
    if isinstance(edit, Delete):
        return f"delete {edit.path}"
    files = len(re.findall(r"^\+\+\+ ", edit.diff, flags=re.M))
    return f"patch ({files} file{'s' if files != 1 else ''})"


# -- reply text -> edits ------------------------------------------------------------------------

_FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.S | re.M)
_PATH_INFO = re.compile(r"(?:^|\s)(?:path|file)=(\S+)")
_DELETE = re.compile(r"^DELETE[ \t]+(\S+)[ \t]*$", re.M)


def parse_reply(text: str) -> tuple[Edit, ...]:
    """Edits in a model's reply, in the order they appear.

    Understood: search/replace blocks (`text.blocks`) after a path line; unified diffs in
    ```diff fences; whole files in a fence whose info names the path
    (```python path=pkg/mod.py); `DELETE pkg/mod.py` lines. A reply without any of these
    proposes no edits. A block that starts but is malformed raises AgentOutputError when
    nothing else in the reply is an edit.
    """
    scan = scan_blocks(text, labelled=True)  # the label line names the file
    found: list[tuple[int, Edit]] = [
        (b.start, Replace(_path(b.label or ""), b.search, b.replace)) for b in scan.blocks
    ]
    for m in _FENCE.finditer(text):
        if any(b.start <= m.start() < b.end for b in scan.blocks):
            continue
        info, body = m[1].strip(), m[2]
        path = _PATH_INFO.search(" " + info)
        if info.split(" ")[0] in ("diff", "patch") or body.startswith(("--- ", "diff --git")):
            found.append((m.start(), Patch(body)))
        elif path:
            found.append((m.start(), FullText(path[1], body)))
    found += [(m.start(), Delete(m[1])) for m in _DELETE.finditer(text)]
    if not found and scan.opened:
        raise AgentOutputError(
            "reply has a '<<<<<<< SEARCH' block without its '=======' and '>>>>>>> REPLACE' "
            "lines, or without a path line before it"
        )
    return tuple(edit for _, edit in sorted(found, key=lambda x: x[0]))


def _path(label: str) -> str:
    """The path a block's label line names ('`pkg/m.py`:', '### File: pkg/m.py', ...)."""
    return label.strip().strip("`*#: ").removeprefix("File").strip(": ")


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
