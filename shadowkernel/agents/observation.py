"""What an agent sees each turn, and which feedback each experimental condition shows (pure).

A condition decides two things: which lints the agent sees (none, all of them, or only those
its own edits introduced) and whether it sees the output of the task's visible command. The
selection below is the single place that decides it, so "none shows nothing" and "new-only
hides pre-existing lints" are properties of one small function, tested directly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

LintScope = Literal["none", "all", "new"]

RUN_OUTPUT_LIMIT = 4000  # characters of the visible command's output an agent is shown


@dataclass(frozen=True)
class LintShown:
    """One lint as an agent sees it (1-based line and column)."""

    path: str
    line: int
    column: int
    code: str
    message: str
    severity: str
    new: bool  # introduced by the agent's edits (False: it was already in the project)

    def render(self) -> str:
        origin = "new" if self.new else "pre-existing"
        return f"{self.path}:{self.line}:{self.column}: {self.code} {self.message} ({origin})"


@dataclass(frozen=True)
class RunShown:
    """The outcome of the task's visible command, as an agent sees it."""

    command: str
    exit_code: int | None
    output: str  # the tail of stdout and stderr, at most RUN_OUTPUT_LIMIT characters

    def render(self) -> str:
        return f"$ {self.command}\n(exit code {self.exit_code})\n{self.output}"


@dataclass(frozen=True)
class Condition:
    """One feedback condition of the experiment."""

    name: str
    lints: LintScope = "none"
    run: bool = False

    def __post_init__(self) -> None:
        if self.lints not in ("none", "all", "new"):
            raise ValueError(f"Condition.lints={self.lints!r}: use 'none', 'all' or 'new'")


CONDITIONS: dict[str, Condition] = {
    "none": Condition("none"),
    "all-lints": Condition("all-lints", lints="all"),
    "new-lints": Condition("new-lints", lints="new"),
    "lints+run": Condition("lints+run", lints="new", run=True),
}


def condition(value: str | Condition) -> Condition:
    """A Condition from its name (see CONDITIONS) or itself."""
    if isinstance(value, Condition):
        return value
    try:
        return CONDITIONS[value]
    except (KeyError, TypeError):
        raise ValueError(f"condition {value!r} is unknown; use one of {', '.join(CONDITIONS)} "
                         "or a Condition(name, lints=..., run=...)") from None  # fmt: skip


@dataclass(frozen=True)
class Observation:
    """Everything an agent is given for one turn."""

    task: str  # the task statement
    files: Mapping[str, str]  # path -> the branch's current text (focus files, edited files)
    lints: tuple[LintShown, ...] = ()  # what the condition shows of the last version's lints
    run: RunShown | None = None  # the visible command's outcome, when the condition shows it
    turn: int = 0
    task_id: str = ""
    condition: str = "none"
    seed: int = 0  # the experiment cell's seed: agents draw their randomness from it
    history: tuple[str, ...] = ()  # one line per earlier turn (what was staged, what failed)
    extra: Mapping[str, Any] = field(default_factory=dict)


def lints_to_show(cond: Condition, lints: Iterable[LintShown]) -> tuple[LintShown, ...]:
    """The lints condition `cond` shows: none, all, or only those the agent introduced."""
    if cond.lints == "none":
        return ()
    if cond.lints == "new":
        return tuple(x for x in lints if x.new)
    return tuple(lints)


def run_to_show(cond: Condition, run: RunShown | None) -> RunShown | None:
    return run if cond.run else None


def lints_from_table(table: Any) -> tuple[LintShown, ...]:
    """LintShown rows from a LintTable (a lint whose origin is unknown counts as new)."""
    rows = []
    for r in table.itertuples(index=False):
        new = True if r.new is None or r.new != r.new else bool(r.new)  # None/NaN: unknown
        rows.append(LintShown(str(r.path), int(r.line), int(r.column), str(r.code or ""),
                              str(r.message), str(r.severity), new))  # fmt: skip
    return tuple(rows)


def tail(text: str, limit: int = RUN_OUTPUT_LIMIT) -> str:
    return text if len(text) <= limit else "[...]\n" + text[-limit:]
