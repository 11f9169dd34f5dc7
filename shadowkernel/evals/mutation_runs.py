"""Judging one mutant: the runs that decide whether it becomes a task (see mutation_suite).

The baseline run (coverage per test, each test's CPU time), each test's CPU budget, the
hidden set chosen before anything runs, the run of that set on the mutant and then on the
original, and the verdict. Every decision here reads outcomes, never wall-clock time: a test
out of its CPU budget is the outcome "timeout", and its candidate is excluded.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any

from ..errors import ArgumentError
from . import mutation
from .check import parse, spec_argv, variables
from .pytest_command import Command
from .suite import Environment

IMPORT_TIME = ""  # coverage's context before the first test: collection and imports


@dataclass(frozen=True)
class Baseline:
    passing: frozenset[str]  # tests that pass on the original
    outcomes: dict[str, str]
    coverage: dict[str, dict[str, list[int]]]  # path -> context (test id or "") -> lines
    seconds: float
    order: tuple[str, ...] = ()  # the passing tests, by id (the order sets run in)
    durations: dict[str, float] = field(default_factory=dict)  # test id -> CPU seconds


def reaching(mutant: mutation.Mutant, baseline: Baseline) -> list[str]:
    """The passing tests that execute the mutant's function body (all of them when the body
    runs at import time, where coverage cannot tell which test depends on it)."""
    first, last = mutant.body
    tests: set[str] = set()
    for context, lines in baseline.coverage.get(mutant.path, {}).items():
        if any(first <= n <= last for n in lines):
            if context == IMPORT_TIME:
                return sorted(baseline.passing)
            tests.add(context)
    return sorted(tests & baseline.passing)


@dataclass(frozen=True)
class Options:
    """The knobs of one generation (see `mutation_suite`)."""

    n: int
    seed: int
    max_failing: int
    pass_to_pass: int
    per_function: int
    max_candidates: int
    timeout: float
    lint: bool
    workers: int
    budget_multiple: float
    budget_constant: float


def budgets(durations: dict[str, float], multiple: float, constant: float) -> dict[str, float]:
    """Each test's CPU budget: a multiple of its own time on the original, plus a constant
    (the baseline ran under coverage, itself slower, so the budget is generous)."""
    return {t: round(multiple * d + constant, 3) for t, d in sorted(durations.items())}


def run_tests(branch: Any, env: Environment, tests: list[str], timeout: float,
              coverage: list[str] | None = None, budget: dict[str, float] | None = None
              ) -> tuple[Any, dict[str, Any]]:  # fmt: skip
    argv = spec_argv(env, tests, [], coverage, budget, durations=coverage is not None)
    result = branch.run(argv, timeout=timeout, cwd=".", env=variables(env),
                        output_cap=64 * 2**20)  # fmt: skip
    return result, parse(result.stdout)[2]


def baseline(ws: Any, env: Environment, command: Command, sources: list[str], timeout: float
             ) -> Baseline:  # fmt: skip
    began = time.perf_counter()
    branch = ws.branch("mutation|baseline")
    try:
        result, data = run_tests(branch, env, list(command.paths), timeout, coverage=sources)
    finally:
        branch.drop()
    if result.timed_out:
        raise ArgumentError(f"test_command: the first run of the tests (under coverage) took "
                            f"longer than timeout={timeout} s; give a larger timeout")  # fmt: skip
    if "coverage" not in data:
        raise ArgumentError(f"test_command: the first run of the tests did not finish (exit "
                            f"{result.exit_code}); is pytest (and coverage, for the per-test "
                            f"selection) installed for {env.python}? "
                            f"{result.stderr[-800:]}")  # fmt: skip
    outcomes = data.get("outcomes", {})
    order = tuple(t for t, o in outcomes.items() if o == "passed")
    if not order:
        raise ArgumentError(f"test_command: no test passes on the original project "
                            f"({len(outcomes)} ran); the suite needs passing tests to "
                            "break")  # fmt: skip
    return Baseline(frozenset(order), outcomes, data["coverage"], time.perf_counter() - began,
                    order, data.get("durations", {}))  # fmt: skip


def compiles(path: str, text: str) -> bool:
    try:
        compile(text, path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True


@dataclass(frozen=True)
class Outcome:
    """What one run of test ids gave: each test's outcome and the failures' reports."""

    outcomes: dict[str, str]
    reports: dict[str, str]
    timed_out: bool = False
    finished: bool = True


def hidden_set(mutant: mutation.Mutant, base: Baseline, sample: int, seed: int) -> list[str]:
    """The tests a candidate is judged (and its task graded) on, in the suite's order: those
    reaching its function, plus `sample` others drawn by the seed and the mutant."""
    reach = set(reaching(mutant, base))
    others = [t for t in base.order if t not in reach]
    rng = random.Random(f"pass-to-pass|{seed}|{mutant.id}|{mutant.start}")
    chosen = reach | set(rng.sample(others, min(sample, len(others))))
    return [t for t in base.order if t in chosen]


def run_set(ws: Any, env: Environment, name: str, edit: tuple[str, str] | None,
            tests: list[str], opts: Options, budget: dict[str, float]) -> Outcome:  # fmt: skip
    """`tests` run in a fresh branch (with `edit` staged: path, text), dropped afterwards."""
    branch = ws.branch(name)
    try:
        if edit is not None:
            branch.write(*edit)
        result, data = run_tests(branch, env, tests, opts.timeout, budget=budget)
    finally:
        branch.drop()
    return Outcome(data.get("outcomes", {}), data.get("reports", {}), result.timed_out,
                   "hidden" in data)  # fmt: skip


def verdict(run: Outcome, tests: list[str], max_failing: int) -> tuple[str | None, list[str]]:
    """(why the candidate is rejected or None, the tests it breaks)."""
    if run.timed_out or any(o == "timeout" for o in run.outcomes.values()):
        return "timed out", []
    if not run.finished:
        return "run did not finish", []
    if any(o == "error" for t, o in run.outcomes.items() if t not in tests):
        return "breaks collection", []  # an error outside the tests: a module did not import
    failing = [t for t in tests if run.outcomes.get(t) != "passed"]
    if not failing:
        return "no test fails", []
    if len(failing) > max_failing:
        return f"more than {max_failing} tests fail", failing
    return None, failing


@dataclass(frozen=True)
class Judged:
    why: str | None  # why the candidate is rejected, or None: it is a task
    tests: list[str]  # its hidden set
    failing: list[str]
    reports: dict[str, str]


def judge(ws: Any, env: Environment, base: Baseline, texts: dict[str, str], opts: Options,
          budget: dict[str, float], mutant: mutation.Mutant) -> Judged:  # fmt: skip
    """One candidate, decided by runs whose outcomes do not depend on the machine's load."""
    mutated = mutant.apply(texts[mutant.path])
    tests = hidden_set(mutant, base, opts.pass_to_pass, opts.seed)
    if opts.lint and not compiles(mutant.path, mutated):
        return Judged("syntax error", tests, [], {})
    name = f"mutation|{mutant.id}|{mutant.start}"
    run = run_set(ws, env, name, (mutant.path, mutated), tests, opts, budget)
    why, failing = verdict(run, tests, opts.max_failing)
    if why is None:
        original = run_set(ws, env, name + "|original", None, tests, opts, budget)
        if original.timed_out or not original.finished or any(
                original.outcomes.get(t) != "passed" for t in tests):  # fmt: skip
            why = "the set does not pass on the original"
    return Judged(why, tests, failing, run.reports)
