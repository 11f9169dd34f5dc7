"""Judging one mutant: the runs that decide whether it becomes a task (see mutation_suite).

The baseline run (coverage per test, each test's CPU time), each test's CPU budget, the
hidden set chosen before anything runs, the runs on the mutant (the tests reaching its
function, then the whole set in a task's order) and on the original, and the verdict. Every
decision here reads outcomes, never wall-clock time: a test out of its CPU budget is the
outcome "timeout", and its candidate is excluded.

Two ways to run a candidate's set, with the same verdict: `judge` gives it a pytest process
of its own (the mutated file staged in a branch), `judge_batch` judges many candidates in one
process that forks a child per candidate (`_pytest_driver.run_batch`): after one collection
the child swaps the mutated functions' code in, or, for a function that runs at import time,
a child forked before anything is imported imports the mutated text. A candidate the swap
cannot express exactly (a changed closure, a module imported only by a test) goes the first
way.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ArgumentError
from . import mutation
from .check import batch_argv, hidden_order, parse, spec_argv, variables
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
    cpu: float = 0.0  # the run's CPU seconds


def at_import(mutant: mutation.Mutant, baseline: Baseline) -> bool:
    """Whether the mutant's function body runs while the modules are imported or the tests
    collected (then only a fresh process shows what the mutant does)."""
    first, last = mutant.body
    lines = baseline.coverage.get(mutant.path, {}).get(IMPORT_TIME, [])
    return any(first <= n <= last for n in lines)


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
    fork: bool = True  # judge in batches of forked children (see `judge_batch`)
    paths: tuple[str, ...] = ()  # what the user's command selects (a batch collects these)
    import_time: bool = True  # mutate functions that run at import time too


def budgets(durations: dict[str, float], multiple: float, constant: float) -> dict[str, float]:
    """Each test's CPU budget: a multiple of its own time on the original, plus a constant
    (the baseline ran under coverage, itself slower, so the budget is generous)."""
    return {t: round(multiple * d + constant, 3) for t, d in sorted(durations.items())}


def run_tests(branch: Any, env: Environment, tests: list[str], timeout: float,
              coverage: list[str] | None = None, budget: dict[str, float] | None = None,
              stop: int | None = None) -> tuple[Any, dict[str, Any]]:  # fmt: skip
    argv = spec_argv(env, tests, [], coverage, budget, durations=coverage is not None,
                     stop=stop)  # fmt: skip
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
                    order, data.get("durations", {}), data.get("cpu", 0.0))  # fmt: skip


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
    cpu: float = 0.0  # the run's CPU seconds (0 for a child of a batch)


def hidden_set(mutant: mutation.Mutant, base: Baseline, sample: int, seed: int) -> list[str]:
    """The tests a candidate is judged (and its task graded) on, in the suite's order: those
    reaching its function, plus `sample` others drawn by the seed and the mutant."""
    reach = set(reaching(mutant, base))
    others = [t for t in base.order if t not in reach]
    rng = random.Random(f"pass-to-pass|{seed}|{mutant.id}|{mutant.start}")
    chosen = reach | set(rng.sample(others, min(sample, len(others))))
    return [t for t in base.order if t in chosen]


def run_set(ws: Any, env: Environment, name: str, edit: tuple[str, str] | None,
            tests: list[str], opts: Options, budget: dict[str, float], stop: int
            ) -> Outcome:  # fmt: skip
    """`tests` run in a fresh branch (with `edit` staged: path, text), dropped afterwards,
    until the verdict is known (more than `stop` tests do not pass, or one ran out of
    budget)."""
    branch = ws.branch(name)
    try:
        if edit is not None:
            branch.write(*edit)
        result, data = run_tests(branch, env, tests, opts.timeout, budget=budget, stop=stop)
    finally:
        branch.drop()
    return Outcome(data.get("outcomes", {}), data.get("reports", {}), result.timed_out,
                   "hidden" in data, data.get("cpu", 0.0))  # fmt: skip


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
    cpu: float = 0.0  # CPU seconds of the runs of its own (not of a batch's)


def judge(ws: Any, env: Environment, base: Baseline, texts: dict[str, str], opts: Options,
          budget: dict[str, float], mutant: mutation.Mutant) -> Judged:  # fmt: skip
    """One candidate, decided by runs whose outcomes do not depend on the machine's load."""
    mutated = mutant.apply(texts[mutant.path])
    tests = hidden_set(mutant, base, opts.pass_to_pass, opts.seed)
    if opts.lint and not compiles(mutant.path, mutated):
        return Judged("syntax error", tests, [], {})
    name = f"mutation|{mutant.id}|{mutant.start}"
    edit = (mutant.path, mutated)
    reach = reached(mutant, base, tests)
    run = run_set(ws, env, name, edit, reach, opts, budget, opts.max_failing)
    return decide(
        run,
        tests,
        reach,
        opts.max_failing,
        lambda order, failing: run_set(
            ws, env, name + "|whole", edit, order, opts, budget, len(failing)
        ),  # fmt: skip
        lambda order: run_set(ws, env, name + "|original", None, order, opts, budget, 0),
    )


def reached(mutant: mutation.Mutant, base: Baseline, tests: list[str]) -> list[str]:
    """The tests of the set that the mutant runs: those reaching its function (the others
    never execute the changed code), in the set's order."""
    reach = set(reaching(mutant, base))
    return [t for t in tests if t in reach]


def task_order(tests: list[str], failing: list[str]) -> list[str]:
    """The hidden set in the order `Suite.validate()` runs a task's (`check.hidden_order`)."""
    return hidden_order([t for t in tests if t not in failing], failing)


def decide(run: Outcome, tests: list[str], reach: list[str], max_failing: int,
           whole: Any, original: Any) -> Judged:  # fmt: skip
    """The verdict on the mutant's run of `reach`; when that breaks 1 to `max_failing` tests,
    on `whole(order, failing)`'s run of the whole set on the mutant, in the task's order,
    where exactly those tests must fail (a test can also fail through what an earlier one
    left behind: a cache, a global); then on `original(order)`'s, which must pass entirely.
    A kept task is then exactly what `validate()` checks. Its reports are the whole run's."""
    why, failing = verdict(run, reach, max_failing)
    cpu, reports = run.cpu, run.reports
    if why is None:
        order = task_order(tests, failing)
        mutant = whole(order, failing)
        cpu += mutant.cpu if mutant is not None else 0.0
        why = _whole_verdict(mutant, order, failing)
        reports = mutant.reports if mutant is not None else {}
    if why is None:
        again = original(order)
        cpu += again.cpu if again is not None else 0.0
        if again is None or again.timed_out or not again.finished or any(
                again.outcomes.get(t) != "passed" for t in tests):  # fmt: skip
            why = "the set does not pass on the original"
    return Judged(why, tests, failing, reports, cpu)


def _whole_verdict(run: Outcome | None, order: list[str], failing: list[str]) -> str | None:
    if run is None or not run.finished:
        return "run did not finish"
    if run.timed_out or any(o == "timeout" for o in run.outcomes.values()):
        return "timed out"
    if [t for t in order if run.outcomes.get(t) != "passed"] != failing:
        return "the whole set fails otherwise on the mutant"
    return None


BATCH_FILE = ".shadowkernel-mutants.json"  # staged only in the batch's throwaway branch


def judge_batch(ws: Any, env: Environment, base: Baseline, texts: dict[str, str],
                opts: Options, budget: dict[str, float], mutants: Sequence[mutation.Mutant],
                name: str) -> tuple[list[Judged | None], float, float]:  # fmt: skip
    """Candidates judged in one pytest process (see `_pytest_driver.run_batch`), in order;
    None where the batch cannot judge one exactly (the caller runs `judge` for it); the
    batch's CPU seconds; and the longest time asleep of a run on the original (how near the
    originals come to the driver's `BLOCKED_LIMIT`). Those
    whose function runs at import time are imported afresh in their child, the others have
    their code swapped in after one collection. Every candidate given must compile."""
    sets = [hidden_set(m, base, opts.pass_to_pass, opts.seed) for m in mutants]
    reach = [reached(m, base, tests) for m, tests in zip(mutants, sets, strict=True)]
    jobs = [{"path": m.path, "start": m.start, "end": m.end, "replacement": m.replacement,
             "function": m.function, "tests": r, "confirm_tests": tests,
             "fresh": at_import(m, base)}
            for m, tests, r in zip(mutants, sets, reach, strict=True)]  # fmt: skip
    graded = sorted({t for s in sets for t in s})
    spec = {"options": [*env.options], "paths": list(opts.paths), "jobs": opts.workers,
            "budgets": {t: budget[t] for t in graded if t in budget}, "mutants": jobs,
            "timeout": opts.timeout, "reports": opts.max_failing,
            "confirm": opts.max_failing, "stop": opts.max_failing}  # fmt: skip
    branch = ws.branch(name)
    try:
        branch.write(BATCH_FILE, json.dumps(spec))
        result = branch.run(batch_argv(env, BATCH_FILE), cwd=".", env=variables(env),
                            timeout=opts.timeout * (len(mutants) + 1),
                            output_cap=256 * 2**20)  # fmt: skip
    finally:
        branch.drop()
    data = parse(result.stdout)[2]
    answers = data.get("batch") or [None] * len(mutants)
    judged = [_judged(a, tests, r, opts.max_failing)
              for a, tests, r in zip(answers, sets, reach, strict=True)]  # fmt: skip
    originals = [a["original"] for a in answers if a and "original" in a]
    return judged, data.get("cpu", 0.0), max((o.get("asleep", 0.0) for o in originals), default=0.0)


def _judged(answer: dict[str, Any] | None, tests: list[str], reach: list[str],
            max_failing: int) -> Judged | None:  # fmt: skip
    if answer is None or "fallback" in answer:
        return None
    return decide(
        _outcome(answer),
        tests,
        reach,
        max_failing,
        lambda order, failing: _outcome(answer["whole"]) if "whole" in answer else None,
        lambda order: _outcome(answer["original"]) if "original" in answer else None,
    )


def _outcome(answer: dict[str, Any]) -> Outcome:
    return Outcome(answer.get("outcomes", {}), answer.get("reports", {}),
                   bool(answer.get("timed_out")))  # fmt: skip
