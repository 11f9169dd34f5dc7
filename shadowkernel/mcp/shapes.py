"""JSON shapes of the tools' results: plain dicts of str, int, float, bool, None and lists.

Pure functions from the public API's values (lint tables, locations, run results, ...) to
what a tool returns; positions stay 1-based with exclusive ends, as in the Python API.
A lint's quick fixes are named by ids (`"<version>.<n>"`) that `apply_fix` takes back.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from typing import Any

from ..lsp import Fix

JSON = dict[str, Any]


def cell(value: Any) -> Any:
    """A DataFrame cell as JSON: pandas' missing values (NA, NaN) become None."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if type(value).__name__ == "NAType":
        return None
    return value.item() if hasattr(value, "item") else value


def lint_rows(table: Any, fix_ids: Mapping[int, list[str]]) -> list[JSON]:
    """One dict per lint row; `fixes` lists {id, title} (ids from `fix_ids[row]`)."""
    rows = []
    for index, record in enumerate(table.drop(columns=["fixes"]).to_dict(orient="records")):
        row = {key: cell(value) for key, value in record.items()}
        fixes = table["fixes"].iloc[index]
        ids = fix_ids.get(index, [])
        row["fixes"] = [{"id": i, "title": f.title} for i, f in zip(ids, fixes, strict=True)]
        rows.append(row)
    return rows


def fix(fix_id: str, value: Fix) -> JSON:
    return {
        "id": fix_id,
        "title": value.title,
        "edits": [dataclasses.asdict(e) for e in value.edits],
    }


def values(items: Iterable[Any]) -> list[JSON]:
    """Frozen dataclasses (Location, Symbol, ...) as dicts."""
    return [dataclasses.asdict(item) for item in items]


def run(result: Any) -> JSON:
    """A RunResult without its raw overrides: `written` lists the paths."""
    shaped = {f.name: getattr(result, f.name) for f in dataclasses.fields(result)}
    shaped["command"] = list(result.command)
    shaped["notes"] = list(result.notes)
    shaped["written"] = sorted(result.written)
    shaped["ok"] = result.ok
    return shaped


def branch(value: Any) -> JSON:
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
