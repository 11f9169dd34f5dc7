"""How a prompt presents lints: the templates a condition names (pure).

A template either renders the lints as a section of their own (`plain`, `table`, `json`) or
annotates the files' text under the offending lines (`inline`). Register another by adding a
`Template` to `TEMPLATES`; a `Condition(template=...)` names it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from ..text import positions

if TYPE_CHECKING:
    from .observation import LintShown


@dataclass(frozen=True)
class Template:
    """How lints are presented: a section of their own, or notes inside the files' text."""

    section: Callable[[Sequence[LintShown]], str] | None  # lints -> section body
    inline: bool = False  # annotate the files under the offending lines instead


def _table(lints: Sequence[LintShown]) -> str:
    rows = ["| file | line | col | code | message | origin | quick fixes |", "|---" * 7 + "|"]
    rows += [f"| {x.path} | {x.line} | {x.column} | {x.code} | {x.message.replace('|', '/')} "
             f"| {x.origin} | {'; '.join(x.fixes)} |" for x in lints]  # fmt: skip
    return "\n".join(rows)


def _json(lints: Sequence[LintShown]) -> str:
    return "\n".join(json.dumps(asdict(x), sort_keys=True) for x in lints)


TEMPLATES: dict[str, Template] = {
    "plain": Template(lambda lints: "\n".join(x.render() for x in lints)),
    "table": Template(_table),
    "json": Template(_json),
    "inline": Template(None, inline=True),
}


def annotate(path: str, text: str, lints: Sequence[LintShown]) -> str:
    """`text` with a comment under each line that has a lint (the `inline` template); lints
    count lines as LSP does, so the text is split the same way."""
    lines = positions.split_lines(positions.terminated(text), keepends=True)
    notes: dict[int, list[str]] = {}
    for x in lints:
        if x.path == path:
            fixes = "".join(f"; quick fix: {f}" for f in x.fixes)
            notes.setdefault(min(max(x.line, 1), max(len(lines), 1)), []).append(
                f"# ^ lint {x.code} {x.message} ({x.origin}, col {x.column}){fixes}\n")  # fmt: skip
    out = []
    for number, line in enumerate(lines, 1):
        indent = line[: len(line) - len(line.lstrip(" \t"))] if line.strip() else ""
        out += [line, *(indent + n for n in notes.get(number, []))]
    return "".join(out)
