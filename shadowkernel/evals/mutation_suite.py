"""`mutation_suite`: tasks made from any repository with a pytest suite, by mutating it.

    suite = sk.mutation_suite("path/to/project", "python -m pytest -q tests", n=20, seed=0)
    suite.validate()                  # every task's hidden tests, run for real

1. The project's tests run once inside the shadow, under coverage with one context per test:
   which tests pass, which lines each test executes, and the CPU time each takes. A test's
   budget when graded is `budget_multiple` x that time + `budget_constant` CPU seconds
   (`Suite.budgets`).
2. Every function of the project's modules yields candidate bugs (`mutation.mutants`); those
   in functions no passing test reaches are left out. The candidates are shuffled by `seed`,
   one kind after another, so a suite mixes kinds.
3. Each candidate must compile, and its hidden set is chosen before anything runs: the
   passing tests that reach its function (all passing tests when the function runs at import
   time, where coverage cannot tell) plus a sample of `pass_to_pass` other passing tests,
   drawn from a generator seeded by `seed` and the mutant. The tests reaching the function
   run on the mutant (the others never execute the changed code), until the verdict is known.
   When at least one and at most `max_failing` of them fail and none ran out of its budget or
   failed to import, the whole set runs on the mutant, in the order `validate()` runs a
   task's (the others, then those failing tests): exactly those must fail there (a test can
   also fail through what an earlier one left behind). Then the set, in that order, runs on
   the original and must pass entirely. A kept task is therefore exactly what `validate()`
   checks: the same ids in the same order fail as stated on the task and pass on the
   original.
   Candidates are judged in batches (`fork=True`): one pytest process in a throwaway branch
   collects the tests once and forks a child per candidate, which swaps the mutated
   functions' code into the live function objects (or, for a function run at import time, a
   child forked before the project is imported imports the mutated text); `workers` children
   at a time. A candidate the swap cannot express exactly (a module first imported by a test,
   a closure whose variables change) gets a pytest process of its own, as every candidate
   does with `fork=False`; both ways decide alike (tests/test_suites_fork.py).
4. A kept mutant becomes a task: it starts from the mutant, its statement is a bug report
   written from what fails (the test ids and pytest's report), its hidden tests are the
   failing tests (`fail_to_pass`) and the rest of the set (`pass_to_pass`), and its
   reference solution is the inverse edit.

Reproducible: the same project, command, `n` and `seed` give the same suite byte for byte
(`Suite.to_json()`) on an idle or a loaded machine. Nothing decides by wall-clock time: a
looping test is stopped by its CPU budget, and a candidate with a test out of budget is
excluded ("timed out"), whatever the load (the budget counts the test's own code, not pytest
making its report); so is one with a test failing on a `TimeoutError` of its own (it waited
for the wall clock), and one whose forked child's processes slept 4 s in all (a test waiting
on a socket or a lock uses no CPU: time asleep, read from the scheduler's counters, is what
the load does not stretch); `random` is seeded per test; candidates are judged a batch
at a time, but they are taken in their seeded order. The tests themselves are assumed
deterministic (a flaky test can flip a candidate). Cost: one coverage run of the suite, then
per batch one collection, per candidate a fork running the tests that reach its function,
and per kept task two more forks running its set on the mutant and on the original (figures
in docs/suites.md).

Caveats: only pytest commands (the ids and the per-test coverage come from pytest), run
with plugin autoloading off unless `autoload=True`; equivalent mutants are weeded out only
by "no test fails"; a loop inside C code ignores the CPU budget and is stopped by the run's
wall-clock `timeout` (a last resort: keep it generous, as its outcome depends on the load).
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import os
import random
import re
import shlex
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..agents.edits import Replace
from ..errors import ArgumentError
from . import mutation
from .check import normalize
from .mutation_runs import (
    Baseline,
    Judged,
    Options,
    at_import,
    baseline,
    budgets,
    compiles,
    judge,
    judge_batch,
    reaching,
)
from .pytest_command import environment_for, parse_command
from .suite import Environment, Suite, Task

SKIP_DIRS = {"tests", "test", "testing", "docs", "doc", "documentation", "build", "dist",
             "examples", "benchmarks", "node_modules", "site-packages", "__pycache__"}  # fmt: skip


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


def candidates(texts: dict[str, str], baseline: Baseline, seed: int, import_time: bool = True
               ) -> list[mutation.Mutant]:  # fmt: skip
    """Mutants of reached functions (without those run at import time unless
    `import_time`), shuffled by `seed` within each kind, then interleaved kind by kind (in a
    seeded order of kinds) so that a suite mixes them."""
    rng = random.Random(seed)
    by_kind: dict[str, list[mutation.Mutant]] = {k: [] for k in mutation.KINDS}
    for path in sorted(texts):
        for m in mutation.mutants(path, texts[path]):
            if reaching(m, baseline) and (import_time or not at_import(m, baseline)):
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


# unittest's truncated diffs count what they leave out: a threaded test's count of errors
# varies from run to run (jmespath's cache thread-safety test under a mutant)
_COUNTS = [(re.compile(r"\[\d+ chars\]"), "[...]"),
           (re.compile(r"\b(contains|Diff is) \d+ (additional elements|characters long)"),
            r"\1 N \2")]  # fmt: skip


# pytest explaining a value it read from the clock: "where X = <built-in method today of ...>()"
_CLOCK = re.compile(
    r"where (.+?) = <built-in (?:method|function) "
    r"(?:now|today|utcnow|time|time_ns|monotonic|perf_counter)\b[^\n]*?>\(\)"
)


def clean_report(report: str, root: str) -> str:
    """A failure report without durations, memory addresses, counts of what unittest left
    out, values read from the clock (parse's tests compare with `datetime.today()`), or the
    checkout's own path."""
    report = normalize(report)
    for value in sorted(set(_CLOCK.findall(report)), key=len, reverse=True):
        report = report.replace(value, "<read from the clock>")
    return normalize(report, _COUNTS).replace(root.rstrip("/") + "/", "").strip()


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
    seconds_batches: float = 0.0  # judging candidates in batch processes
    seconds_single: float = 0.0  # judging those a batch cannot, a process each
    seconds_cpu: float = 0.0  # CPU of the test processes (baseline, batches, single runs)
    seconds_total: float = 0.0
    seconds_asleep: float = 0.0  # the longest a batch's run on the original slept

    def reject(self, why: str) -> None:
        self.rejected[why] = self.rejected.get(why, 0) + 1

    def as_extra(self) -> dict[str, str]:
        return {"candidates": str(self.candidates), "tried": str(self.tried),
                "kept": str(self.kept), "rejected": json.dumps(self.rejected, sort_keys=True),
                "seconds_baseline": f"{self.seconds_baseline:.2f}",
                "seconds_batches": f"{self.seconds_batches:.2f}",
                "seconds_single": f"{self.seconds_single:.2f}",
                "seconds_cpu": f"{self.seconds_cpu:.2f}",
                "seconds_total": f"{self.seconds_total:.2f}",
                "seconds_asleep": f"{self.seconds_asleep:.2f}"}  # fmt: skip


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
    workers: int = 1,
    budget_multiple: float = 10.0,
    budget_constant: float = 2.0,
    fork: bool = True,
    import_time: bool = True,
    servers: Sequence[Any] = (),
    workspace: Any = None,
    name: str | None = None,
    progress: bool = False,
) -> Suite:
    """Up to `n` tasks made by mutating the project at `path` (see the module docstring).

    `test_command`: how its tests run (a pytest command line, relative to `path`); `files`:
    the modules to mutate (default: every module that is not a test, doc, build or setup
    file); `max_failing`: the most tests a kept mutant may break; `pass_to_pass`: how many
    passing tests that do not reach the function each task also grades; `per_function`:
    tasks per function at most; `max_candidates`: stop after trying this many (default
    10 * n); `python`/`setup`/`autoload`: the environment the tests run in; `lint`: reject
    candidates that do not compile; `workers`: candidates judged at once (the result is the
    same for any number); `budget_multiple`/`budget_constant`: each test's CPU budget from
    its own time on the original; `timeout`: the wall-clock limit of one run (a last resort);
    `fork`: judge in batches of forked children (False: a process per candidate, slower,
    the same suite); `import_time`: also mutate functions that run at import time (each is
    judged on, and its task graded by, every passing test). Bad arguments raise
    `ArgumentError`.
    """
    root = _check_args(path, n, max_failing, pass_to_pass, per_function)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ArgumentError(f"seed={seed!r}: give an integer")
    _check_positive(workers=workers, budget_multiple=budget_multiple,
                    budget_constant=budget_constant, timeout=timeout)  # fmt: skip
    command = parse_command(test_command, root, python)
    env = environment_for(command, autoload, setup)
    if isinstance(files, str | os.PathLike):
        files = [os.fspath(files)]  # one module, not its characters
    sources = sorted(files) if files is not None else source_files(root)
    texts = _read_sources(root, sources, named=files is not None)
    opts = Options(n, seed, max_failing, pass_to_pass, per_function, max_candidates or 10 * n,
                   timeout, lint, workers, budget_multiple, budget_constant, fork,
                   command.paths, import_time)  # fmt: skip
    tally, began = Tally(), time.perf_counter()
    own = workspace is None
    if own:
        from ..workspace import Workspace

        workspace = Workspace(root, servers=servers, state=None)  # throwaway branches only
    try:
        base = baseline(workspace, env, command, sorted(texts), timeout)
        tally.seconds_baseline, tally.seconds_cpu = base.seconds, base.cpu
        budget = budgets(base.durations, budget_multiple, budget_constant)
        tasks = _generate(workspace, env, base, texts, root, opts, budget, tally, progress)
    finally:
        if own:
            workspace.close()
    tally.seconds_total = time.perf_counter() - began
    line = shlex.join([os.path.basename(command.python), "-m", "pytest", *command.options,
                       *command.paths])  # fmt: skip
    project = os.path.basename(root)
    return Suite(name=name or f"mutations of {project} (seed {seed})", root=root,
                 workspace_root=root, tasks=tuple(tasks),
                 description=f"{len(tasks)} mutants of {project}, kept by `{line}`",
                 extra=tally.as_extra(), environments={"": env},
                 budgets={t: budget[t] for t in sorted(_graded(tasks)) if t in budget}
                 )  # fmt: skip


def _graded(tasks: Sequence[Task]) -> set[str]:
    return {t for task in tasks for t in (*task.fail_to_pass, *task.pass_to_pass)}


def _generate(ws: Any, env: Environment, base: Baseline, texts: dict[str, str], root: str,
              opts: Options, budget: dict[str, float], tally: Tally, progress: bool
              ) -> list[Task]:  # fmt: skip
    """Candidates judged a batch at a time, but taken in their seeded order: the counts,
    the per-function limit and the cut at `n` see the same sequence for any batch size and
    number of workers (a candidate judged ahead and then not needed is simply dropped)."""
    order = candidates(texts, base, opts.seed, opts.import_time)
    tally.candidates = len(order)
    per: dict[tuple[str, str], int] = {}
    tasks: list[Task] = []
    bar = _bar(min(opts.n, len(order)), progress)
    pool = cf.ThreadPoolExecutor(opts.workers, thread_name_prefix="sk-mutant")
    position, batches = 0, 0
    try:
        while len(tasks) < opts.n and tally.tried < opts.max_candidates and position < len(order):
            size = min(max(16, 2 * (opts.n - len(tasks))), 160,
                       opts.max_candidates - tally.tried)  # fmt: skip
            batch: list[mutation.Mutant] = []
            while len(batch) < size and position < len(order):
                m = order[position]
                position += 1
                if per.get((m.path, m.function), 0) < opts.per_function:
                    batch.append(m)
            batches += 1
            verdicts = _judge_all(ws, env, base, texts, opts, budget, batch, batches, pool,
                                  tally)  # fmt: skip
            for mutant, judged in zip(batch, verdicts, strict=True):
                if len(tasks) >= opts.n or tally.tried >= opts.max_candidates:
                    break
                if per.get((mutant.path, mutant.function), 0) >= opts.per_function:
                    continue
                tally.tried += 1
                if judged.why is not None:
                    tally.reject(judged.why)
                    continue
                keep = [t for t in judged.tests if t not in judged.failing]
                task_id = _unique(mutant.id, {t.id for t in tasks})
                tasks.append(make_task(mutant, texts[mutant.path], judged.failing, keep,
                                       judged.reports, root, task_id))  # fmt: skip
                per[(mutant.path, mutant.function)] = per.get((mutant.path, mutant.function),
                                                              0) + 1  # fmt: skip
                tally.kept += 1
                bar.update(1)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        bar.close()
    return tasks


def _judge_all(ws: Any, env: Environment, base: Baseline, texts: dict[str, str],
               opts: Options, budget: dict[str, float], batch: list[mutation.Mutant],
               number: int, pool: cf.ThreadPoolExecutor, tally: Tally
               ) -> list[Judged]:  # fmt: skip
    """Each candidate's verdict, in order: those a fork can judge in one batch process, the
    others (and those the batch answered "fallback") in a run each, `workers` at a time."""
    verdicts: list[Judged | None] = [None] * len(batch)
    forkable = [i for i, m in enumerate(batch) if opts.fork
                and (not opts.lint or compiles(m.path, m.apply(texts[m.path])))]  # fmt: skip
    began = time.perf_counter()
    if forkable:
        chosen = [batch[i] for i in forkable]
        judged, cpu, slept = judge_batch(ws, env, base, texts, opts, budget, chosen,
                                         f"mutation|batch|{number}")  # fmt: skip
        tally.seconds_cpu += cpu
        tally.seconds_asleep = max(tally.seconds_asleep, slept)
        for i, verdict in zip(forkable, judged, strict=True):
            verdicts[i] = verdict
    tally.seconds_batches += time.perf_counter() - began
    began = time.perf_counter()
    rest = [i for i, v in enumerate(verdicts) if v is None]
    one = lambda i: judge(ws, env, base, texts, opts, budget, batch[i])  # noqa: E731
    for i, verdict in zip(rest, pool.map(one, rest), strict=True):
        verdicts[i] = verdict
        tally.seconds_cpu += verdict.cpu
    tally.seconds_single += time.perf_counter() - began
    return [v for v in verdicts if v is not None]


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
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            raise ArgumentError(f"{label}={value!r}: give an integer >= {least}")
    return root


def _check_positive(**values: float) -> None:
    for label, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise ArgumentError(f"{label}={value!r}: give a positive number")
    if not isinstance(values["workers"], int):
        raise ArgumentError(f"workers={values['workers']!r}: give an integer >= 1")


def _read_sources(root: str, sources: Iterable[str], named: bool = True) -> dict[str, str]:
    """The modules' texts; a module found by `source_files` that is not UTF-8 (a Latin-1
    file with a coding line) is left out, one named in `files=` is an error naming it."""
    texts, left_out = {}, []
    for rel_path in sources:
        full = os.path.join(root, rel_path)
        if not os.path.isfile(full):
            raise ArgumentError(f"files: {rel_path!r} is not a file under {root}")
        try:
            with open(full, encoding="utf-8") as f:
                texts[rel_path] = f.read()
        except UnicodeDecodeError as error:
            if named:
                raise ArgumentError(f"files: {rel_path!r} is not UTF-8 text ({error.reason} "
                                    f"at byte {error.start}); mutation suites stage modules "
                                    "as UTF-8: leave it out") from None  # fmt: skip
            left_out.append(rel_path)
    if not texts:
        also = f" (left out, not UTF-8: {', '.join(left_out)})" if left_out else ""
        raise ArgumentError(f"files: no Python modules to mutate under {root}{also}; name "
                            "them with files=[...]")  # fmt: skip
    return texts
