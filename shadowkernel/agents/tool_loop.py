"""The tool-calling loop: a model calls the shadow's tools on one branch until it finishes.

One episode is one task on one branch under one condition. The model gets the task and the
tools of the MCP server's table (`tools.Tools`: read, list, write, replace, patch, navigation,
run, and `lint` in the "lint-tool" condition) with the branch argument bound to the cell's
branch, plus `finish`. Each model request is one `Step`: its reported tokens, the edits it
staged, the lints its tool results carried. The episode ends when the model calls `finish`,
answers without a tool call, or has made `max_turns` requests; the task's hidden tests then
decide it.

The condition decides what lints the model sees (`feedback.py`): after each edit the files it
changed are linted before and after, and the lints the edit introduced are those `mark_new`
finds new against the version before it. The model-specific part is small (`ChatFormat`:
how a request is built, a response read, tool results appended); every request goes through
`transcript.exchange`, so an experiment records and replays them.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from ..errors import ArgumentError, ShadowError
from . import edits as E
from . import feedback
from .loop import CheckResult, Episode, Step, error_text, start_texts, started
from .observation import Condition, LintShown, lints_from_report, relative_to_start
from .observation import condition as as_condition
from .transcript import JSON, exchange

# The MCP table's tools a tool agent is given (the branch argument bound to its cell's branch)
TOOLS = ("read_file", "list_files", "write_file", "replace_in_file", "apply_patch",
         "delete_file", "definition", "references", "hover", "symbols", "run")  # fmt: skip
EDITS = ("write_file", "replace_in_file", "apply_patch", "delete_file")
FINISH: JSON = {
    "name": "finish",
    "description": "Say that the task is done: the branch's current files are your answer.",
    "input_schema": {"type": "object", "properties": {
        "summary": {"type": "string", "description": "What you changed, in a sentence."}},
        "required": [], "additionalProperties": False},
}  # fmt: skip

SYSTEM = """\
You are a careful software engineer fixing a Python project. You work through tools on a \
private branch of the project: read and list files, edit them (each edit makes a new \
version), look up definitions, and run commands. When the task is done, call finish."""


@dataclass(frozen=True)
class Call:
    id: str
    name: str
    arguments: str | dict[str, Any]  # JSON text (chat completions) or an object (Messages)


@dataclass(frozen=True)
class Reply:
    text: str
    calls: tuple[Call, ...]
    prompt_tokens: int | None
    completion_tokens: int | None


class ChatFormat(Protocol):
    """How one API spells a conversation with tools (chat completions, Messages)."""

    def request(self, system: str, messages: list[JSON], tools: list[JSON]) -> JSON: ...
    def reply(self, response: JSON) -> Reply: ...
    def assistant(self, response: JSON) -> JSON: ...
    def results(self, answers: list[tuple[Call, str, bool]]) -> list[JSON]: ...


# -- the tools of one cell ------------------------------------------------------------------------


@dataclass
class Session:
    """The tools of one cell: the table's methods with the branch bound, and the feedback."""

    branch: Any
    task: Any
    condition: Condition
    table: Any  # tools.Tools over the branch's workspace
    finished: bool = False
    shown: list[LintShown] = field(default_factory=list)  # lints the last call's result carried
    staged: list[dict[str, str]] = field(default_factory=list)
    start_lints: tuple[LintShown, ...] = ()  # of the task's starting version ("lint-tool")

    def specs(self) -> list[JSON]:
        """Each tool as {name, description, input_schema} (the branch parameter removed)."""
        names = [*TOOLS, "lint"] if self.condition.feedback == "lint-tool" else list(TOOLS)
        by_name = {spec.name: spec for spec in self.table.specs()}
        return [bound_spec(by_name[n]) for n in names if n in by_name] + [FINISH]

    @functools.cached_property
    def offered(self) -> frozenset[str]:
        return frozenset(s["name"] for s in self.specs())

    def call(self, name: str, arguments: str | dict[str, Any]) -> tuple[str, bool]:
        """(the tool result as JSON text, whether it is an error)."""
        self.shown = []
        try:
            args = parse_arguments(arguments)
            result = self._dispatch(name, args)
        except (ShadowError, ValueError, TypeError) as e:
            return json.dumps({"error": " ".join(str(e).split()) or type(e).__name__}), True
        if isinstance(result, dict):  # the branch is bound: its name (which names the cell's
            result = {k: v for k, v in result.items() if k != "branch"}  # condition) stays out
        return json.dumps(result, sort_keys=True, default=_plain), False

    def _dispatch(self, name: str, args: dict[str, Any]) -> Any:
        if name == "finish":
            self.finished = True
            return {"finished": True}
        if name not in self.offered:
            raise ArgumentError(f"no tool {name!r}; the tools are "
                                f"{', '.join(sorted(self.offered))}")  # fmt: skip
        if name == "lint":
            return self._lint(args)
        method = getattr(self.table, name)
        if name not in EDITS or self.condition.feedback in ("none", "lint-tool"):
            result = method(self.branch.name, **args)
            self._note_edit(name, args, result)
            return result
        return self._edit_with_feedback(name, method, args)

    def _edit_with_feedback(self, name: str, method: Callable[..., Any], args: JSON) -> Any:
        paths = edited_paths(name, args)
        before_texts = {p: t for p in paths if (t := self._read(p)) is not None}
        before = self._lints(sorted(before_texts))
        result = method(self.branch.name, **args)
        after_texts = {p: t for p in paths if (t := self._read(p)) is not None}
        after = self._lints(sorted(after_texts))
        introduced = [x for x in relative_to_start(after, before, before_texts, after_texts)
                      if x.new]  # fmt: skip
        form = self.condition.format
        if self.condition.feedback == "guard":
            errors = feedback.refused(introduced)
            if errors:
                self._restore(paths, before_texts)
                self.shown = errors
                return feedback.refusal(errors, form)
            self._note_edit(name, args, result)
            return result
        self.shown = introduced
        self._note_edit(name, args, result)
        return {**result, "lints": feedback.rows(introduced, form)}

    def _lint(self, args: JSON) -> JSON:
        paths = args.get("paths") or sorted({*self.task.files, *self.branch.files})
        report = self.branch.lint_report(paths, bool(args.get("new_only", False)),
                                         servers=args.get("servers"))  # fmt: skip
        lints = lints_from_report(report)
        start = start_texts(self.task)
        if start:
            texts = {p: t for p in start if (t := self._read(p)) is not None}
            lints = relative_to_start(lints, self.start_lints, start, texts)
        if args.get("new_only"):
            lints = tuple(x for x in lints if x.new)
        self.shown = list(lints)
        return {"version": report.version,
                "lints": feedback.rows(lints, self.condition.format)}  # fmt: skip

    def _lints(self, paths: Sequence[str]) -> tuple[LintShown, ...]:
        return lints_from_report(self.branch.lint_report(list(paths))) if paths else ()

    def _read(self, path: str) -> str | None:
        try:
            return self.branch.read(path)
        except (ShadowError, ValueError):
            return None

    def _restore(self, paths: Sequence[str], texts: dict[str, str]) -> None:
        for path in paths:
            if path in texts:
                if self._read(path) != texts[path]:
                    self.branch.write(path, texts[path])
            elif self._read(path) is not None:
                self.branch.delete(path)

    def _note_edit(self, name: str, args: JSON, result: Any) -> None:
        if name in EDITS:
            self.staged.append(E.to_json(edit_of(name, args)))


def bound_spec(spec: Any) -> JSON:
    """A table tool's spec for a model, without its branch parameter (bound to the cell's)."""
    params = [p for p in spec.params if p.name != "branch"]
    return {"name": spec.name, "description": spec.description,
            "input_schema": {"type": "object",
                             "properties": {p.name: p.schema() for p in params},
                             "required": [p.name for p in params if p.required],
                             "additionalProperties": False}}  # fmt: skip


def parse_arguments(arguments: str | dict[str, Any]) -> dict[str, Any]:
    if isinstance(arguments, dict):
        return dict(arguments)
    try:
        value = json.loads(arguments or "{}")
    except json.JSONDecodeError as e:
        raise ArgumentError(f"the tool's arguments are not JSON ({e.msg}); send an "
                            "object") from None  # fmt: skip
    if not isinstance(value, dict):
        raise ArgumentError("the tool's arguments must be a JSON object")
    return value


def edited_paths(name: str, args: JSON) -> list[str]:
    """The paths an edit tool call will change (for a patch: those its headers name)."""
    if name != "apply_patch":
        return [str(args.get("path", ""))]
    from ..text.patches import parse_patch

    try:
        return sorted({str(p.path) for p in parse_patch(str(args.get("patch", "")))})
    except (ShadowError, ValueError):
        return []


def edit_of(name: str, args: JSON) -> E.Edit:
    if name == "write_file":
        return E.FullText(str(args["path"]), str(args["content"]))
    if name == "replace_in_file":
        return E.Replace(str(args["path"]), str(args["old"]), str(args["new"]))
    if name == "delete_file":
        return E.Delete(str(args["path"]))
    return E.Patch(str(args["patch"]))


def _plain(value: Any) -> Any:
    """Dataclasses in tool results (locations, symbols) as dicts."""
    return asdict(value) if hasattr(value, "__dataclass_fields__") else str(value)


# -- the loop -------------------------------------------------------------------------------------


def user_message(task: Any) -> str:
    files = "\n".join(f"- {p}" for p in task.files)
    return (f"# Task\n{task.statement.strip()}\n\n# Files to start from\n{files}\n\n"
            "Use the tools to read and fix the code; call finish when you are done.")  # fmt: skip


def tool_episode(
    fmt: ChatFormat,
    call: Callable[[JSON], JSON],
    branch: Any,
    task: Any,
    check: Callable[[Any, Any, bool], CheckResult],
    condition: str | Condition,
    *,
    seed: int = 0,
    max_turns: int = 20,
    system: str = SYSTEM,
) -> Episode:
    """Run one tool-calling episode of a model (`call`: request JSON -> response JSON)."""
    from .tools import Tools

    cond = as_condition(condition)
    episode = Episode(task.id, cond.name, seed, max_turns)
    if not started(branch, task, episode):
        return episode
    session = Session(branch, task, cond, Tools(branch.workspace))
    if cond.feedback == "lint-tool" and start_texts(task):
        session.start_lints = lints_from_report(branch.lint_report(sorted(start_texts(task))))
    messages: list[JSON] = [{"role": "user", "content": user_message(task)}]
    tools = session.specs()
    for turn in range(max_turns):
        step = Step(turn, version=branch.version)
        episode.steps.append(step)
        try:
            response = exchange(fmt.request(system, messages, tools), call)
            reply = fmt.reply(response)
        except Exception as e:  # the model's server, a replay that differs, a broken reply
            step.error, step.error_kind, episode.stopped = error_text(e), "agent", "error"
            break
        _tokens(step, reply)
        messages.append(fmt.assistant(response))
        if not reply.calls:
            episode.stopped = "submitted"
            break
        answers = []
        for c in reply.calls:
            before = len(session.staged)
            text, is_error = session.call(c.name, c.arguments)
            step.edits += session.staged[before:]
            step.lints_seen += [asdict(x) for x in session.shown]
            if is_error:
                step.error, step.error_kind = step.error or json.loads(text)["error"], "tool"
            answers.append((c, text, is_error))
        step.staged, step.version = len(step.edits), branch.version
        messages += fmt.results(answers)
        if session.finished:
            episode.stopped = "finished"
            break
    else:
        episode.stopped = "budget"
    _final_check(episode, branch, task, check)
    return episode


def _tokens(step: Step, reply: Reply) -> None:
    if reply.prompt_tokens is not None:
        step.prompt_tokens, step.tokens_reported = int(reply.prompt_tokens), True
    step.completion_tokens = reply.completion_tokens


def _final_check(episode: Episode, branch: Any, task: Any, check: Any) -> None:
    step = episode.steps[-1]
    try:
        result = check(branch, task, False)
    except Exception as e:
        step.error, step.error_kind = step.error or error_text(e), "check"
        return
    step.checked, step.passed, step.exit_code = True, result.passed, result.exit_code
    if result.error and not step.error:
        step.error, step.error_kind = result.error, "task"
    episode.solved = result.passed
