"""The agent loop on a real shadow of the built-in suite: solving, failing, what each
condition shows the agent (real ruff lints, real test output), failures as steps, replay."""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from overlay_helpers import HAS_FUSE

import shadowkernel as sk
from shadowkernel.agents import edits as E
from shadowkernel.agents.loop import TIMING_FIELDS, run_episode
from shadowkernel.agents.scripted import ScriptedAgent
from shadowkernel.agents.simulated import lint_mistake
from shadowkernel.evals import builtin_suite, load_task, make_checker

pytestmark = pytest.mark.skipif(not HAS_FUSE, reason="needs /dev/fuse and fusermount3")

SUITE = builtin_suite()
SLUG = SUITE["textkit-slugify-runs"]  # slug.py has a pre-existing lint: `import string` (F401)
SLUG_PATH = "textkit/textkit/slug.py"


@pytest.fixture(scope="module")
def ws() -> Iterator[sk.Workspace]:
    with sk.Workspace(SUITE.workspace_root) as workspace:
        yield workspace


@pytest.fixture
def branch(ws, request):
    b = ws.branch(request.node.name)
    yield b
    b.drop()


CHECK = make_checker(SUITE)


def test_scripted_agent_solves_after_a_wrong_attempt(branch):
    agent = ScriptedAgent.solutions(SUITE, wrong_first=1)
    episode = run_episode(agent, branch, SLUG, CHECK, "none", budget=3)
    assert (episode.solved, episode.stopped, episode.turns) == (True, "solved", 2)
    first, second = episode.steps
    assert first.staged == 1 and first.checked and not first.passed and first.exit_code == 1
    assert second.passed and second.exit_code == 0 and second.version == 2
    assert all(s.prompt_tokens > 0 and s.seconds_check > 0 for s in episode.steps)
    assert "# attempt 1" in branch.read(SLUG_PATH) and "if word]" in branch.read(SLUG_PATH)


def test_an_agent_that_cannot_solve_fails_at_the_budget(branch):
    original = (Path(SUITE.workspace_root) / SLUG_PATH).read_text()
    stuck = ScriptedAgent([E.FullText(SLUG_PATH, f"# try {i}\n" + original) for i in range(3)])
    episode = run_episode(stuck, branch, SLUG, CHECK, "new-lints", budget=3)
    assert (episode.solved, episode.stopped, episode.turns) == (False, "budget", 3)
    assert [s.exit_code for s in episode.steps] == [1, 1, 1]
    assert episode.failed_steps == 0


class Recorder:
    """Stages the solution with a misspelled name, then records what it is shown."""

    def __init__(self) -> None:
        self.seen = []

    def __call__(self, obs):
        self.seen.append(obs)
        if obs.turn == 0:
            original = (Path(SUITE.workspace_root) / SLUG_PATH).read_text()
            solved = original.replace(SLUG.solution[0].old, SLUG.solution[0].new)
            return E.FullText(SLUG_PATH, lint_mistake(original, solved))
        return []


@pytest.mark.parametrize("name", ["none", "all-lints", "new-lints", "lints+run"])
def test_each_condition_shows_the_agent_exactly_what_it_claims(ws, name):
    branch = ws.branch(f"cond-{name}")
    try:
        agent = Recorder()
        episode = run_episode(agent, branch, SLUG, CHECK, name, budget=2)
    finally:
        branch.drop()
    assert [s.error for s in episode.steps] == [None, None]
    first, second = agent.seen
    assert first.lints == () and first.run is None  # nothing to show before any edit
    codes = {(x.code, x.new) for x in second.lints}
    if name == "none":
        assert codes == set() and second.run is None
    elif name == "all-lints":
        assert codes == {("F401", False), ("F821", True)} and second.run is None
    else:  # new only: the pre-existing unused import is hidden
        assert codes == {("F821", True)}
    if name == "lints+run":
        assert second.run.exit_code == 1 and "NameError" in second.run.output
        assert "test_repro" in second.run.output and "test_hidden" not in second.run.output
        assert " in 0." not in second.run.output  # durations normalized away
    else:
        assert second.run is None
    assert episode.steps[1].lints_seen == [dataclasses.asdict(x) for x in second.lints]
    assert episode.steps[1].run_seen == (name == "lints+run")


def test_failures_are_steps_and_the_loop_goes_on(branch):
    turns = [RuntimeError("model crashed"), 42, [E.Replace(SLUG_PATH, "not in the file", "x")],
             list(SLUG.solution)]  # fmt: skip
    episode = run_episode(ScriptedAgent(turns), branch, SLUG, CHECK, "new-lints", budget=5)
    assert episode.solved and episode.turns == 4
    kinds = [s.error_kind for s in episode.steps]
    assert kinds == ["agent", "output", "staging", None]
    assert episode.steps[0].error == "RuntimeError: model crashed"
    assert "agent returned int 42" in episode.steps[1].error
    assert "StagingError" in episode.steps[2].error and episode.failed_steps == 3


def test_a_malformed_task_is_a_failed_step(tmp_path, branch):
    folder = tmp_path / "suite" / "tasks" / "broken"
    folder.mkdir(parents=True)
    (folder / "task.toml").write_text('project = "textkit"\n')  # no statement, no tests
    task = load_task(folder)
    assert task.problem and "statement" in task.problem
    episode = run_episode(ScriptedAgent([[]]), branch, task, CHECK, "none")
    assert not episode.solved and episode.stopped == "task"
    assert episode.steps[0].error_kind == "task" and "statement" in episode.steps[0].error


def test_a_task_whose_hidden_tests_are_broken_fails_with_the_reason(tmp_path, branch):
    folder = tmp_path / "broken-tests"
    shutil.copytree(SLUG.folder, folder)
    (folder / "hidden" / "test_hidden.py").write_text("import nowhere_to_be_found\n")
    task = load_task(folder)
    task = dataclasses.replace(task, problem=None)  # the layout is fine; the tests are not
    episode = run_episode(ScriptedAgent([list(SLUG.solution)]), branch, task, CHECK, "none",
                          budget=1)  # fmt: skip
    assert not episode.solved and episode.steps[0].exit_code == 2


def test_an_episode_replays_step_for_step(ws):
    turns = [ValueError("flaky"), [E.Replace(SLUG_PATH, "import re\n", "import re  # x\n")],
             list(SLUG.solution)]  # fmt: skip
    runs = []
    for name, agent in (("rec", ScriptedAgent(turns)), ("replay", None)):
        branch = ws.branch(f"replay-{name}")
        try:
            agent = agent or ScriptedAgent.from_episode(runs[0])
            runs.append(run_episode(agent, branch, SLUG, CHECK, "lints+run", budget=4))
        finally:
            branch.drop()
    strip = lambda e: e.frame().drop(columns=list(TIMING_FIELDS))  # noqa: E731
    assert runs[0].solved and runs[0].turns == 3
    assert strip(runs[0]).equals(strip(runs[1]))
