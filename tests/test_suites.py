"""Real task suites on a real shadow: a mutation suite of six 1.16.0 (its sdist, fetched by
.ci/setup) checked row by row with validate(), the same seed giving the same suite, an
experiment over it reproducible frame for frame; and SWE-bench-format instances over a git
repository built here, graded right for a correct and a wrong fix."""

from __future__ import annotations

import json
import subprocess
import tarfile
from pathlib import Path

import pytest
from overlay_helpers import needs_fuse, snapshot

import shadowkernel as sk
from shadowkernel.agents import ScriptedAgent, SimulatedAgent
from shadowkernel.agents import edits as E
from shadowkernel.agents.loop import stage_start
from shadowkernel.agents.observation import CONDITIONS
from shadowkernel.evals import make_checker, reproducible
from shadowkernel.evals.experiment import Cell, run_cell

SDIST = Path(__file__).resolve().parent.parent / ".venv/sdists/six-1.16.0.tar.gz"
COMMAND = "python -m pytest test_six.py"

pytestmark = [needs_fuse, pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def six(tmp_path_factory) -> Path:
    if not SDIST.exists():
        pytest.skip(f"{SDIST} is fetched by bash .ci/setup")
    folder = tmp_path_factory.mktemp("six")
    with tarfile.open(SDIST) as archive:
        archive.extractall(folder, filter="data")
    return folder / "six-1.16.0"


@pytest.fixture(scope="module")
def suite(six):
    before = snapshot(six)
    made = sk.mutation_suite(six, COMMAND, n=4, seed=0)
    assert snapshot(six) == before  # generation never writes the checkout
    return made


def test_mutation_suite_of_six_validates_row_by_row(suite, six):
    assert len(suite) == 4 and len({t.id for t in suite}) == 4
    assert int(suite.extra["kept"]) == 4 and int(suite.extra["tried"]) >= 4
    for task in suite:
        assert task.files == ("six.py",) and task.start[0][0] == "six.py"
        assert 1 <= len(task.fail_to_pass) <= 5 and task.pass_to_pass
        assert not set(task.fail_to_pass) & set(task.pass_to_pass)
        assert all(t.startswith("test_six.py::") for t in task.fail_to_pass)
        assert task.fail_to_pass[0] in task.statement and "E   " in task.statement
        (fix,) = task.solution
        mutated = task.start[0][1]
        assert mutated.replace(fix.old, fix.new) == (six / "six.py").read_text()
    table = suite.validate()
    assert list(table["task"]) == [t.id for t in suite]
    assert table["fails_on_task"].all() and table["passes_on_original"].all(), table
    assert (table["failing_at_start"] >= 1).all()


def test_another_seed_gives_another_suite(suite, six):
    """The same seed's suite, byte for byte: tests/test_suites_repro.py (on more-itertools)."""
    other = sk.mutation_suite(six, COMMAND, n=2, seed=1)
    assert [t.id for t in other] != [t.id for t in suite][:2]


def test_a_wrong_fix_fails_the_hidden_tests(suite):
    task = suite.tasks[0]
    with sk.Workspace(suite.workspace_root) as ws:
        branch = ws.branch("wrong")
        stage_start(branch, task)
        branch.replace("six.py", "import sys\n", "import sys  # looked here\n")
        result = make_checker(suite)(branch, task, True)
    assert not result.passed and result.visible is not None
    assert task.fail_to_pass[0] in result.visible.command
    assert {result.outcomes[t] for t in task.fail_to_pass} <= {"failed", "error"}


def test_an_experiment_over_the_suite_reproduces(suite):
    small = suite.select(first=3)
    agent = SimulatedAgent(small, seed=2, p_correct=0.3)
    first, second = (sk.experiment(agent, small, ["none", "new-lints"], seeds=1, budget=2,
                                   progress=False) for _ in range(2))  # fmt: skip
    assert len(first) == 6 and reproducible(first).equals(reproducible(second))
    assert first["simulated"].all() and (first["run_requests"] >= 1).all()
    assert (first.loc[first.condition == "none", "lint_requests"] == 0).all()
    assert (first.loc[first.condition == "new-lints", "lint_requests"] >= 1).all()
    s = sk.summary(first, n_boot=100)
    assert "tokens_per_solved" in s.conditions and "pairs detect" in repr(s)


# -- SWE-bench instances over a local git repository ---------------------------------------------

BUGGY = "def clamp(x, lo, hi):\n    return max(lo, min(x, lo))\n"
FIXED = "def clamp(x, lo, hi):\n    return max(lo, min(x, hi))\n"
OTHER = "from calc.ops import clamp\n\n\ndef test_low():\n    assert clamp(-5, 0, 10) == 0\n"
HIDDEN = "from calc.ops import clamp\n\n\ndef test_high():\n    assert clamp(50, 0, 10) == 10\n"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout  # fmt: skip


def commit(repo: Path, files: dict[str, str | None], message: str) -> str:
    for name, text in files.items():
        path = repo / name
        if text is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message)
    return git(repo, "rev-parse", "HEAD").strip()


def diff(repo: Path, a: str, b: str, *paths: str) -> str:
    return git(repo, "diff", a, b, "--", *paths)


@pytest.fixture
def checkout(tmp_path):
    """A repository whose HEAD is later than the instance's base commit: the fix and the
    hidden test are in, a file was added and one removed since."""
    repo = tmp_path / "calc"
    repo.mkdir()
    git(repo, "init", "-q")
    base = commit(repo, {"calc/__init__.py": "", "calc/ops.py": BUGGY, "tests/test_other.py": OTHER,
                         "calc/legacy.py": "OLD = 1\n"}, "base")  # fmt: skip
    fixed = commit(repo, {"calc/ops.py": FIXED}, "fix clamp")
    tested = commit(repo, {"tests/test_clamp.py": HIDDEN}, "test clamp")
    commit(repo, {"calc/extra.py": "NEW = 2\n", "calc/legacy.py": None}, "later work")
    instance = {
        "instance_id": "calc__calc-1", "repo": "me/calc", "base_commit": base,
        "problem_statement": "clamp() ignores the upper bound: clamp(50, 0, 10) gives 0",
        "patch": diff(repo, base, fixed, "calc/ops.py"),
        "test_patch": diff(repo, fixed, tested, "tests/test_clamp.py"),
        "FAIL_TO_PASS": json.dumps(["tests/test_clamp.py::test_high"]),
        "PASS_TO_PASS": json.dumps(["tests/test_other.py::test_low"]),
    }  # fmt: skip
    (tmp_path / "instances.jsonl").write_text(json.dumps(instance) + "\n")
    return repo, tmp_path / "instances.jsonl"


def test_swebench_instances_are_graded_at_their_base_commit(checkout):
    repo, instances = checkout
    before = snapshot(repo)
    suite = sk.swebench_suite(instances, {"me/calc": str(repo)})
    (task,) = suite.tasks
    assert task.ok and task.files == ("calc/ops.py",)
    assert dict(task.start) == {"calc/ops.py": BUGGY, "calc/legacy.py": "OLD = 1\n",
                                "calc/extra.py": None, "tests/test_clamp.py": None}  # fmt: skip
    table = suite.validate()
    assert table.loc[0, "fails_on_task"] and table.loc[0, "passes_on_original"], table
    right = ScriptedAgent({task.id: [list(task.solution)]})
    wrong = ScriptedAgent({task.id: [[E.Replace("calc/ops.py", "min(x, lo)", "min(lo, x)")]]})
    with sk.Workspace(suite.workspace_root) as ws:
        cells = {name: run_cell(ws, agent, suite, Cell(task, CONDITIONS["none"], seed), 1, 60)
                 for seed, (name, agent) in enumerate((("right", right), ("wrong", wrong)))}  # fmt: skip
        probe = ws.branch("probe")
        stage_start(probe, task)
        assert probe.read("calc/ops.py") == BUGGY and probe.read("calc/legacy.py") == "OLD = 1\n"
        with pytest.raises(sk.NotFound):
            probe.read("tests/test_clamp.py")  # the graded test is never shown to the agent
    assert cells["right"]["solved"] and not cells["wrong"]["solved"]
    assert cells["right"]["run_requests"] == 1  # one grading run, in its own branch
    assert snapshot(repo) == before


def test_a_repository_setup_command_runs_before_every_check(checkout):
    repo, instances = checkout
    failing_setup = {"path": str(repo), "setup": "echo building >&2 && exit 3"}
    suite = sk.swebench_suite(instances, {"me/calc": failing_setup})
    assert suite.environments[""].setup == failing_setup["setup"]
    row = suite.validate().iloc[0]
    assert not row.fails_on_task and not row.passes_on_original
    assert "did not finish (exit 3)" in row.error and "building" in row.error
