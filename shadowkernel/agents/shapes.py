"""JSON shapes of the tools' results: plain dicts of str, int, float, bool, None and lists.

Each tool's result type is a TypedDict here; the SDK publishes it as the tool's output
schema, so clients know the fields before they call. Locations, symbols, hovers and fix
edits stay the API's frozen dataclasses (the SDK serialises them). The functions are pure
conversions from the public API's values (lint tables, run results, ...); positions stay
1-based with exclusive ends, as in the Python API. A lint's quick fixes are named by ids
(`"<version>.<n>"`) that `apply_fix` takes back.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from typing_extensions import TypedDict  # pydantic reads typing's only from Python 3.12

from ..lsp import Fix, Hover, Location, Symbol
from ..text.ranges import TextEdit

JSON = dict[str, Any]


class Created(TypedDict):
    branch: str
    version: int


class Dropped(TypedDict):
    branch: str  # the key every branch answer has
    dropped: str  # the same name (kept for clients that read it)


class Committed(TypedDict):
    branch: str
    version: int
    commit: str  # the new commit's id
    ref: str


class BranchInfo(TypedDict):
    name: str
    version: int
    last_edit: str  # what made the current version: "write pkg/mod.py", "patch (2 files)", ...
    files: list[str]  # every path the branch touched


class Branches(TypedDict):
    branches: list[BranchInfo]


class Page(TypedDict):
    content: str
    offset: int  # of content's first character in the file
    total_chars: int  # the whole file's
    more: bool  # characters follow this page
    next_offset: int | None  # where they start (None: the end was reached)


class FileText(Page):
    branch: str
    version: int
    path: str


class Entry(TypedDict):
    name: str
    path: str
    kind: str  # "file", "dir" or "symlink"


class Listing(TypedDict):
    branch: str
    version: int
    path: str
    entries: list[Entry]


class Staged(TypedDict):
    branch: str
    version: int  # the new version
    op: str
    changed: list[str]  # paths whose content this version changed


class FixOffer(TypedDict):
    id: str
    title: str


class FixDetail(TypedDict):
    id: str
    title: str
    edits: list[TextEdit]


class FixApplied(Staged):
    fix: FixDetail


class LintRow(TypedDict):
    branch: str
    version: int
    path: str
    line: int
    column: int
    end_line: int
    end_column: int  # exclusive
    severity: str
    code: str
    source: str
    message: str
    new: bool | None  # the branch introduced it (None: unknown)
    fixes: list[FixOffer]


class Lints(TypedDict):
    branch: str
    version: int  # the version these lints are final for
    lints: list[LintRow]


class Locations(TypedDict):
    branch: str
    version: int
    locations: list[Location]


class HoverAnswer(TypedDict):
    branch: str
    version: int
    hover: Hover | None


class Symbols(TypedDict):
    branch: str
    version: int
    symbols: list[Symbol]


class RunShape(TypedDict):
    command: list[str]
    exit_code: int | None  # None: killed (timeout, cancel)
    stdout: str
    stderr: str
    stdout_truncated: bool
    stderr_truncated: bool
    stdout_bytes: int
    stderr_bytes: int
    duration: float
    setup_seconds: float
    timed_out: bool
    cancelled: bool
    ok: bool
    written: list[str]  # paths the run wrote
    mode: str
    path_transparent: bool
    network: bool
    notes: list[str]


class Ran(TypedDict):
    branch: str
    version: int  # after the run (a new one with keep, when it wrote something)
    result: RunShape


class DiffAnswer(TypedDict):
    branch: str
    version: int
    paths: list[str]
    diff: str


class Merged(TypedDict):
    branch: str  # the new branch holding the merge
    version: int
    conflicts: list[str]  # paths that did not merge (git's markers; binary; deleted vs changed)
    files: list[str]


class AcceptedAnswer(TypedDict):
    branch: str
    written: list[str]
    deleted: list[str]
    merged: list[str]  # written with the user's own changes merged in


def cell(value: Any) -> Any:
    """A DataFrame cell as JSON: pandas' missing values (NA, NaN) become None."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if type(value).__name__ == "NAType":
        return None
    return value.item() if hasattr(value, "item") else value


def lint_rows(table: Any, fix_ids: Mapping[int, list[str]]) -> list[LintRow]:
    """One dict per lint row; `fixes` lists {id, title} (ids from `fix_ids[row]`)."""
    rows = []
    for index, record in enumerate(table.drop(columns=["fixes"]).to_dict(orient="records")):
        row = {key: cell(value) for key, value in record.items()}
        fixes = table["fixes"].iloc[index]
        ids = fix_ids.get(index, [])
        row["fixes"] = [{"id": i, "title": f.title} for i, f in zip(ids, fixes, strict=True)]
        rows.append(row)
    return rows  # type: ignore[return-value]  # the table's columns are LintRow's fields


def fix(fix_id: str, value: Fix) -> FixDetail:
    return {
        "id": fix_id,
        "title": value.title,
        "edits": list(value.edits),
    }


def run(result: Any, max_output: int) -> RunShape:
    """A RunResult without its raw overrides (`written` lists the paths), each stream cut to
    `max_output` characters, head and tail (`*_truncated` then true; `*_bytes` the total)."""
    shaped = {name: getattr(result, name) for name in RunShape.__annotations__ if name != "ok"}
    shaped.update(command=list(result.command), notes=list(result.notes),
                  written=sorted(result.written), ok=result.ok)  # fmt: skip
    for stream in ("stdout", "stderr"):
        text, cut = head_and_tail(shaped[stream], max_output)
        shaped[stream] = text
        shaped[f"{stream}_truncated"] = shaped[f"{stream}_truncated"] or cut
    return shaped  # type: ignore[return-value]


def head_and_tail(text: str, limit: int) -> tuple[str, bool]:
    """`text` within `limit` characters: its start and end around a marker line, and whether
    anything was left out."""
    if len(text) <= limit:
        return text, False
    head, tail = text[: limit // 2], text[len(text) - (limit - limit // 2) :]
    left_out = len(text) - len(head) - len(tail)
    marker = f"\n[... {left_out} characters left out; ask with a larger max_output ...]\n"
    return head + marker + tail, True


def branch(value: Any) -> BranchInfo:
    """What list_branches says about one branch."""
    last = value.versions[-1]
    return {
        "name": value.name,
        "version": value.version,
        "last_edit": last.op,
        "files": sorted(value.files),
    }


def changed(before: Mapping[str, bytes | None], after: Mapping[str, bytes | None]) -> list[str]:
    """Paths whose bytes differ between two versions' files."""
    missing = object()
    return sorted(p for p in after if before.get(p, missing) != after[p])


def page(text: str, offset: int, limit: int) -> Page:
    """`limit` characters of `text` from `offset`, saying what follows."""
    content = text[offset : offset + limit]
    end = min(offset, len(text)) + len(content)
    more = end < len(text)
    return {"content": content, "offset": offset, "total_chars": len(text), "more": more,
            "next_offset": end if more else None}  # fmt: skip
