"""What an agent sees each turn, and which feedback each experimental condition shows (pure).

A condition decides what feedback the agent sees and how it is presented: which lints (none,
all of them, or only those its own edits introduced), whether their quick fixes come with
them, whether it sees the output of the task's visible test run, and the prompt template
that presents it all (`templates.TEMPLATES`). The selection below is the single place that
decides it, so "none shows nothing" and "new-only hides pre-existing lints" are properties
of one small function, tested directly.

"New" means introduced by the agent: for a task that starts from a staged version (a mutant,
a base commit), lints are compared with that start (`relative_to_start`), not with the
user's folder.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ..errors import ArgumentError
from .templates import TEMPLATES

LintScope = Literal["none", "all", "new"]

MODES = ("none", "on-edit", "guard", "lint-tool")  # when tool agents see lints (feedback.py)
FORMATS = ("codes", "messages", "fixes")  # in what form
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
    fixes: tuple[str, ...] = ()  # the quick fixes on offer, described (conditions with fixes)

    @property
    def origin(self) -> str:
        return "new" if self.new else "pre-existing"

    def render(self) -> str:
        text = f"{self.path}:{self.line}:{self.column}: {self.code} {self.message} ({self.origin})"
        return text + "".join(f"\n    quick fix: {f}" for f in self.fixes)


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
    fixes: bool = False  # show each lint's quick fixes with it
    template: str = "plain"  # how the prompt presents the feedback (prompt.TEMPLATES)
    # Tool-calling agents (feedback.py): when lints reach the model, and in what form
    feedback: str = "none"  # none | on-edit | guard | lint-tool
    format: str = "messages"  # codes | messages | fixes

    def __post_init__(self) -> None:
        if self.lints not in ("none", "all", "new"):
            raise ArgumentError(f"Condition.lints={self.lints!r}: use 'none', 'all' or 'new'")
        if self.feedback not in MODES or self.format not in FORMATS:
            raise ArgumentError(f"Condition(feedback={self.feedback!r}, format="
                                f"{self.format!r}): use feedback in {', '.join(MODES)} and "
                                f"format in {', '.join(FORMATS)}")  # fmt: skip
        if self.template not in TEMPLATES:
            raise ArgumentError(f"Condition.template={self.template!r}: use one of "
                                f"{', '.join(TEMPLATES)} (or add one to "
                                "templates.TEMPLATES)")  # fmt: skip


CONDITIONS: dict[str, Condition] = {
    "none": Condition("none"),
    "all-lints": Condition("all-lints", lints="all"),
    "new-lints": Condition("new-lints", lints="new"),
    "new-lints+fixes": Condition("new-lints+fixes", lints="new", fixes=True),
    "lints+run": Condition("lints+run", lints="new", run=True),
}


# Tool-calling agents' conditions: a feedback mode, optionally ":format" (default messages)
FEEDBACK: dict[str, Condition] = {name: Condition(name, feedback=name) for name in MODES}


def condition(value: str | Condition) -> Condition:
    """A Condition from its name (see CONDITIONS and FEEDBACK; a feedback mode takes a format
    after a colon, e.g. "on-edit:codes") or itself."""
    if isinstance(value, Condition):
        return value
    if isinstance(value, str):
        mode, _, form = value.partition(":")
        if value in CONDITIONS:
            return CONDITIONS[value]
        if mode in FEEDBACK and (form in FORMATS or not form):
            return Condition(value, feedback=mode, format=form or "messages")
    raise ArgumentError(f"condition {value!r} is unknown; use one of {', '.join(CONDITIONS)}, "
                        f"a feedback mode for tool agents ({', '.join(FEEDBACK)}, with "
                        "':codes', ':messages' or ':fixes'), or a Condition(name, lints=..., "
                        "run=..., fixes=..., template=..., feedback=..., format=...)")  # fmt: skip


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
    template: str = "plain"  # the condition's prompt template


def lints_to_show(cond: Condition, lints: Iterable[LintShown]) -> tuple[LintShown, ...]:
    """The lints condition `cond` shows: none, all, or only those the agent introduced; with
    their quick fixes only when the condition shows fixes."""
    if cond.lints == "none":
        return ()
    shown = tuple(x for x in lints if x.new) if cond.lints == "new" else tuple(lints)
    return shown if cond.fixes else tuple(replace(x, fixes=()) for x in shown)


def run_to_show(cond: Condition, run: RunShown | None) -> RunShown | None:
    return run if cond.run else None


def lints_from_report(report: Any) -> tuple[LintShown, ...]:
    """LintShown rows from a `LintReport` (what `Branch.lint_report` answers)."""
    return tuple(LintShown(lint.path, lint.line, lint.column, lint.code, lint.message,
                           lint.severity, new, tuple(describe_fix(f) for f in lint.fixes))
                 for lint, new in report)  # fmt: skip


def describe_fix(fix: Any) -> str:
    """A quick fix as a prompt shows it: its title and what each edit puts where."""
    edits = [f"{e.line}:{e.column}-{e.end_line}:{e.end_column} -> {e.new_text!r}"
             for e in getattr(fix, "edits", ())]  # fmt: skip
    return str(getattr(fix, "title", fix)) + (f" ({'; '.join(edits)})" if edits else "")


def relative_to_start(lints: Sequence[LintShown], start: Sequence[LintShown],
                      start_texts: Mapping[str, str], texts: Mapping[str, str]
                      ) -> tuple[LintShown, ...]:  # fmt: skip
    """`lints` with `new` recomputed against the task's starting version for the paths the
    start staged (`start_texts`); lints elsewhere keep their flag (their base is the start)."""
    from ..lsp import Lint, mark_new
    from ..paths import RelPath

    def lint(x: LintShown) -> Lint:
        return Lint(RelPath(x.path), x.line, x.column, x.line, x.column, x.severity, x.code, "",
                    x.message)  # fmt: skip

    at = [i for i, x in enumerate(lints) if x.path in start_texts]
    flags = mark_new([lint(lints[i]) for i in at], [lint(x) for x in start],
                     {RelPath(p): t for p, t in start_texts.items()},
                     {RelPath(p): texts[p] for p in start_texts if p in texts})  # fmt: skip
    out = list(lints)
    for i, flag in zip(at, flags, strict=True):
        out[i] = replace(out[i], new=flag)
    return tuple(out)


def tail(text: str, limit: int = RUN_OUTPUT_LIMIT) -> str:
    return text if len(text) <= limit else "[...]\n" + text[-limit:]
