"""A scripted agent: replays given edits, turn by turn (for tests, demos and replays)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ArgumentError
from . import edits as E
from .observation import Observation


class ScriptedFailure(Exception):
    """Raised by a scripted turn that replays a recorded agent failure: the loop records its
    message and kind verbatim, so a replayed step equals the recorded one."""

    def __init__(self, message: str, kind: str = "agent") -> None:
        super().__init__(message)
        self.recorded = (message, kind)


class ScriptedAgent:
    """Replays a script: `script[turn]` is what the agent returns at that turn (any form
    `edits.normalize` accepts; an Exception instance is raised instead). A mapping of
    task id -> script gives each task its own; tasks it does not name get `default`. Past the
    end of its script the agent proposes nothing (it submits)."""

    simulated = False

    def __init__(self, script: Sequence[Any] | Mapping[str, Sequence[Any]],
                 default: Sequence[Any] = (), name: str = "scripted") -> None:  # fmt: skip
        self.script = script
        self.default = default
        self.name = name

    def __call__(self, obs: Observation) -> Any:
        turns = self.script.get(obs.task_id, self.default) if isinstance(self.script, Mapping) \
            else self.script  # fmt: skip
        if obs.turn >= len(turns):
            return []
        out = turns[obs.turn]
        if isinstance(out, BaseException):
            raise out
        return out

    @classmethod
    def solutions(cls, suite: Any, wrong_first: int = 0) -> ScriptedAgent:
        """Replays each task's reference solution, after `wrong_first` turns that stage a
        harmless comment (so the loop has to revise)."""
        script = {}
        for task in suite:
            wrong = [[E.Replace(task.files[0], _first_line(task), f"# attempt {i + 1}\n"
                                + _first_line(task))] for i in range(wrong_first)] if task.files \
                else []  # fmt: skip
            script[task.id] = [*wrong, list(task.solution)]
        return cls(script, name=f"scripted-solutions(wrong_first={wrong_first})")

    @classmethod
    def from_episode(cls, episode: Any) -> ScriptedAgent:
        """Replays a recorded episode: the same edits at the same turns, failures included."""
        turns: list[Any] = []
        for step in episode.steps:
            if step.error_kind in ("agent", "output"):
                turns.append(ScriptedFailure(step.error, step.error_kind))
            else:
                turns.append([E.from_json(e) for e in step.edits])
        return cls({episode.task: turns}, name=f"replay({episode.task})")

    @property
    def fingerprint(self) -> str:
        return hashlib.blake2b(_canonical(self.script).encode(), digest_size=8).hexdigest()

    def __repr__(self) -> str:
        return f"<ScriptedAgent {self.name}>"


def _first_line(task: Any) -> str:
    """Anchor for a harmless edit: the first solution's `old` text, else ''."""
    for edit in task.solution:
        if isinstance(edit, E.Replace) and edit.path == task.files[0]:
            return edit.old
    raise ArgumentError(f"task {task.id!r}: no replace in its first file to anchor a wrong "
                        "attempt; give the task a replace solution")  # fmt: skip


def _canonical(value: Any) -> str:
    def encode(v: Any) -> Any:
        if isinstance(v, E.FullText | E.Patch | E.Replace | E.Delete):
            return E.to_json(v)
        if isinstance(v, BaseException):
            return f"{type(v).__name__}: {v}"
        if isinstance(v, Mapping):
            return {str(k): encode(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [encode(x) for x in v]
        return v if isinstance(v, str | int | float | bool | type(None)) else repr(v)

    return json.dumps(encode(value), sort_keys=True)
