"""`mutation_suite`: tasks made from any repository with a pytest suite, by mutating it.

    suite = sk.mutation_suite("path/to/project", "python -m pytest -q tests", n=20, seed=0)
    suite.validate()                  # every task's hidden tests, run for real

1. The project's tests run once inside the shadow, under coverage with one context per test:
   which tests pass, and which lines each test executes.
2. Every function of the project's modules yields candidate bugs (`mutation.mutants`); those
   in functions no passing test reaches are left out. The candidates are shuffled by `seed`,
   one kind after another, so a suite mixes kinds.
3. Each candidate is staged in a branch of its own (the checkout is never written), linted
   (a syntax error rejects it), and only the tests that reach its function run on it (all
   passing tests when the function runs at import time, where coverage cannot tell). It is
   kept when at least one and at most `max_failing` of them fail: a localized bug.
4. A kept mutant becomes a task: it starts from the mutant, its statement is a bug report
   written from what fails (the test ids and pytest's report), its hidden tests are the
   failing tests (`fail_to_pass`) and a seeded sample of the tests that still pass
   (`pass_to_pass`), and its reference solution is the inverse edit.

The same project, command, `n` and `seed` give the same suite, task for task (the tests are
assumed deterministic; a flaky test can make a candidate flip). Cost: one coverage run of
the suite (about 1.5x its plain time), then per candidate one lint and one run of the tests
reaching its function; on six 1.16.0 here (200 tests, 0.7 s) about 1 s per candidate
(figures in docs/suites.md). A suite of hundreds of tests taking 15 s costs its coverage
run plus, per candidate, the interpreter start, the collection of the test modules and the
reaching tests only.

Caveats: only pytest commands (the ids and the per-test coverage come from pytest), run
with plugin autoloading off unless `autoload=True`; mutants of code that runs at import time
are judged on the whole suite; equivalent mutants are weeded out only by "no test fails".
"""

from __future__ import annotations

import json
import os
import random
import shlex
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..agents.edits import Replace
from ..errors import ArgumentError
from . import mutation
from .check import normalize, parse, spec_argv, variables
from .pytest_command import Command, environment_for, parse_command
from .suite import Environment, Suite, Task

IMPORT_TIME = ""  # coverage's context before the first test: collection and imports
SKIP_DIRS = {"tests", "test", "testing", "docs", "doc", "documentation", "build", "dist",
             "examples", "benchmarks", "node_modules", "site-packages", "__pycache__"}  # fmt: skip
SYNTAX_CODES = {"E999", "invalid-syntax", "syntax-error", "syntax"}


# -- which files, which tests ---------------------------------------------------------------------


def source_files(root: str) -> list[str]:
    """The project's modules, relative to `root`: not tests, docs, builds, venvs or setup."""
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIP_DIRS
                         and not os.path.exists(os.path.join(folder, d, "pyvenv.cfg")))  # fmt: skip
        for name in sorted(files):
            if name.endswith(".py") and not _is_test_or_tooling(name):
                found.append(os.path.relpath(os.path.join(folder, name), root))
    return found


def _is_test_or_tooling(name: str) -> bool:
    return name.startswith("test_") or name.endswith("_test.py") or name in (
        "conftest.py", "setup.py", "noxfile.py", "fabfile.py")  # fmt: skip


@dataclass(frozen=True)
class Baseline:
    passing: frozenset[str]  # tests that pass on the original
    outcomes: dict[str, str]
    coverage: dict[str, dict[str, list[int]]]  # path -> context (test id or "") -> lines
    seconds: float


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


def candidates(texts: dict[str, str], baseline: Baseline, seed: int) -> list[mutation.Mutant]:
    """Mutants of reached functions, shuffled by `seed` within each kind, then interleaved
    kind by kind (in a seeded order of kinds) so that a suite mixes them."""
    rng = random.Random(seed)
    by_kind: dict[str, list[mutation.Mutant]] = {k: [] for k in mutation.KINDS}
    for path in sorted(texts):
        for m in mutation.mutants(path, texts[path]):
            if reaching(m, baseline):
                by_kind[m.kind].append(m)
    kinds = list(mutation.KINDS)
    rng.shuffle(kinds)
    for kind in kinds:
        rng.shuffle(by_kind[kind])
    order: list[mutation.Mutant] = []
    while any(by_kind.values()):
        order += [by_kind[k].pop(0) for k in kinds if by_kind[k]]
    return order


# -- a kept mutant becomes a task -----------------------------------------------------------------


def clean_report(report: str, root: str) -> str:
    """A failure report without durations, memory addresses or the checkout's own path."""
    return normalize(report).replace(root.rstrip("/") + "/", "").strip()


def statement(failing: Sequence[str], reports: dict[str, str], root: str, shown: int = 2,
              limit: int = 1500) -> str:  # fmt: skip
    """A bug report written from what fails: the test ids and what pytest says of them."""
    parts = [f"After a recent change, {len(failing)} "
             f"{'test that used to pass fails' if len(failing) == 1 else 'tests that used to pass fail'}:",  # noqa: E501
             "", *(f"    {t}" for t in failing), ""]  # fmt: skip
    for test in failing[:shown]:
        report = clean_report(reports.get(test, "(no report)"), root)
        if len(report) > limit:
            report = "[...]\n" + report[-limit:]
        parts += [f"pytest's report for {test}:", "", *("    " + x for x in report.splitlines()),
                  ""]  # fmt: skip
    parts.append("Find the cause in the code and fix it; do not change the tests.")
    return "\n".join(parts)


def pass_to_pass_sample(still: list[str], others: list[str], size: int, rng: random.Random
                        ) -> list[str]:  # fmt: skip
    """`size` tests that must keep passing: those reaching the function first, then others."""
    keep = rng.sample(still, min(size, len(still)))
    keep += rng.sample(others, min(size - len(keep), len(others)))
    return sorted(keep)


def make_task(
    mutant: mutation.Mutant,
    original: str,
    failing: list[str],
    keep: list[str],
    reports: dict[str, str],
    root: str,
    task_id: str,
) -> Task:
    mutated = mutant.apply(original)
    old, new = mutation.inverse(original, mutated, mutant)
    return Task(
        id=task_id, project="", statement=statement(failing, reports, root),
        files=(mutant.path,), solution=(Replace(mutant.path, old, new),), hidden="",
        repro=None, kind="bug", start=((mutant.path, mutated),), fail_to_pass=tuple(failing),
        pass_to_pass=tuple(keep), visible_tests=tuple(failing),
        origin=f"mutation {mutant.kind} in {mutant.path}:{mutant.function} line "
               f"{mutant.line}: {mutant.description}",
        digest=_digest(mutated, failing, keep),
    )  # fmt: skip


def _digest(mutated: str, failing: Sequence[str], keep: Sequence[str]) -> str:
    import hashlib

    data = json.dumps([mutated, list(failing), list(keep)]).encode()
    return hashlib.blake2b(data, digest_size=8).hexdigest()


# -- running --------------------------------------------------------------------------------------


@dataclass
class Tally:
    """What generation did: counts (deterministic) and timings."""

    candidates: int = 0
    tried: int = 0
    kept: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    seconds_baseline: float = 0.0
    seconds_total: float = 0.0

    def reject(self, why: str) -> None:
        self.rejected[why] = self.rejected.get(why, 0) + 1

    def as_extra(self) -> dict[str, str]:
        return {"candidates": str(self.candidates), "tried": str(self.tried),
                "kept": str(self.kept), "rejected": json.dumps(self.rejected, sort_keys=True),
                "seconds_baseline": f"{self.seconds_baseline:.2f}",
                "seconds_total": f"{self.seconds_total:.2f}"}  # fmt: skip


def run_tests(branch: Any, env: Environment, tests: list[str], timeout: float,
              coverage: list[str] | None = None) -> tuple[Any, dict[str, Any]]:  # fmt: skip
    argv = spec_argv(env, tests, [], coverage)
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
    if "coverage" not in data:
        raise ArgumentError(f"test_command: the first run of the tests did not finish (exit "
                            f"{result.exit_code}); is pytest (and coverage, for the per-test "
                            f"selection) installed for {env.python}? "
                            f"{result.stderr[-800:]}")  # fmt: skip
    outcomes = data.get("outcomes", {})
    passing = frozenset(t for t, o in outcomes.items() if o == "passed")
    if not passing:
        raise ArgumentError(f"test_command: no test passes on the original project "
                            f"({len(outcomes)} ran); the suite needs passing tests to "
                            "break")  # fmt: skip
    return Baseline(passing, outcomes, data["coverage"], time.perf_counter() - began)


def has_syntax_error(table: Any) -> bool:
    for code, message in zip(table["code"], table["message"], strict=True):
        if str(code or "") in SYNTAX_CODES or str(message).lower().startswith("syntaxerror"):
            return True
    return False


@dataclass(frozen=True)
class Outcome:
    """What one run of test ids gave: each test's outcome and the failures' reports."""

    outcomes: dict[str, str]
    reports: dict[str, str]
    timed_out: bool = False


def try_mutant(ws: Any, env: Environment, mutant: mutation.Mutant, original: str,
               tests: list[str], timeout: float, lint: bool
               ) -> tuple[str | None, Outcome]:  # fmt: skip
    """(why it is rejected or None, what the tests gave) for one candidate, in its own branch."""
    branch = ws.branch(f"mutation|{mutant.id}|{mutant.start}")
    try:
        branch.write(mutant.path, mutant.apply(original))
        if lint and has_syntax_error(branch.lint([mutant.path], fixes=False)):
            return "syntax error", Outcome({}, {})
        result, data = run_tests(branch, env, tests, timeout)
    finally:
        branch.drop()
    return None, Outcome(data.get("outcomes", {}), data.get("reports", {}), result.timed_out)


def verdict(run: Outcome, tests: list[str], max_failing: int) -> tuple[str | None, list[str]]:
    """(why the candidate is rejected or None, the tests it breaks)."""
    if run.timed_out:
        return "timed out", []
    if any(o == "error" for t, o in run.outcomes.items() if t not in tests):
        return "breaks collection", []  # an error outside the tests: a module did not import
    failing = [t for t in tests if run.outcomes.get(t) != "passed"]
    if not failing:
        return "no test fails", []
    if len(failing) > max_failing:
        return f"more than {max_failing} tests fail", failing
    return None, failing


def mutation_suite(
    path: str | os.PathLike[str],
    test_command: str | Sequence[str],
    n: int = 20,
    seed: int = 0,
    *,
    files: Iterable[str] | None = None,
    max_failing: int = 5,
    pass_to_pass: int = 10,
    per_function: int = 1,
    max_candidates: int | None = None,
    python: str | None = None,
    setup: str | None = None,
    autoload: bool = False,
    lint: bool = True,
    timeout: float = 300,
    servers: Sequence[Any] = ("ruff",),
    workspace: Any = None,
    name: str | None = None,
    progress: bool = False,
) -> Suite:
    """Up to `n` tasks made by mutating the project at `path` (see the module docstring).

    `test_command`: how its tests run (a pytest command line, relative to `path`); `files`:
    the modules to mutate (default: every module that is not a test, doc, build or setup
    file); `max_failing`: the most tests a kept mutant may break; `pass_to_pass`: how many
    still-passing tests each task also grades; `per_function`: tasks per function at most;
    `max_candidates`: stop after trying this many (default 10 * n); `python`/`setup`/
    `autoload`: the environment the tests run in. Bad arguments raise `ArgumentError`.
    """
    root = _check_args(path, n, max_failing, pass_to_pass, per_function)
    command = parse_command(test_command, root, python)
    env = environment_for(command, autoload, setup)
    sources = sorted(files) if files is not None else source_files(root)
    texts = _read_sources(root, sources)
    tally, began = Tally(), time.perf_counter()
    own = workspace is None
    if own:
        from ..workspace import Workspace

        workspace = Workspace(root, servers=servers if lint else ())
    try:
        base = baseline(workspace, env, command, sorted(texts), timeout)
        tally.seconds_baseline = base.seconds
        tasks = _generate(workspace, env, base, texts, root, n, seed, max_failing, pass_to_pass,
                          per_function, max_candidates or 10 * n, timeout, lint, tally,
                          progress)  # fmt: skip
    finally:
        if own:
            workspace.close()
    tally.seconds_total = time.perf_counter() - began
    line = shlex.join([command.python, "-m", "pytest", *command.options, *command.paths])
    return Suite(name=name or f"mutations of {os.path.basename(root)} (seed {seed})", root=root,
                 workspace_root=root, tasks=tuple(tasks),
                 description=f"{len(tasks)} mutants of {root}, kept by `{line}`",
                 extra=tally.as_extra(), environments={"": env})  # fmt: skip


def _generate(ws: Any, env: Environment, base: Baseline, texts: dict[str, str], root: str,
              n: int, seed: int, max_failing: int, sample: int, per_function: int,
              max_candidates: int, timeout: float, lint: bool, tally: Tally,
              progress: bool) -> list[Task]:  # fmt: skip
    order = candidates(texts, base, seed)
    tally.candidates = len(order)
    rng = random.Random(f"pass-to-pass|{seed}")
    per: dict[tuple[str, str], int] = {}
    tasks: list[Task] = []
    bar = _bar(min(n, len(order)), progress)
    for mutant in order:
        if len(tasks) >= n or tally.tried >= max_candidates:
            break
        if per.get((mutant.path, mutant.function), 0) >= per_function:
            continue
        tally.tried += 1
        tests = reaching(mutant, base)
        why, run = try_mutant(ws, env, mutant, texts[mutant.path], tests, timeout, lint)
        failing: list[str] = []
        if why is None:
            why, failing = verdict(run, tests, max_failing)
        if why is not None:
            tally.reject(why)
            continue
        still = [t for t in tests if t not in failing]
        others = sorted(base.passing - set(tests))
        keep = pass_to_pass_sample(still, others, sample, rng)
        task_id = _unique(mutant.id, {t.id for t in tasks})
        tasks.append(make_task(mutant, texts[mutant.path], failing, keep, run.reports, root,
                               task_id))  # fmt: skip
        per[(mutant.path, mutant.function)] = per.get((mutant.path, mutant.function), 0) + 1
        tally.kept += 1
        bar.update(1)
    bar.close()
    return tasks


def _bar(total: int, enabled: bool) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="mutants kept", disable=not enabled, unit="task")


def _unique(task_id: str, taken: set[str]) -> str:
    candidate, k = task_id, 1
    while candidate in taken:
        k += 1
        candidate = f"{task_id}-{k}"
    return candidate


def _check_args(path: Any, n: int, max_failing: int, sample: int, per_function: int) -> str:
    root = os.path.realpath(path) if isinstance(path, str | os.PathLike) else ""
    if not root or not os.path.isdir(root):
        raise ArgumentError(f"path={path!r}: give the folder of a project with a test suite")
    limits = (("n", n, 1), ("max_failing", max_failing, 1), ("pass_to_pass", sample, 0),
              ("per_function", per_function, 1))  # fmt: skip
    for label, value, least in limits:
        if not isinstance(value, int) or value < least:
            raise ArgumentError(f"{label}={value!r}: give an integer >= {least}")
    return root


def _read_sources(root: str, sources: Iterable[str]) -> dict[str, str]:
    texts = {}
    for rel_path in sources:
        full = os.path.join(root, rel_path)
        if not os.path.isfile(full):
            raise ArgumentError(f"files: {rel_path!r} is not a file under {root}")
        with open(full, encoding="utf-8") as f:
            texts[rel_path] = f.read()
    if not texts:
        raise ArgumentError(f"files: no Python modules to mutate under {root}; name them "
                            "with files=[...]")  # fmt: skip
    return texts
