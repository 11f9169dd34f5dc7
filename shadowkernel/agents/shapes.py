"""JSON shapes of the tools' results: plain dicts of str, int, float, bool, None and lists.

Each tool's result type is a TypedDict here, every field described for a model
(`Annotated[type, Doc("...")]`, PEP 727's marker): `toolspec.output_schema` makes the tool's
output schema from it, so clients know the fields and what they mean before they call, and a
field without a description does not get a schema. Locations, symbols, hovers and fix edits
are the API's frozen dataclasses turned into dicts (`plain`), described here field by field.
The functions are pure conversions from the public API's values (lint tables, run results,
...); positions stay 1-based with exclusive ends, as in the Python API. A lint's quick fixes
are named by ids (`"<version>.<n>"`) that `apply_fix` takes back.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal

from typing_extensions import Doc, TypedDict  # pydantic reads typing's only from Python 3.12

from ..lsp import Fix

JSON = dict[str, Any]

# The fields many results share, described once.
BranchName = Annotated[str, Doc("the branch's name")]
Version = Annotated[int, Doc(
    "the branch's version this answer is for: 0 is its fork of the user's files, each "
    "staging call (and a run with keep) makes the next")]  # fmt: skip
Path = Annotated[str, Doc("a path relative to the project's root, '/'-separated")]
Paths = Annotated[list[str], Doc("paths relative to the project's root")]
Line = Annotated[int, Doc("the first line, 1-based")]
Column = Annotated[int, Doc("the first column, 1-based, in characters")]
EndLine = Annotated[int, Doc("the last line, 1-based")]
EndColumn = Annotated[int, Doc("the column just after the last character, 1-based "
                               "(exclusive)")]  # fmt: skip


class Created(TypedDict):
    branch: Annotated[str, Doc("the new branch's name")]
    version: Annotated[int, Doc("its version: 0, the user's files as they are")]


class Dropped(TypedDict):
    branch: Annotated[str, Doc("the dropped branch's name")]
    dropped: Annotated[str, Doc("the same name (kept for clients that read it)")]


class Committed(TypedDict):
    branch: BranchName
    version: Annotated[int, Doc("the branch's version the commit holds")]
    commit: Annotated[str, Doc("the new commit's id (a full hexadecimal object name)")]
    ref: Annotated[str, Doc("the ref now pointing at it, e.g. 'refs/heads/agent/NAME'")]


class BranchInfo(TypedDict):
    name: BranchName
    version: Annotated[int, Doc("its current version (0: nothing staged yet)")]
    last_edit: Annotated[
        str, Doc("what made the current version: 'write pkg/mod.py', 'patch (2 files)', ...")
    ]
    files: Annotated[list[str], Doc("every path the branch changed (written or deleted)")]


class Branches(TypedDict):
    branches: Annotated[list[BranchInfo], Doc("every open branch")]


class Page(TypedDict):
    content: Annotated[str, Doc("the page's text")]
    offset: Annotated[int, Doc("where content starts in the file, in characters (0-based)")]
    total_chars: Annotated[int, Doc("the whole file's length in characters")]
    more: Annotated[bool, Doc("whether characters follow this page (read again from "
                              "next_offset)")]  # fmt: skip
    next_offset: Annotated[
        int | None,
        Doc("the offset to read the rest from; null when this page reaches the file's end"),
    ]


class FileText(Page):
    branch: BranchName
    version: Version
    path: Path


Kind = Literal["file", "dir", "symlink"]  # of a folder's entry


class Entry(TypedDict):
    name: Annotated[str, Doc("the entry's name in its folder")]
    path: Path
    kind: Annotated[Kind, Doc("what the entry is")]


class Listing(TypedDict):
    branch: BranchName
    version: Version
    path: Annotated[str, Doc("the folder listed ('' is the project's root)")]
    entries: Annotated[
        list[Entry],
        Doc("its entries, by name; protected paths (.git, the protect= globs) are left out"),
    ]


class Staged(TypedDict):
    branch: BranchName
    version: Annotated[int, Doc("the new version this call made")]
    op: Annotated[str, Doc("what made it, as list_branches shows it: 'write pkg/mod.py', ...")]
    changed: Annotated[list[str], Doc("the paths whose content this version changed")]


class FixOffer(TypedDict):
    id: Annotated[str, Doc("the fix's id for apply_fix ('<version>.<n>')")]
    title: Annotated[str, Doc("what the fix does, as the language server says it")]


class Edit(TypedDict):
    path: Path
    line: Line
    column: Column
    end_line: EndLine
    end_column: EndColumn
    new_text: Annotated[str, Doc("the text that replaces the range (empty: a deletion)")]


class FixDetail(TypedDict):
    id: Annotated[str, Doc("the fix's id, as the lint row offered it")]
    title: Annotated[str, Doc("what the fix does")]
    edits: Annotated[list[Edit], Doc("the text edits it made, positions in the text before")]


class FixApplied(Staged):
    fix: Annotated[FixDetail, Doc("the fix applied")]


class LintRow(TypedDict):
    branch: BranchName
    version: Annotated[int, Doc("the version linted")]
    path: Path
    line: Line
    column: Column
    end_line: EndLine
    end_column: EndColumn
    severity: Annotated[str, Doc(
        "'error', 'warning', 'information' or 'hint' (a checker's own word, e.g. mypy's "
        "'note', is kept)")]  # fmt: skip
    code: Annotated[str, Doc("the rule's code, e.g. 'F401' ('' when the server gives none)")]
    source: Annotated[str, Doc("the server or checker that reported it, e.g. 'Ruff'")]
    message: Annotated[str, Doc("what is wrong, in the server's words")]
    new: Annotated[
        bool | None,
        Doc(
            "true: the branch's edits introduced it; false: the user's files had it already "
            "(same code and message on the line the edit maps it from); null: not known"
        ),
    ]
    fixes: Annotated[list[FixOffer], Doc("quick fixes offered for it: pass an id to apply_fix")]


class Lints(TypedDict):
    branch: BranchName
    version: Annotated[int, Doc("the version these lints are final for")]
    lints: Annotated[list[LintRow], Doc("one row per lint, by path and position")]


class Place(TypedDict):
    path: Annotated[
        str, Doc("relative to the project's root, or absolute when in_workspace is false")
    ]
    line: Line
    column: Column
    end_line: EndLine
    end_column: EndColumn
    in_workspace: Annotated[
        bool, Doc("false for a file outside the project (a stub, an installed package)")
    ]


class Locations(TypedDict):
    branch: BranchName
    version: Version
    locations: Annotated[
        list[Place],
        Doc("where, by path and range (empty: nowhere known); protected paths are left out"),
    ]


class HoverText(TypedDict):
    text: Annotated[str, Doc("the hover text (markdown: type, signature, docs)")]
    line: Annotated[int | None, Doc("the first line of the range it is about, or null")]
    column: Annotated[int | None, Doc("its first column, or null")]
    end_line: Annotated[int | None, Doc("its last line, or null")]
    end_column: Annotated[int | None, Doc("the column after its end (exclusive), or null")]


class HoverAnswer(TypedDict):
    branch: BranchName
    version: Version
    hover: Annotated[HoverText | None, Doc("null: the servers have nothing to show there")]


class SymbolInfo(TypedDict):
    name: Annotated[str, Doc("the symbol's name")]
    kind: Annotated[str, Doc("its LSP kind in lower case: 'class', 'function', 'method', "
                             "'variable', 'constant', 'module', ...")]  # fmt: skip
    path: Path
    line: Line
    column: Column
    end_line: EndLine
    end_column: EndColumn
    container: Annotated[str | None, Doc("the name of the symbol holding it, or null")]
    detail: Annotated[str | None, Doc("more from the server (a signature), or null")]


class Symbols(TypedDict):
    branch: BranchName
    version: Version
    symbols: Annotated[list[SymbolInfo], Doc("the symbols found, less those in protected paths")]


class RunShape(TypedDict):
    command: Annotated[list[str], Doc("the command line run (bash -c and the command)")]
    exit_code: Annotated[int | None, Doc("its exit status; null when it was killed (timed "
                                         "out, cancelled)")]  # fmt: skip
    stdout: Annotated[str, Doc("its standard output, at most max_output characters: head and "
                               "tail around a marker line when cut")]  # fmt: skip
    stderr: Annotated[str, Doc("its standard error, cut as stdout is")]
    stdout_truncated: Annotated[bool, Doc("whether stdout was cut")]
    stderr_truncated: Annotated[bool, Doc("whether stderr was cut")]
    stdout_bytes: Annotated[int, Doc("how many bytes the run wrote to stdout in all")]
    stderr_bytes: Annotated[int, Doc("how many bytes the run wrote to stderr in all")]
    duration: Annotated[float, Doc("seconds the command ran")]
    setup_seconds: Annotated[float, Doc("seconds spent preparing its sandbox")]
    queue_seconds: Annotated[float, Doc("seconds it waited for its turn before that")]
    timed_out: Annotated[bool, Doc("killed at its timeout")]
    cancelled: Annotated[bool, Doc("cancelled by the client (or the branch dropped)")]
    out_of_memory: Annotated[bool, Doc("processes of it were killed at its memory cap")]
    ok: Annotated[bool, Doc("exit status 0, and not timed out, cancelled or out of memory")]
    written: Annotated[list[str], Doc("the paths under the project the run wrote or deleted")]
    mode: Annotated[str, Doc("how the shadow was shown to it: 'overlayfs', 'fuse', "
                             "'fuse-at-mountpoint' or 'copy'")]  # fmt: skip
    path_transparent: Annotated[bool, Doc("whether it saw the project at the user's own "
                                          "path (else at the shadow's)")]  # fmt: skip
    network: Annotated[bool, Doc("whether it could reach the network")]
    notes: Annotated[list[str], Doc("what the run layer noticed: what keep left out, ...")]


class Ran(TypedDict):
    branch: BranchName
    version: Annotated[int, Doc("the branch's version after the run (a new one with keep, "
                                "when it wrote something)")]  # fmt: skip
    result: Annotated[RunShape, Doc("the run's outcome")]


class DiffAnswer(TypedDict):
    branch: BranchName
    version: Version
    paths: Annotated[list[str], Doc("the paths the branch changed against its base")]
    diff: Annotated[str, Doc("a unified diff (git style) of those changes; '' when none")]


class Merged(TypedDict):
    branch: Annotated[str, Doc("the new branch holding the merge")]
    version: Annotated[int, Doc("its version")]
    conflicts: Annotated[
        list[str],
        Doc(
            "paths that did not merge: git's conflict markers in the text, a binary file both "
            "changed, a file one side deleted; stage each again before accepting"
        ),
    ]
    files: Annotated[list[str], Doc("every path the merge branch changed")]


class AcceptedAnswer(TypedDict):
    branch: BranchName
    written: Annotated[list[str], Doc("paths written into the user's folder")]
    deleted: Annotated[list[str], Doc("paths deleted from it")]
    merged: Annotated[list[str], Doc("of those written, the ones merged with the user's own "
                                     "changes (three-way)")]  # fmt: skip


def lint_rows(report: Any, fix_ids: Mapping[int, list[str]]) -> list[LintRow]:
    """One dict per lint of a `LintReport`, in the lint table's columns; `fixes` lists
    {id, title} (ids from `fix_ids[row]`)."""
    return [{"branch": report.branch, "version": report.version, "path": lint.path,
             "line": lint.line, "column": lint.column, "end_line": lint.end_line,
             "end_column": lint.end_column, "severity": lint.severity, "code": lint.code,
             "source": lint.source, "message": lint.message, "new": new,
             "fixes": [{"id": i, "title": f.title}
                       for i, f in zip(fix_ids.get(index, []), lint.fixes, strict=True)]}
            for index, (lint, new) in enumerate(report)]  # fmt: skip


def fix(fix_id: str, value: Fix) -> FixDetail:
    return {"id": fix_id, "title": value.title, "edits": plain(value.edits)}


def plain(values: Iterable[Any]) -> list[Any]:
    """The API's frozen dataclasses (locations, symbols, text edits) as dicts: `Place`,
    `SymbolInfo`, `Edit`."""
    return [dataclasses.asdict(v) for v in values]


def hover(value: Any) -> HoverText | None:
    return None if value is None else dataclasses.asdict(value)  # type: ignore[return-value]


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
