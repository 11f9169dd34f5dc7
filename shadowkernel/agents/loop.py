"""The agent loop: propose -> stage -> check -> feedback -> revise.

One episode is one task on one branch under one feedback condition, for at most `budget`
turns or until the task's hidden tests pass. Each turn is recorded as a `Step` (what the
agent was shown, the prompt size, the edits, what went wrong, the check's outcome, timings),
so an episode can be inspected as a table and replayed (`replay_agent`).

A task that starts from a staged version (`task.start`: a mutant, a base commit's files) has
it staged first, as the branch's first version; the agent's turns build on it, and lints
are marked new against it (one extra lint request per episode, in conditions with lints).

Nothing an agent does stops the loop: an agent that raises, returns something that is not
edits, or proposes an edit that cannot be staged gets a failed step with its error, and the
next turn tells it what happened. Only BaseExceptions that are not Exceptions (Ctrl-C)
propagate. An agent that proposes no edits has submitted: the loop stops.

The decisions (what to show, when to stop, how to describe a turn) are pure functions below;
`run_episode` only sequences them against a branch.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from ..errors import ArgumentError, ShadowError
from . import edits as E
from . import prompt
from .observation import (
    Condition,
    LintShown,
    Observation,
    RunShown,
    lints_from_report,
    lints_to_show,
    relative_to_start,
    run_to_show,
)
from .observation import (
    condition as as_condition,
)

Agent = Callable[[Observation], Any]


class TaskLike(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def statement(self) -> str: ...
    @property
    def files(self) -> tuple[str, ...]: ...
    @property
    def problem(self) -> str | None: ...


@dataclass(frozen=True)
class CheckResult:
    """The hidden tests' verdict on one version, and the visible command's outcome."""

    passed: bool
    exit_code: int | None
    visible: RunShown | None = None  # shown only in conditions with run output
    hidden_output: str = ""  # for the record; never shown to an agent
    error: str | None = None  # the check itself could not decide (a malformed task)
    seconds: float = 0.0
    outcomes: dict[str, str] = field(default_factory=dict)  # test id -> outcome, when known
    reports: dict[str, str] = field(default_factory=dict)  # test id -> failure report


TaskCheck = Callable[[Any, Any, bool], CheckResult]  # (branch, task, with_visible) -> result


@dataclass
class Step:
    turn: int
    prompt_chars: int = 0
    prompt_tokens: int = 0
    completion_tokens: int | None = None
    tokens_reported: bool = False  # prompt_tokens came from the model, not the estimate
    lints_seen: list[dict[str, Any]] = field(default_factory=list)
    run_seen: bool = False
    edits: list[dict[str, str]] = field(default_factory=list)
    staged: int = 0
    version: int = 0
    error: str | None = None
    error_kind: str | None = None  # task | agent | output | staging | check | lint
    checked: bool = False
    passed: bool = False
    exit_code: int | None = None
    seconds_agent: float = 0.0
    seconds_stage: float = 0.0
    seconds_check: float = 0.0
    seconds_lint: float = 0.0

    @property
    def failed(self) -> bool:
        return self.error is not None


TIMING_FIELDS = ("seconds_agent", "seconds_stage", "seconds_check", "seconds_lint")


@dataclass
class Episode:
    task: str
    condition: str
    seed: int
    budget: int
    steps: list[Step] = field(default_factory=list)
    solved: bool = False
    stopped: str = ""  # solved | budget | submitted | task

    @property
    def turns(self) -> int:
        return len(self.steps)

    @property
    def tokens(self) -> int:
        return sum(s.prompt_tokens + (s.completion_tokens or 0) for s in self.steps)

    @property
    def failed_steps(self) -> int:
        return sum(1 for s in self.steps if s.failed)

    @property
    def error(self) -> str | None:
        return next((s.error for s in self.steps if s.error), None)

    def frame(self):  # -> pd.DataFrame, one row per step
        import pandas as pd

        return pd.DataFrame([asdict(s) for s in self.steps])

    def to_json(self) -> dict[str, Any]:
        return {"task": self.task, "condition": self.condition, "seed": self.seed,
                "budget": self.budget, "solved": self.solved, "stopped": self.stopped,
                "steps": [asdict(s) for s in self.steps]}  # fmt: skip

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Episode:
        steps = [Step(**s) for s in data["steps"]]
        return cls(data["task"], data["condition"], data["seed"], data["budget"], steps,
                   data["solved"], data["stopped"])  # fmt: skip


# -- pure decisions ---------------------------------------------------------------------------


def next_stop(step: Step, turn: int, budget: int) -> str | None:
    """Why the loop stops after `step`, or None to go on."""
    if step.passed:
        return "solved"
    if step.error is None and not step.edits and step.error_kind is None:
        return "submitted"
    if turn + 1 >= budget:
        return "budget"
    return None


def history_line(step: Step) -> str:
    """What the next turn is told about this one."""
    done = ", ".join(E.describe(E.from_json(e)) for e in step.edits[: step.staged])
    head = f"turn {step.turn + 1}: " + (f"staged {done}" if done else "staged nothing")
    if step.error:
        return f"{head}; failed ({step.error_kind}): {step.error}"
    return head + ("; the task's tests do not pass yet" if step.checked else "")


def files_shown(task: TaskLike, touched: Sequence[str], read: Callable[[str], str | None]
                ) -> dict[str, str]:  # fmt: skip
    """The focus files plus every file the branch touched, as the branch has them now."""
    files: dict[str, str] = {}
    for path in dict.fromkeys([*task.files, *sorted(touched)]):
        text = read(path)
        if text is not None:
            files[path] = text
    return files


def error_text(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


# -- the loop ---------------------------------------------------------------------------------


def run_episode(
    agent: Agent,
    branch: Any,
    task: TaskLike,
    check: TaskCheck,
    condition: str | Condition = "none",
    *,
    budget: int = 4,
    seed: int = 0,
) -> Episode:
    """Run one episode of `agent` on `task` in `branch` (a fresh shadowkernel Branch)."""
    cond = as_condition(condition)
    if budget < 1:
        raise ArgumentError(f"budget={budget}: give at least 1 turn")
    episode = Episode(task.id, cond.name, seed, budget)
    if not started(branch, task, episode):
        return episode
    start = _start_lints(branch, task, cond)
    lints: tuple[LintShown, ...] = ()
    run: RunShown | None = None
    history: list[str] = []
    for turn in range(budget):
        obs = Observation(
            task=task.statement, files=files_shown(task, touched(branch, task), _reader(branch)),
            lints=lints, run=run, turn=turn, task_id=task.id, condition=cond.name, seed=seed,
            history=tuple(history), template=cond.template,
        )  # fmt: skip
        step, visible = _turn(agent, branch, task, check, cond, obs)
        episode.steps.append(step)
        stop = next_stop(step, turn, budget)
        if stop == "submitted" and turn == 0:
            _check(step, branch, task, check, cond)  # never assume the untouched project fails
            stop = "solved" if step.passed else stop
        if stop:
            episode.solved, episode.stopped = step.passed, stop
            return episode
        history.append(history_line(step))
        lints = _lints(step, branch, task, cond, start)
        run = run_to_show(cond, visible)
    return episode  # unreachable: the last turn always stops


def _turn(agent: Agent, branch: Any, task: TaskLike, check: TaskCheck, cond: Condition,
          obs: Observation) -> tuple[Step, RunShown | None]:  # fmt: skip
    system = getattr(agent, "system", prompt.SYSTEM)
    chars, tokens = prompt.prompt_size(obs, system)
    step = Step(obs.turn, chars, tokens, lints_seen=[asdict(x) for x in obs.lints],
                run_seen=obs.run is not None, version=branch.version)  # fmt: skip
    proposed = _propose(agent, obs, step)
    if proposed is None:
        return step, None
    step.edits = [E.to_json(e) for e in proposed]
    _stage(branch, proposed, step)
    return step, _check(step, branch, task, check, cond) if step.staged else None


def _propose(agent: Agent, obs: Observation, step: Step) -> tuple[E.Edit, ...] | None:
    start = time.perf_counter()
    try:
        out = agent(obs)
    except Exception as e:
        step.error, step.error_kind = getattr(e, "recorded", None) or (error_text(e), "agent")
        return None
    finally:
        step.seconds_agent = time.perf_counter() - start
    if isinstance(out, E.Proposal):
        if out.prompt_tokens is not None:
            step.prompt_tokens, step.tokens_reported = int(out.prompt_tokens), True
        step.completion_tokens = out.completion_tokens
        out = out.edits
    try:
        return E.normalize(out)
    except E.AgentOutputError as e:
        step.error, step.error_kind = str(e), "output"
        return None


def _stage(branch: Any, proposed: Sequence[E.Edit], step: Step) -> None:
    start = time.perf_counter()
    try:
        for edit in proposed:
            stage_edit(branch, edit)
            step.staged += 1
    except (ShadowError, ValueError) as e:
        step.error, step.error_kind = error_text(e), "staging"
    finally:
        step.version = branch.version
        step.seconds_stage = time.perf_counter() - start


def stage_edit(branch: Any, edit: E.Edit) -> int:
    """Stage one edit on a branch with the matching staging call."""
    if isinstance(edit, E.FullText):
        return branch.write(edit.path, edit.text)
    if isinstance(edit, E.Replace):
        return branch.replace(edit.path, edit.old, edit.new)
    if isinstance(edit, E.Delete):
        return branch.delete(edit.path)
    return branch.apply_patch(edit.diff)


def _check(step: Step, branch: Any, task: TaskLike, check: TaskCheck, cond: Condition
           ) -> RunShown | None:  # fmt: skip
    """Decide the step by the hidden tests; returns the visible command's outcome."""
    start = time.perf_counter()
    try:
        result = check(branch, task, cond.run)
    except Exception as e:
        step.error = step.error or error_text(e)
        step.error_kind = step.error_kind or "check"
        return None
    finally:
        step.seconds_check = time.perf_counter() - start
    step.checked, step.passed, step.exit_code = True, result.passed, result.exit_code
    if result.error and not step.error:
        step.error, step.error_kind = result.error, "task"
    return result.visible


def start_texts(task: Any) -> dict[str, str]:
    """The starting version's texts of the focus files (the files whose lints are shown)."""
    focus = set(task.files)
    return {p: t for p, t in getattr(task, "start", ()) if t is not None and p in focus}


def touched(branch: Any, task: Any) -> list[str]:
    """The paths the agent changed: the branch's, less those still as the start staged them."""
    start = {p: None if t is None else t.encode() for p, t in getattr(task, "start", ())}
    return [p for p, data in branch.files.items() if p not in start or start[p] != data]


def stage_start(branch: Any, task: Any) -> None:
    """Stage the task's starting version (nothing for a task that starts from the folder)."""
    for path, text in getattr(task, "start", ()):
        if text is None:
            branch.delete(path)
        else:
            branch.write(path, text)


def started(branch: Any, task: TaskLike, episode: Episode) -> bool:
    """Stage the task's starting version; False if the task is broken or its start cannot be
    staged, and then `episode` is stopped with a step saying why."""
    problem = task.problem
    if not problem:
        try:
            stage_start(branch, task)
        except (ShadowError, ValueError) as e:
            problem = f"the task's starting version cannot be staged: {error_text(e)}"
    if problem:
        episode.steps.append(Step(0, error=problem, error_kind="task"))
        episode.stopped = "task"
    return not problem


def _start_lints(branch: Any, task: TaskLike, cond: Condition) -> tuple[LintShown, ...]:
    """The lints of the starting version's staged files: the base of `new` for those files."""
    paths = sorted(start_texts(task))
    if cond.lints == "none" or not paths:
        return ()
    try:
        return lints_from_report(branch.lint_report(paths))
    except Exception:
        return ()  # then every lint in those files counts as new; the turns' lints still show


def _lints(step: Step, branch: Any, task: TaskLike, cond: Condition,
           start_lints: tuple[LintShown, ...]) -> tuple[LintShown, ...]:  # fmt: skip
    if cond.lints == "none":
        return ()
    start = time.perf_counter()
    try:
        files = files_shown(task, touched(branch, task), _reader(branch))
        lints = lints_from_report(branch.lint_report(list(files)))
        if start_texts(task):
            lints = relative_to_start(lints, start_lints, start_texts(task), files)
        return lints_to_show(cond, lints)
    except Exception as e:
        step.error = step.error or f"lint: {error_text(e)}"
        step.error_kind = step.error_kind or "lint"
        return ()
    finally:
        step.seconds_lint = time.perf_counter() - start


def _reader(branch: Any) -> Callable[[str], str | None]:
    def read(path: str) -> str | None:
        try:
            return branch.read(path)
        except (ShadowError, ValueError):
            return None

    return read
