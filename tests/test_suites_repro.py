"""Suites you can trust, on a real library: more-itertools 11.2.1 from PyPI (its own tests,
which ours do not use), generated twice with the same seed (once in batches of forked
children, once a process per candidate, two at a time) gives the same JSON byte for byte,
and every kept task validates; a mutant that loops
is stopped by its CPU budget and excluded, whatever the machine's load."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from overlay_helpers import needs_fuse, snapshot

import shadowkernel as sk
from shadowkernel.evals import check, pypi
from shadowkernel.evals.mutation_runs import budgets

pytestmark = [needs_fuse, pytest.mark.slow, pytest.mark.timeout(1200)]
# Its recipes' tests, less the prime sieves' (the whole suite, 765 tests and 21,194 subtests,
# takes 40 s of CPU here; test_primes alone most of it)
COMMAND = "python -m pytest tests/test_recipes.py -k 'not PrimeFunctionTests and not test_large'"
FILES = ["more_itertools/recipes.py"]


@pytest.fixture(scope="module")
def more_itertools(tmp_path_factory):
    return pypi.unpack("more-itertools", "11.2.1", tmp_path_factory.mktemp("mi"))


def test_the_same_seed_gives_the_same_suite_byte_for_byte(more_itertools):
    before = snapshot(more_itertools)
    first = sk.mutation_suite(more_itertools, COMMAND, n=6, seed=3, files=FILES, timeout=900)
    second = sk.mutation_suite(more_itertools, COMMAND, n=6, seed=3, files=FILES, timeout=900,
                               workers=2, fork=False)  # fmt: skip
    assert snapshot(more_itertools) == before  # generation never writes the checkout
    assert len(first) == 6 and first.to_json() == second.to_json()
    assert first.tasks == second.tasks and first.budgets  # budgets: measured, not identity
    assert json.loads(first.to_json())["extra"]["kept"] == "6"
    table = first.validate()
    assert table["fails_on_task"].all() and table["passes_on_original"].all(), table
    for task in first:  # the hidden set is exactly the set judged: no overlap, all named
        assert not set(task.fail_to_pass) & set(task.pass_to_pass)
        assert set(task.pass_to_pass) <= set(first.budgets)


LOOPY = """\
def count_down(n):
    steps = 0
    while n > 0:
        n -= 1
        steps += 1
    return steps
"""
TESTS = """\
from loopy import count_down


def test_three():
    assert count_down(3) == 3


def test_zero():
    assert count_down(0) == 0
"""


def test_a_looping_mutant_is_stopped_by_its_cpu_budget_and_excluded(tmp_path):
    (tmp_path / "loopy.py").write_text(LOOPY)
    (tmp_path / "test_loopy.py").write_text(TESTS)
    suite = sk.mutation_suite(tmp_path, "python -m pytest test_loopy.py", n=20, seed=0,
                              per_function=20, timeout=900, budget_constant=1.0)  # fmt: skip
    rejected = json.loads(suite.extra["rejected"])
    assert rejected.get("timed out", 0) >= 1, rejected  # `n -= 1` -> `n += 1` loops forever
    assert suite.tasks and all("n += 1" not in t.start[0][1] for t in suite)
    again = sk.mutation_suite(tmp_path, "python -m pytest test_loopy.py", n=20, seed=0,
                              per_function=20, timeout=900, budget_constant=1.0)  # fmt: skip
    assert again.to_json() == suite.to_json()


def test_the_driver_stops_a_test_at_its_budget(tmp_path):
    (tmp_path / "test_spin.py").write_text(textwrap.dedent('''\
        def test_spin():
            while True:
                try:
                    pass
                except Exception:  # the budget is not an Exception: this cannot swallow it
                    pass

        def test_quick():
            assert True
    '''))  # fmt: skip
    data = driven(tmp_path, ["test_spin.py::test_spin", "test_spin.py::test_quick"],
                  {"test_spin.py::test_spin": 0.5}, timeout=300)  # fmt: skip
    assert data["outcomes"] == {"test_spin.py::test_quick": "passed",
                                "test_spin.py::test_spin": "timeout"}  # fmt: skip
    # Stopped by its budget, not before: the profiling timer is charged by scheduler ticks and
    # runs ahead of the precise CPU clock under load (0.385 s in a full run of the suite), so
    # the driver stops the test only once that clock, which measures the duration, has reached
    # the budget (to float rounding).
    assert data["durations"]["test_spin.py::test_spin"] >= 0.5 - 1e-9
    assert budgets({"a": 0.1, "b": 0.0}, 10, 2) == {"a": 3.0, "b": 2.0}


def test_a_budget_stops_a_test_between_many_reports_and_a_swallowed_one_ends_the_run(tmp_path):
    """A test making a report per subtest (paused each time, its own code between them shorter
    than a scheduler tick) is stopped by its budget: setting the timer again around each pause
    put it off forever. A budget swallowed twice ends the run with its result."""
    (tmp_path / "test_loops.py").write_text(textwrap.dedent('''\
        import unittest

        class Many(unittest.TestCase):
            def test_subtests(self):
                for i in range(10**9):
                    with self.subTest(i=i):
                        self.assertNotEqual(i % 7, 0)

        def test_swallow():
            try:
                while True:
                    pass
            except BaseException:  # a bare except: BudgetExceeded swallowed
                pass
            while True:
                pass
    '''))  # fmt: skip
    # A run each: a budget that runs out in unittest's own bookkeeping of a subtest stops
    # the run where it lands (the test's outcome "timeout", the tests after it not run).
    subtests, swallow = "test_loops.py::Many::test_subtests", "test_loops.py::test_swallow"
    data = driven(tmp_path, [subtests], {subtests: 0.3}, timeout=120)
    assert data["outcomes"] == {subtests: "timeout"}, data
    assert data["durations"][subtests] >= 0.3 - 1e-9
    data = driven(tmp_path, [swallow], {swallow: 0.3}, timeout=120)
    assert data["outcomes"] == {swallow: "timeout"}, data


def test_a_budget_counts_the_tests_code_and_a_timeout_of_its_own_is_a_timeout(tmp_path):
    """pytest making a failure's report (its traceback through a large module: more-itertools'
    more.py costs 0.3-7 s of CPU per failing test, and more under load) is not the test's
    time, so the test fails rather than times out; a test that fails because a wall-clock
    timeout of its own fired (a socket's) has the outcome "timeout"."""
    (tmp_path / "big.py").write_text("".join(f"def f{i}(x):\n    return x + {i}\n\n\n"
                                             for i in range(2500)) + BOTTOM)  # fmt: skip
    (tmp_path / "test_slow_report.py").write_text(textwrap.dedent('''\
        import socket

        from big import deep

        def test_deep_failure():
            deep(20)

        def test_socket_timeout():
            left, right = socket.socketpair()
            left.settimeout(0.05)
            assert left.recv(1) == b"x"  # nobody writes: socket.timeout, a TimeoutError
    '''))  # fmt: skip
    ids = ["test_slow_report.py::test_deep_failure", "test_slow_report.py::test_socket_timeout"]
    data = driven(tmp_path, ids, dict.fromkeys(ids, 0.2), timeout=300)
    assert data["outcomes"] == dict(zip(ids, ["failed", "timeout"], strict=True)), data
    assert data["cpu"] > 0.2 > data["durations"][ids[0]]  # the report ran, outside the budget
    assert "ValueError: bottom" in data["reports"][ids[0]]
    assert "TimeoutError" in data["reports"][ids[1]]


def driven(folder, ids, seconds, timeout):
    """The driver's result for the tests `ids` of `folder`; `seconds`: CPU budgets by id."""
    argv = check.spec_argv(sk.evals.Environment(sys.executable), ids, [], budgets=seconds,
                           durations=True)  # fmt: skip
    out = subprocess.run(argv, cwd=folder, capture_output=True, text=True, timeout=timeout,
                         env=check.environment())  # fmt: skip
    return check.parse(out.stdout)[2]


BOTTOM = """\
def deep(n):
    if n:
        return deep(n - 1)
    raise ValueError("bottom")
"""


def test_power_tasks_times_seeds():
    n = sk.tasks_needed(0.03, 0.15)
    assert sk.evals.minimum_detectable_effect(n, sk.evals.stats.discordance(0.15, 0.03)) == \
        pytest.approx(0.03, abs=1e-4)  # fmt: skip
    assert sk.tasks_needed(0.03, 0.15, seeds=3) == -(-n // 3)
    assert sk.evals.pairs_needed(0.03, 0.15, discordant=0.1) < n
    with pytest.raises(sk.ArgumentError, match="effect"):
        sk.tasks_needed(0.0, 0.15)
