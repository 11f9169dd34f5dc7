"""What a prompt engineer meets measuring lint feedback: arguments checked before any cell
runs (nothing wrong cached), a cache that does not hand back rows made with other servers or
another timeout, paired statistics that refuse frames they cannot pair, and notebook 03's
scripted tool server replaying each task's own fix."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pandas as pd
import pytest
from overlay_helpers import needs_fuse

import shadowkernel as sk
from shadowkernel.agents import Condition, SimulatedAgent
from shadowkernel.errors import ArgumentError, NotFound
from shadowkernel.evals import episode, mcnemar, summary, tasks_needed

SUITE = sk.builtin_suite().select(["stats-stdev"])
NOTEBOOK = Path(__file__).parent.parent / "notebooks" / "03_lint_feedback_experiment.ipynb"


class Counting:
    """A simulated agent (same fingerprint) that counts the cells it was asked about."""

    def __init__(self) -> None:
        self.inner = SimulatedAgent(SUITE, seed=0, p_correct=1)
        self.fingerprint, self.simulated, self.name = self.inner.fingerprint, True, "counting"
        self.cells: set[tuple[str, str, int]] = set()

    def __call__(self, obs):
        self.cells.add((obs.task_id, obs.condition, obs.seed))
        return self.inner(obs)


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"timeout": "60"}, "timeout='60'"),
        ({"timeout": 0}, "timeout=0"),
        ({"seeds": [0, 0]}, "seeds=[0, 0]"),
        ({"conditions": ["none", "none"]}, "'none' given twice"),
        ({"conditions": ["none", Condition("none", lints="new")]}, "'none' given twice"),
    ],
)
def test_bad_experiment_arguments_are_refused_before_any_cell_is_cached(tmp_path, options,
                                                                         named):  # fmt: skip
    agent = Counting()
    call = {"conditions": ["none"], "seeds": 1, "cache": tmp_path / "cells", **options}
    with pytest.raises(ArgumentError) as info:
        sk.experiment(agent, SUITE, progress=False, **call)
    assert named in str(info.value)
    assert not agent.cells and not list((tmp_path / "cells").glob("*.json"))


@pytest.mark.parametrize("folder", ["cache", "record"])
def test_a_file_given_as_a_folder_is_an_argument_error(tmp_path, folder):
    taken = tmp_path / "results.csv"
    taken.write_text("task,solved\n")
    with pytest.raises(ArgumentError, match=f"{folder}=.*results.csv.*give a folder"):
        sk.experiment(Counting(), SUITE, ["none"], progress=False, **{folder: taken})
    assert taken.read_text() == "task,solved\n"


@needs_fuse
def test_a_rerun_with_other_servers_or_timeout_does_not_reuse_the_cached_cells(tmp_path):
    cache = tmp_path / "cells"

    def run(**options):
        agent = Counting()
        df = sk.experiment(agent, SUITE, ["all-lints"], seeds=1, budget=1, cache=cache,
                           progress=False, **options)  # fmt: skip
        return agent.cells, df

    ran, first = run(servers=("ruff",), timeout=60)
    assert ran and first["lint_requests"].iloc[0] >= 0
    again, cached = run(servers=("ruff",), timeout=60)
    assert not again and cached["solved"].equals(first["solved"])  # the cache works
    other_timeout, _ = run(servers=("ruff",), timeout=90)
    assert other_timeout == ran  # a check with another timeout can decide otherwise
    no_servers, _ = run(servers=(), timeout=60)
    assert no_servers == ran  # other servers show other lints
    assert len(list(cache.glob("*.json"))) == 3


def frame(agent: str) -> pd.DataFrame:
    rows = []
    for i, (base, cond) in enumerate([(1, 1), (0, 1), (0, 1), (1, 0), (0, 0), (0, 1)]):
        for name, solved in (("none", base), ("new-lints", cond)):
            rows.append({"task": f"t{i}", "seed": 0, "condition": name, "solved": bool(solved),
                         "turns": 1, "tokens": 10, "lints_shown": 0, "failed_steps": 0,
                         "agent": agent})  # fmt: skip
    return pd.DataFrame(rows)


def test_the_paired_statistics_by_hand_and_two_agents_frames_are_told_apart():
    s = summary(frame("a"), n_boot=200)
    row = s.comparisons.loc["new-lints"]
    # b: pairs t1, t2, t5 solved only with lints; c: t3 only without; exact binomial, n = 4
    assert (row.b, row.c, row.pairs) == (3, 1, 6)
    assert row.p_value == pytest.approx(2 * (1 + 4) / 16)
    assert row["diff"] == pytest.approx(4 / 6 - 2 / 6)
    both = pd.concat([frame("prompt-a"), frame("prompt-b")], ignore_index=True)
    with pytest.raises(ArgumentError, match=r"df: 24 rows share .*'prompt-a', 'prompt-b'"):
        summary(both)
    apart = summary(both.assign(condition=both.agent + "/" + both.condition), n_boot=200)
    assert apart.comparisons.loc["prompt-a/new-lints", "b"] == 3


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda: mcnemar(-1, 3), "b=-1"),
        (lambda: mcnemar(2, 1.5), "c=1.5"),
        (lambda: tasks_needed("0.03", 0.15), "effect='0.03'"),
        (lambda: summary(frame("a"), n_boot=True), "n_boot=True"),
        (lambda: episode(frame("a").assign(episode="{}"), "t9", "none"), "task='t9'"),
        (lambda: sk.mutation_suite(".", "pytest", n=True), "n=True"),
        (lambda: sk.mutation_suite(".", "pytest", seed="0"), "seed='0'"),
    ],
)
def test_bad_statistics_and_suite_arguments_name_the_argument(call, named):
    with pytest.raises((ArgumentError, NotFound)) as info:
        call()
    assert named in str(info.value)


def test_a_single_id_or_file_is_one_not_its_characters(tmp_path):
    assert [t.id for t in sk.builtin_suite().select("stats-stdev")] == ["stats-stdev"]
    with pytest.raises(ArgumentError, match="'pkg/missing.py' is not a file"):
        sk.mutation_suite(tmp_path, "pytest", files="pkg/missing.py")


def test_a_module_that_is_not_utf8_is_named_or_left_out(tmp_path):
    (tmp_path / "legacy.py").write_bytes(b"# -*- coding: latin-1 -*-\nNAME = '\xe9t\xe9'\n")
    with pytest.raises(ArgumentError, match="'legacy.py' is not UTF-8"):
        sk.mutation_suite(tmp_path, "pytest", files=["legacy.py"])
    with pytest.raises(ArgumentError, match="no Python modules to mutate.*legacy.py"):
        sk.mutation_suite(tmp_path, "pytest")  # found, left out, and said so


def scripted_server_class():
    """The ScriptedToolServer notebook 03 defines, from the notebook's own cell."""
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    source = next("".join(c["source"]) for c in cells if "class ScriptedToolServer" in
                  "".join(c["source"]))  # fmt: skip
    namespace: dict = {}
    exec(source.split("\ntool_suite =")[0], namespace)  # the imports and the class
    return namespace["ScriptedToolServer"]


@needs_fuse
def test_notebook_scripted_tool_server_replays_each_tasks_own_fix(tmp_path):
    """Two tasks on the same file, one fixed in three edits: each gets its own fix."""
    suite = sk.builtin_suite().select(["bank-interest", "bank-positive-amounts"])
    server = scripted_server_class()(suite)
    try:
        agent = sk.OpenAIToolAgent("scripted", base_url=server.url)
        df = sk.experiment(agent, suite, ["on-edit"], seeds=1, progress=False)
    finally:
        server.close()
    assert df["solved"].all(), df[["task", "solved", "error"]]


@needs_fuse
def test_a_cell_that_finishes_while_ctrl_c_stops_the_run_is_cached(tmp_path, monkeypatch):
    """Ctrl-C (here: in one cell) waits for the cells running beside it; their rows, paid
    for (a model's tokens), are kept for the rerun, not dropped."""
    from shadowkernel.workspace import bridge

    suite = sk.builtin_suite().select(["stats-stdev", "textkit-slugify-runs"])
    taken = threading.Event()  # the experiment has taken the interrupted cell's outcome
    beside = threading.Event()  # the other cell is running
    real = bridge.as_completed

    def watching(futures):
        for future in real(futures):
            if future.exception() is not None:
                taken.set()
            yield future

    monkeypatch.setattr(bridge, "as_completed", watching)
    inner = SimulatedAgent(suite, seed=0, p_correct=1)

    class Agent:
        fingerprint, simulated, name = inner.fingerprint, True, "interrupted"
        cells: set[str] = set()

        def __call__(self, obs):
            if obs.task_id == "stats-stdev":
                beside.wait(120)  # a bound: Ctrl-C comes while the other cell runs
                raise KeyboardInterrupt
            beside.set()
            taken.wait(120)  # the cell goes on to its end once the run is stopping
            self.cells.add(obs.task_id)
            return inner(obs)

    cache = tmp_path / "cells"
    with pytest.raises(KeyboardInterrupt):
        sk.experiment(Agent(), suite, ["none"], concurrency=2, cache=cache, progress=False)
    assert taken.is_set() and Agent.cells == {"textkit-slugify-runs"}
    kept = [json.loads(p.read_text()) for p in cache.glob("*.json")]
    assert [row["task"] for row in kept] == ["textkit-slugify-runs"] and kept[0]["solved"]
