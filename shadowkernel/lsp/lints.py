"""Lints as plain values: conversion from LSP diagnostics, delta marking, the lint table.

Positions are 1-based lines and code-point columns; `end_column` is exclusive (it points
just past the last character), as in `ruff check --output-format=json`.
"""

from __future__ import annotations

import hashlib
import inspect
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from lsprotocol import types as lsp

from ..errors import ArgumentError
from ..paths import RelPath
from ..text.ranges import TextEdit
from .documents import TextIndex
from .linemap import LineMap, line_map

SEVERITIES = {1: "error", 2: "warning", 3: "information", 4: "hint"}

COLUMNS = (
    "branch", "version", "path", "line", "column", "end_line", "end_column",
    "severity", "code", "source", "message", "new", "fixes",
)  # fmt: skip


@dataclass(frozen=True)
class Fix:
    """A quick fix offered by the server for a lint (a code action).

    `against` remembers the text each edited file had when the fix was computed (path and
    `text_digest`): its positions hold for that text only, so `Branch.apply_edit` refuses the
    fix once one of those files changed (other files may change freely). A fix built by hand
    has none, and is applied to whatever text the file has."""

    title: str
    edits: tuple[TextEdit, ...] = ()  # the replacements the fix makes
    against: tuple[tuple[RelPath, str], ...] = field(default=(), compare=False, repr=False)

    def __str__(self) -> str:
        return self.title

    def changed(self, read: Callable[[RelPath], str | None]) -> list[RelPath]:
        """The files this fix edits whose text (`read(path)`) is no longer the one it was
        computed for."""
        return [path for path, digest in self.against
                if (text := read(path)) is None or text_digest(text) != digest]  # fmt: skip


def text_digest(text: str) -> str:
    """What identifies a file's text for `Fix.against` (its UTF-8 bytes' BLAKE2b)."""
    data = text.encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=16).hexdigest()


@dataclass(frozen=True)
class Lint:
    path: RelPath
    line: int
    column: int
    end_line: int
    end_column: int
    severity: str
    code: str
    source: str
    message: str
    fixes: tuple[Fix, ...] = ()

    @property
    def key(self) -> tuple[str, str, str]:
        """What makes two lints 'the same problem' across versions of a file."""
        return (self.code, self.source, self.message)


def lint_from_diagnostic(
    path: RelPath, index: TextIndex, diagnostic: lsp.Diagnostic, default_source: str
) -> Lint:
    line, column, end_line, end_column = index.span(diagnostic.range)
    code = diagnostic.code
    return Lint(
        path=path,
        line=line,
        column=column,
        end_line=end_line,
        end_column=end_column,
        # A diagnostic without severity is shown as an error by editors; do the same.
        severity=SEVERITIES.get(int(diagnostic.severity or 1), "error"),
        code="" if code is None else str(code),
        source=diagnostic.source or default_source,
        message=diagnostic.message,
    )


def mark_new(
    lints: Sequence[Lint],
    base_lints: Iterable[Lint],
    base_texts: Mapping[RelPath, str | bytes],
    new_texts: Mapping[RelPath, str | bytes],
) -> list[bool]:
    """For each lint: True when the edit introduced it (see `flag_new`). Paths absent from
    both mappings are unchanged; a path only in `new_texts` is a new file."""
    maps = {p: line_map(_bytes(base_texts.get(p, b"")), _bytes(text))
            for p, text in new_texts.items()}  # fmt: skip
    return flag_new(lints, base_lints, maps)


def flag_new(
    lints: Sequence[Lint], base_lints: Iterable[Lint], maps: Mapping[RelPath, LineMap]
) -> list[bool]:
    """For each lint: True when the edit introduced it.

    A lint is old when an equal one (same code, source, message) exists in the base on the
    line its line maps from (`linemap.line_map`: unchanged lines, and lines the edit touched
    but kept); each base lint excuses one lint only. A path without a map is unchanged (its
    lines map to themselves). A lint about the whole file (`about_the_file`: ruff's EXE002,
    D100, INP001) is old when the base had it, whatever lines an edit put above line 1.
    """
    available = Counter(_slot(b, b.line) for b in base_lints)
    flags = []
    for lint in lints:
        mapping = maps.get(lint.path)
        base_line = lint.line if mapping is None else mapping.get(lint.line)
        slot = None if base_line is None and not about_the_file(lint) else _slot(lint, base_line)
        if slot is not None and available[slot] > 0:
            available[slot] -= 1
            flags.append(False)
        else:
            flags.append(True)
    return flags


def about_the_file(lint: Lint) -> bool:
    """A lint on an empty range at the file's very start: servers put there what concerns the
    file as a whole (a missing shebang or docstring), not its first line."""
    return lint.line == lint.column == lint.end_line == lint.end_column == 1


def _slot(lint: Lint, line: int | None) -> tuple[object, ...]:
    return (lint.path, "file" if about_the_file(lint) else line, lint.key)


def _bytes(text: str | bytes) -> bytes:
    return text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text


def sort_key(lint: Lint) -> tuple[str, int, int, str, str]:
    return (lint.path, lint.line, lint.column, lint.source, lint.code)


@dataclass(frozen=True)
class LintReport:
    """The lints of one version of a branch as records, sorted by path and position, each
    with its `new` flag (True: the branch introduced it): what the lint table lays out, for
    callers that read rows rather than a DataFrame (the MCP server, the agent loops). A
    table costs 0.1 ms alone and three to four times that between a busy server's answers."""

    branch: str
    version: int
    lints: tuple[Lint, ...]
    new: tuple[bool, ...]

    @classmethod
    def of(
        cls, branch: str, version: int, lints: Sequence[Lint], new: Sequence[bool]
    ) -> LintReport:
        if len(new) != len(lints):
            raise ArgumentError(f"{len(new)} new flags for {len(lints)} lints; one per lint")
        ordered = sorted(zip(lints, new, strict=True), key=lambda pair: sort_key(pair[0]))
        return cls(
            branch, version, tuple(lint for lint, _ in ordered), tuple(n for _, n in ordered)
        )

    def __len__(self) -> int:
        return len(self.lints)

    def __iter__(self) -> Iterator[tuple[Lint, bool]]:
        return zip(self.lints, self.new, strict=True)

    def only_new(self) -> LintReport:
        """The lints the branch introduced."""
        kept = [(lint, new) for lint, new in self if new]
        return LintReport(
            self.branch, self.version, tuple(lint for lint, _ in kept), (True,) * len(kept)
        )

    def table(self) -> pd.DataFrame:
        """The lint table (`lint_table`), `attrs` naming the branch and version."""
        table = lint_table(self.lints, self.branch, self.version, self.new)
        table.attrs.update(branch=self.branch, version=self.version)
        return table

    def _repr_html_(self) -> str:
        """In a notebook a report shows as its table."""
        return str(self.table()._repr_html_())


def lint_table(
    lints: Sequence[Lint],
    branch: str | None = None,
    version: int | None = None,
    new_flags: Sequence[bool] | None = None,
) -> pd.DataFrame:
    """The lint table: one row per lint, columns `COLUMNS`, sorted by path and position.

    `new` is a nullable boolean, NA when no flags are given; `fixes` holds a tuple of `Fix`.
    """
    if new_flags is not None and len(new_flags) != len(lints):
        raise ArgumentError(
            f"new_flags has {len(new_flags)} entries for {len(lints)} lints; "
            "pass one flag per lint (see mark_new)"
        )
    flags: Sequence[bool | None] = new_flags if new_flags is not None else [None] * len(lints)
    ordered = sorted(zip(lints, flags, strict=True), key=lambda lf: sort_key(lf[0]))
    rows = [lint for lint, _ in ordered]
    n = len(rows)
    # Columns built as typed arrays and handed over without copies or inference: a table per
    # lint answer is on the agents' hot path (pandas' inference was most of its cost).
    # An empty table (a clean file: the common answer) keeps the object columns it always
    # had, built as such: converting them afterwards cost a millisecond per answer.
    text = _text if n else _objects
    numbered = version is not None and n > 0
    columns: dict[str, object] = {
        "branch": _objects([branch] * n) if branch is None else text([branch] * n),
        "version": np.full(n, version, np.int64) if numbered else _objects([None] * n),
        **{name: text([getattr(lint, name) for lint in rows]) for name in _TEXT},
        **{name: np.fromiter((getattr(r, name) for r in rows), np.int64, n) for name in _INTS},
        "new": _booleans([flag for _, flag in ordered], given=new_flags is not None),
        "fixes": _objects([lint.fixes for lint in rows]),
    }
    return _frame([columns[name] for name in COLUMNS], n)


_COLUMNS = pd.Index(COLUMNS)


def _frame(arrays: list[object], n: int) -> pd.DataFrame:
    """The table from its typed columns, in order, without pandas' checks of a dict's columns
    (two thirds of a small table's cost); the public constructor where pandas lacks the
    shortcut."""
    if hasattr(pd.DataFrame, "_from_arrays"):
        return pd.DataFrame._from_arrays(arrays, columns=_COLUMNS, index=pd.RangeIndex(n),
                                         verify_integrity=False)  # fmt: skip
    return pd.DataFrame(dict(zip(COLUMNS, arrays, strict=True)), copy=False)


def _objects(values: list[object]) -> np.ndarray:
    array = np.empty(len(values), dtype=object)
    array[:] = values
    return array


# What pandas makes of a column of str (a StringDtype in pandas 3, object before).
_TEXT_DTYPE = pd.Series(["text"]).dtype


# StringArray's own constructor only checks the values: a third of pd.array's cost per column.
# Where it fits: python storage, and a constructor that takes the dtype (pandas 3).
_STRING_ARRAY = (
    isinstance(_TEXT_DTYPE, pd.StringDtype)
    and _TEXT_DTYPE.storage == "python"
    and ("dtype" in inspect.signature(pd.arrays.StringArray).parameters)
)


def _text(values: list[object]) -> object:
    array = _objects(values)
    if _STRING_ARRAY:
        return pd.arrays.StringArray(array, dtype=_TEXT_DTYPE)
    return pd.array(array, dtype=_TEXT_DTYPE) if isinstance(_TEXT_DTYPE, pd.StringDtype) else array


def _booleans(flags: list[bool | None], given: bool) -> pd.arrays.BooleanArray:
    values = np.array([bool(f) for f in flags], dtype=bool)
    return pd.arrays.BooleanArray(values, np.full(len(flags), not given))


_INTS = ("line", "column", "end_line", "end_column")
_TEXT = ("path", "severity", "code", "source", "message")
