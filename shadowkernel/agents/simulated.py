"""A seeded simulated agent, for demos and for testing the experiment without a model.

It is SIMULATED: it knows each task's reference solution and decides by stated
probabilities whether it gets it right, what kind of mistake it makes and whether the
feedback it is shown lets it repair the mistake. Everything it labels is marked simulated
(its `simulated` flag, the experiment's `simulated` column, plots and timelines), so nobody
mistakes its numbers for a model's. Its decisions read only what the observation shows:
real lints from the shadow's language server and real test output, so the feedback
machinery is exercised end to end.

The model, per turn (all draws from one RNG seeded by agent seed, cell seed, task and turn,
so the same draws are used under every condition: common random numbers make the paired
comparison sharper):

- turn 0, and every "fresh attempt": correct with `p_correct`; otherwise a mistake, which a
  linter can see (a misspelled name, flagged as undefined) with `p_lint_mistake`, else a
  silent one (a plausible edit that does not fix the task).
- later turns: shown a pre-existing lint, it spends the turn on it with `p_distracted`;
  else shown a new lint, it repairs its mistake with `p_fix_seen_lint`; else shown failing
  run output, it repairs with `p_fix_seen_failure`; else it tries a fresh attempt with
  `p_retry_blind` and otherwise submits. A repair that fails to happen is a fresh attempt.
"""

from __future__ import annotations

import ast
import builtins
import difflib
import keyword
import os
import random
from dataclasses import asdict, dataclass
from typing import Any

from ..errors import ArgumentError
from ..text import positions
from . import edits as E
from .observation import LintShown, Observation


@dataclass(frozen=True)
class Behaviour:
    """The stated probabilities of the simulated agent."""

    p_correct: float = 0.35
    p_lint_mistake: float = 0.6
    p_fix_seen_lint: float = 0.85
    p_fix_seen_failure: float = 0.5
    p_retry_blind: float = 0.3
    p_distracted: float = 0.35

    def __post_init__(self) -> None:
        for name, p in asdict(self).items():
            if isinstance(p, bool) or not isinstance(p, int | float) or not 0.0 <= p <= 1.0:
                raise ArgumentError(f"{name}={p!r}: a probability must be a number within [0, 1]")

    @classmethod
    def given(cls, probabilities: dict[str, Any]) -> Behaviour:
        """The behaviour from keyword arguments; a name it has not is an ArgumentError naming
        the nearest one (a typo would else be a raw TypeError, or silently ignored)."""
        names = list(cls.__dataclass_fields__)
        for name in probabilities:
            if name not in names:
                near = difflib.get_close_matches(name, names, n=1)
                hint = f"did you mean {near[0]!r}? " if near else ""
                raise ArgumentError(f"{name}=: not a probability of the simulated agent; "
                                    f"{hint}they are {', '.join(names)}")  # fmt: skip
        return cls(**probabilities)


class SimulatedAgent:
    """SIMULATED agent over a suite's tasks (see the module docstring for its model)."""

    simulated = True

    def __init__(self, suite: Any, seed: int = 0, **probabilities: float) -> None:
        self.suite = suite
        self.seed = seed
        self.behaviour = Behaviour.given(probabilities)
        self.name = f"simulated(seed={seed})"
        self._cache: dict[str, tuple[dict[str, str], dict[str, str], dict[str, str]]] = {}

    @property
    def fingerprint(self) -> str:
        return f"simulated:{self.seed}:{sorted(asdict(self.behaviour).items())}"

    def __call__(self, obs: Observation) -> list[E.Edit]:
        b = self.behaviour
        rng = random.Random(f"{self.seed}|{obs.seed}|{obs.task_id}|{obs.turn}")
        u_distract, u_fix, u_correct, u_kind, u_retry = (rng.random() for _ in range(5))
        fresh = lambda: self._attempt(obs.task_id, u_correct, u_kind)  # noqa: E731
        if obs.turn == 0:
            return fresh()
        old = [x for x in obs.lints if not x.new]
        if old and u_distract < b.p_distracted:
            return self._distraction(obs, old[0])
        if any(x.new for x in obs.lints):
            return self._solution(obs.task_id) if u_fix < b.p_fix_seen_lint else fresh()
        if obs.run is not None and obs.run.exit_code != 0:
            return self._solution(obs.task_id) if u_fix < b.p_fix_seen_failure else fresh()
        return fresh() if u_retry < b.p_retry_blind else []

    # -- attempts -----------------------------------------------------------------------------

    def _attempt(self, task_id: str, u_correct: float, u_kind: float) -> list[E.Edit]:
        b = self.behaviour
        if u_correct < b.p_correct:
            return self._solution(task_id)
        _, solved, originals = self._texts(task_id)
        if u_kind < b.p_lint_mistake:
            mistaken = {p: lint_mistake(originals[p], t) for p, t in solved.items()}
            if any(m is not None for m in mistaken.values()):
                return [E.FullText(p, m if m is not None else solved[p])
                        for p, m in mistaken.items()]  # fmt: skip
        return [E.FullText(p, silent_mistake(originals[p])) for p in solved]

    def _solution(self, task_id: str) -> list[E.Edit]:
        return [E.FullText(p, t) for p, t in self._texts(task_id)[1].items()]

    def _distraction(self, obs: Observation, lint: LintShown) -> list[E.Edit]:
        """Spend the turn on a lint that was there before: drop the line if it is an import,
        else rewrite the file unchanged."""
        text = obs.files.get(lint.path)
        if text is None:
            first: list[E.Edit] = [E.FullText(p, t) for p, t in obs.files.items()]
            return first[:1]
        lines = positions.split_lines(text, keepends=True)
        line = lines[lint.line - 1] if 0 < lint.line <= len(lines) else ""
        if line.lstrip().startswith(("import ", "from ")) and text.count(line) == 1:
            return [E.Replace(lint.path, line, "")]
        return [E.FullText(lint.path, text)]

    def _texts(self, task_id: str) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
        """(unused, solved text per solution file, starting text per solution file)."""
        if task_id not in self._cache:
            task = self.suite[task_id]
            start = dict(getattr(task, "start", ()))
            originals: dict[str, str] = {}

            def read(path: str) -> str | None:
                if path not in originals:
                    text = start[path] if path in start else self._read(path)
                    if text is None:
                        return None
                    originals[path] = text
                return solved.get(path, originals[path])

            solved: dict[str, str] = {}
            for edit in task.solution:
                solved.update(_apply(edit, read))
            self._cache[task_id] = ({}, solved, {p: originals.get(p, "") for p in solved})
        return self._cache[task_id]

    def _read(self, path: str) -> str | None:
        try:
            with open(os.path.join(self.suite.workspace_root, path)) as f:
                return f.read()
        except FileNotFoundError:
            return None

    def __repr__(self) -> str:
        return f"<SimulatedAgent seed={self.seed} {self.behaviour}>"


def _apply(edit: E.Edit, read: Any) -> dict[str, str]:
    """The texts a solution edit makes, reading the current ones through `read`."""
    if isinstance(edit, E.Replace):
        text = read(edit.path) or ""
        if text.count(edit.old) != 1:
            raise ArgumentError(f"solution edit for {edit.path}: old text is not unique")
        return {edit.path: text.replace(edit.old, edit.new)}
    if isinstance(edit, E.FullText):
        return {edit.path: edit.text}
    if isinstance(edit, E.Patch):
        from ..text.patches import apply_patch

        changes = apply_patch(edit.diff, read)
        return {p: t for p, t in changes.items() if t is not None}
    raise ArgumentError(f"the simulated agent needs solutions as replace, write or patch "
                        f"edits, not {type(edit).__name__}")  # fmt: skip


# -- mistakes (pure) --------------------------------------------------------------------------


def lint_mistake(original: str, solved: str) -> str | None:
    """`solved` with one name that the solution's new lines use misspelled (an undefined name
    a linter flags and the tests trip over), or None when no such name exists."""
    changed = _changed_lines(original, solved)
    try:
        tree = ast.parse(solved)
    except SyntaxError:
        return None
    defined = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {
        a.arg for a in ast.walk(tree) if isinstance(a, ast.arg)}  # fmt: skip
    candidates = [
        n for n in ast.walk(tree)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.lineno in changed
        and len(n.id) >= 3 and not hasattr(builtins, n.id) and not keyword.iskeyword(n.id)
    ]  # fmt: skip
    for node in sorted(candidates, key=lambda n: (n.lineno, n.col_offset), reverse=True):
        typo = node.id[:-2] + node.id[-1] + node.id[-2]
        if typo in defined or typo == node.id:
            continue
        lines = positions.split_lines(solved, keepends=True)
        line = lines[node.lineno - 1]
        start = len(line.encode()[: node.col_offset].decode())
        lines[node.lineno - 1] = line[:start] + typo + line[start + len(node.id) :]
        return "".join(lines)
    return None


def silent_mistake(original: str) -> str:
    """A plausible edit that fixes nothing: the original text with a reassuring comment."""
    lines = positions.split_lines(original, keepends=True)
    at = next((i for i, line in enumerate(lines) if line.startswith("def ")), 0)
    return "".join([*lines[:at], "# handles the edge cases\n", *lines[at:]])


def _changed_lines(original: str, solved: str) -> set[int]:
    """1-based line numbers of `solved` that are not in `original` (inserted or replaced)."""
    old, new = positions.split_lines(original), positions.split_lines(solved)
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    changed: set[int] = set()
    for tag, _, _, j1, j2 in matcher.get_opcodes():
        if tag in ("replace", "insert"):
            changed.update(range(j1 + 1, j2 + 1))
    return changed
