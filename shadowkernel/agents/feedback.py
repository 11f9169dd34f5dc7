"""Lint feedback for tool-calling agents: when lints reach the model, and in what form (pure).

The field disagrees on both, so both are experiment conditions (`observation.FEEDBACK`):

- `none`: no lint ever reaches the model (and it has no lint tool);
- `on-edit`: each edit's tool result carries the lints that edit introduced;
- `guard`: an edit that introduces an error-severity lint is refused (the branch keeps its
  files) and the tool result says why, with those lints; other edits go through silently;
- `lint-tool`: lints only when the model calls the `lint` tool.

The form is a second axis (`FORMATS`): `codes` (where and which rule), `messages` (plus the
severity and the message) and `fixes` (plus the quick fixes the server offers, described).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .observation import FORMATS, MODES, LintShown

__all__ = ["FORMATS", "MODES", "refusal", "refused", "rows", "shown"]


def shown(lint: LintShown, form: str) -> dict[str, Any]:
    """One lint as a tool result carries it, in `form`."""
    row: dict[str, Any] = {"path": lint.path, "line": lint.line, "column": lint.column,
                           "code": lint.code}  # fmt: skip
    if form in ("messages", "fixes"):
        row.update(severity=lint.severity, message=lint.message)
    if form == "fixes":
        row["fixes"] = list(lint.fixes)
    return row


def rows(lints: Sequence[LintShown], form: str) -> list[dict[str, Any]]:
    return [shown(x, form) for x in lints]


def refused(lints: Sequence[LintShown]) -> list[LintShown]:
    """The lints that make the guard refuse an edit: the error-severity ones it introduced."""
    return [x for x in lints if x.new and x.severity.lower() == "error"]


def refusal(lints: Sequence[LintShown], form: str) -> dict[str, Any]:
    """The tool result of a refused edit."""
    count = len(lints)
    return {"refused": True,
            "reason": f"the edit was not staged: it introduces {count} error-severity "
                      f"lint{'s' if count != 1 else ''}; the files are as they were",
            "lints": rows(lints, form)}  # fmt: skip
