"""Run inside the shadow by the check: the visible tests (optionally), then the hidden tests.

Invoked as a script (not `-m`), so the run imports pytest (and coverage, when asked) and
nothing of shadowkernel: any interpreter with pytest can run it, the project's own venv
included. One process serves both test sets, which halves a check's cost (the interpreter
and pytest start once). Prints a marker before each set and a JSON line at the end; exits
with the hidden tests' exit code.

    python _pytest_driver.py INI HIDDEN [VISIBLE...]     a suite folder's tests (folders)
    python _pytest_driver.py --spec JSON                 test ids (mutation, SWE-bench tasks)
    python _pytest_driver.py --batch FILE                many mutants, one collection (below)

The spec is {"hidden": [ids], "visible": [ids], "options": [pytest args], "outcomes": bool,
"coverage": [include patterns] or null, "budgets": {id: CPU seconds} or null, "budget":
CPU seconds for tests the mapping does not name, "durations": bool, "stop": N or null}. With
"outcomes" the JSON line also carries each test's outcome ("passed", "failed", "error", "skipped",
"timeout", or "missing" when it was not found) and the report of each failure; with
"coverage" it carries, per measured file, the lines each test executed (`switch_context` per
test: lines run at import or collection time belong to the context ""); with "durations" the
CPU seconds each test took (setup to teardown); "cpu" is the run's own CPU time (with the
children it waited for). With "stop" the run ends as soon as its verdict is known: a test
ran out of its budget, or more than N tests did not pass.

A test's budget is CPU time of this process (`time.process_time()`, the clock its duration
is measured with), not wall time: a test that loops is stopped the same way on an idle
machine and on a loaded one, so its outcome ("timeout") does not depend on the load. An
`ITIMER_PROF` timer only wakes the check: the kernel charges it by scheduler ticks, so under
load it runs ahead of the process's real CPU time, and the test is stopped only once
`time.process_time()` says the budget is used (see `_over_budget`). A loop inside C code
that never returns to the interpreter is not interrupted by it; the run's wall-clock limit
stops that one. The budget counts the test's own code, not pytest making its report (see
`Recorder`); a test failing on a `TimeoutError` of its own waited for the wall clock, and
its outcome is "timeout" too.

`--batch FILE` judges many mutants of the project in one process (`mutation_suite`): pytest
collects the command's tests once, then for each mutant a forked child swaps the mutated
functions' code into the live function objects (every function of the module whose code the
mutation changes, line shifts included; linecache shows the mutated text in tracebacks), runs
the mutant's test ids in their order and reports outcomes and reports through a pipe. When 1
to `confirm` tests fail and none ran out of budget, another child runs its whole hidden set
(`confirm_tests`) on the mutant, in the order `Suite.validate()` runs a task's (the others
first, then the failing tests); when exactly those fail there, one more runs that set on the
original. A mutant the swap cannot express exactly (its module was not imported before the
tests, the module's structure changes, a closure's cells differ, or no live function holds
its code) is answered "fallback", and the caller judges it with a run of its own. A child
whose processes have slept `BLOCKED_LIMIT` seconds in all (`asleep`: a mutant waiting forever
on a socket or a lock, which no CPU budget stops) is killed and answered "timed_out", as is
one past the wall-clock "timeout"; each answer carries its "asleep" seconds. `jobs`
children run at once; results are printed in the file's order. The file is JSON: {"options",
"paths", "budgets", "jobs", "timeout" (wall seconds per child, a last resort), "reports" (how
many failures' reports to keep), "confirm", "stop" (as above), "mutants": [{"path", "start",
"end", "replacement", "function", "tests", "confirm_tests" (the whole hidden set)}]}; each
answer holds the whole set's answer as "whole" and the original's as "original".
"""

import contextlib
import gc
import json
import linecache
import os
import random
import selectors
import signal
import sys
import time
import types
from typing import NamedTuple

VISIBLE = "@@shadowkernel-visible@@"
HIDDEN = "@@shadowkernel-hidden@@"
RESULT = "@@shadowkernel-result@@ "
REPORT_LIMIT = 3000  # characters kept of each failure's report


class BudgetExceeded(BaseException):
    """Raised in a test that used up its CPU budget (a BaseException: `except Exception` in
    the code under test does not swallow it)."""


# The running test's budget: its seconds; the `time.process_time()` at which it runs out
# (each pause moves it by the CPU time the pause took; once BudgetExceeded is raised, a whole
# budget later), None when the test has none; whether it ran out (the outcome is "timeout");
# whether BudgetExceeded was raised; while pytest's own work is under way, the
# `time.process_time()` at which that work began, else None (nothing is raised in it); and
# whether the timer rang meanwhile (the pause's end arms it again).
_BUDGET = {"seconds": None, "deadline": None, "out": False, "raised": False, "paused": None,
           "rang": False}  # fmt: skip


class BudgetSwallowed(KeyboardInterrupt):
    """Raised when a test went on for a whole budget more after `BudgetExceeded` (a bare
    `except:` swallowed it: unittest's subTest reports the error and goes on). pytest and
    unittest let a KeyboardInterrupt through: the run stops, the test's outcome "timeout"."""


def _arm():
    """Wake `_over_budget` once the process is charged what is left of the budget (at least
    a little: 0 would stop the timer; the kernel adds a tick to any value)."""
    left = _BUDGET["deadline"] - time.process_time()
    signal.setitimer(signal.ITIMER_PROF, max(left, 1e-6))


def _disarm():
    """No budget runs from now on: the alarm stopped, and one already on its way ignored."""
    signal.setitimer(signal.ITIMER_PROF, 0)
    _BUDGET["deadline"] = None


def _over_budget(signum, frame):
    # ITIMER_PROF is only the alarm. The kernel charges it by scheduler ticks (CONFIG_TICK_
    # CPU_ACCOUNTING: a whole tick, 4 ms at HZ=250, to the process running when the tick
    # comes), so on a loaded machine, where other processes run between ticks, it runs ahead
    # of the CPU the process used: up to 17% here, a 0.5 s budget firing after 0.41 s of
    # `time.process_time()`. That clock (the scheduler's exact runtime of all the process's
    # threads, as the timer counts all of them, without children) measures the test's
    # duration; it decides.
    if _BUDGET["deadline"] is None:
        return  # no test's budget runs (a signal handled late)
    paused = _BUDGET["paused"]
    if paused is not None:  # pytest's own work: the test's time stopped when it began
        _BUDGET["out"] = _BUDGET["out"] or paused >= _BUDGET["deadline"]
        _BUDGET["rang"] = True
        return
    if time.process_time() < _BUDGET["deadline"]:
        _arm()  # not used up yet: wake again once what is left is charged
        return
    _BUDGET["out"] = True
    if _BUDGET["raised"]:
        _BUDGET["deadline"] = None  # the run stops: no alarm in pytest's wrap-up
        raise BudgetSwallowed("the test went on after its CPU-time budget ran out")
    _BUDGET["raised"] = True
    _BUDGET["deadline"] += _BUDGET["seconds"]  # a whole budget more: then BudgetSwallowed
    _arm()
    raise BudgetExceeded("the test used up its CPU-time budget")


def _hookwrapper(function):
    import pluggy  # pytest's own dependency

    return pluggy.HookimplMarker("pytest")(hookwrapper=True)(function)


def _waited_out(error):
    """Whether `error` is, or was raised while handling, a `TimeoutError` (socket, asyncio and
    concurrent.futures timeouts are one): the test waited for a wall-clock timeout of its own,
    whose outcome depends on the machine's load."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, TimeoutError):
            return True
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return False


class Recorder:
    """A pytest plugin: each test's outcome and failure report; switches coverage contexts;
    arms each test's CPU budget and measures its CPU time. Both count the test's own code,
    not pytest making its report or explaining a failed assert (a traceback through a large
    module, a diff of long lists: up to seconds, and the same work runs slower when the
    machine is loaded)."""

    def __init__(self, coverage=None, budgets=None, budget=None, stop=None):
        self.outcomes, self.reports, self.coverage = {}, {}, coverage
        self.budgets, self.budget, self.stop = budgets or {}, budget, stop
        self.durations, self._started, self.session = {}, {}, None
        self._waited, self._over, self._paused, self._current = set(), set(), 0.0, None
        if self.budgets or self.budget:
            signal.signal(signal.SIGPROF, _over_budget)

    @_hookwrapper
    def pytest_runtest_makereport(self, item, call):
        # A test keeps its first failure's report; the later ones (a unittest's failing
        # subtests: thousands in more-itertools' islice tests, each parsing the 5,000-line
        # module per traceback entry, minutes in all) take pytest's one-line form.
        option = item.config.option
        style = getattr(option, "tbstyle", "auto")
        if item.nodeid in self.reports:
            option.tbstyle = "line"
        try:
            with self.paused(again=call.when != "teardown"):
                yield
        finally:
            option.tbstyle = style
        if _BUDGET["out"]:
            self._over.add(item.nodeid)
        elif call.excinfo is not None and _waited_out(call.excinfo.value):
            self._waited.add(item.nodeid)

    def settle(self):
        """After a run stopped early (BudgetSwallowed, or the budget's raise landed in
        pytest's own code, as in its subtests' bookkeeping): the test whose budget ran out
        has the outcome "timeout", however the run ended. Whether there was one."""
        _disarm()
        if not _BUDGET["out"] or self._current is None:
            return False
        self.outcomes[self._current] = "timeout"
        self.reports.setdefault(self._current, "the test used up its CPU-time budget")
        self._record_duration(self._current)  # stopped before its logfinish: it ran until now
        return True

    def _record_duration(self, nodeid):
        """The test's CPU time from its setup until now, pauses left out (once)."""
        if nodeid in self._started:
            self.durations[nodeid] = time.process_time() - self._paused - self._started.pop(nodeid)

    @_hookwrapper
    def pytest_assertrepr_compare(self, config, op, left, right):
        with self.paused():
            outcome = yield
        answers = outcome.get_result()  # each plugin's explanation: a list of lines or None
        outcome.force_result([a and sorted_set_items(a) for a in answers])

    @contextlib.contextmanager
    def paused(self, again=True):
        """The test's CPU budget and time stand still meanwhile: the CPU time the pause took
        moves the budget's deadline and is left out of the test's duration alike. The timer
        runs on (the handler raises nothing meanwhile): setting it adds a tick (the kernel
        rounds up) and only ticks landing while it is set count, so stopping and setting it
        again around each pause (a report per subtest, thousands of them, each window of the
        test's own code shorter than a tick) would put off the alarm forever."""
        _BUDGET["paused"] = began = time.process_time()
        try:
            yield
        finally:
            spent = time.process_time() - began
            self._paused += spent
            if _BUDGET["deadline"] is not None:
                _BUDGET["deadline"] += spent  # before the pause ends: a late signal sees it
            _BUDGET["paused"] = None
            if not again:  # the test's time is over (teardown's report)
                signal.setitimer(signal.ITIMER_PROF, 0)
            elif _BUDGET["rang"] and _BUDGET["deadline"] is not None:
                _arm()
            _BUDGET["rang"] = False

    def pytest_runtest_logreport(self, report):
        if report.nodeid in self._over:
            self.outcomes[report.nodeid] = "timeout"
            self.reports.setdefault(report.nodeid, "the test used up its CPU-time budget")
        elif report.failed and report.nodeid in self._waited:
            self.outcomes[report.nodeid] = "timeout"
            self.reports.setdefault(
                report.nodeid,
                "the test waited for a timeout of its own "
                "(TimeoutError)\n" + report.longreprtext[-REPORT_LIMIT:],
            )
        elif report.failed:
            kind = "failed" if report.when == "call" else "error"
            self.outcomes[report.nodeid] = kind
            if report.nodeid not in self.reports:
                self.reports[report.nodeid] = report.longreprtext[-REPORT_LIMIT:]
        elif report.skipped and report.nodeid not in self.outcomes:
            self.outcomes[report.nodeid] = "skipped"
        elif report.when == "call" and report.passed:
            self.outcomes.setdefault(report.nodeid, "passed")

    def enough(self):
        """Whether the verdict is known before the rest runs: a test ran out of its budget,
        or more than `stop` tests did not pass."""
        if self.stop is None:
            return False
        values = list(self.outcomes.values())
        return "timeout" in values or sum(o != "passed" for o in values) > self.stop

    def pytest_sessionstart(self, session):
        self.session = session

    def pytest_collectreport(self, report):
        if report.failed:
            self.outcomes[report.nodeid or "<collection>"] = "error"
            self.reports[report.nodeid or "<collection>"] = report.longreprtext[-REPORT_LIMIT:]

    def pytest_runtest_setup(self, item):
        if self.coverage is not None:
            self.coverage.switch_context(item.nodeid)
        now = time.process_time()  # the test's duration and its budget start together
        self._started[item.nodeid] = now - self._paused
        random.seed(item.nodeid)  # unseeded test data (more-itertools' `choices`) reproduces
        _BUDGET.update(out=False, raised=False, rang=False)
        self._current = item.nodeid
        seconds = self.budgets.get(item.nodeid, self.budget)
        _BUDGET["deadline"], _BUDGET["seconds"] = (now + seconds if seconds else None), seconds
        if seconds:
            _arm()

    def pytest_runtest_teardown(self, item, nextitem):
        if self.coverage is not None and nextitem is None:
            self.coverage.switch_context("")

    def pytest_runtest_logfinish(self, nodeid, location):
        _disarm()
        self._record_duration(nodeid)
        if self.session is not None and self.enough():
            self.session.shouldstop = "the verdict is known"


def main(argv):
    if argv[:1] == ["--spec"]:
        return run_spec(json.loads(argv[1]))
    if argv[:1] == ["--batch"]:
        with open(argv[1], encoding="utf-8") as f:
            return run_batch(json.load(f))
    ini, hidden, visible = argv[0], argv[1], argv[2:]
    sys.path.insert(0, os.getcwd())  # the project under test, as `python -m pytest` would
    import pytest

    options = ["-c", ini, "--rootdir", os.getcwd()] if ini != "-" else ["--rootdir", os.getcwd()]
    codes = {}
    if visible:
        print(VISIBLE, flush=True)
        codes["visible"] = int(pytest.main([*options, *visible]))
    print(HIDDEN, flush=True)
    codes["hidden"] = int(pytest.main([*options, hidden]))
    print(RESULT + json.dumps(codes), flush=True)
    return codes["hidden"]


def run_spec(spec):
    sys.path.insert(0, os.getcwd())
    import pytest

    coverage = start_coverage(spec["coverage"]) if spec.get("coverage") is not None else None
    recorder = Recorder(coverage, spec.get("budgets"), spec.get("budget"), spec.get("stop"))
    options = list(spec.get("options", []))
    result = {}
    if spec.get("visible"):
        print(VISIBLE, flush=True)
        result["visible"] = int(pytest.main([*options, *spec["visible"]], plugins=[recorder]))
        recorder.outcomes, recorder.reports = {}, {}  # the hidden set is judged on its own
    print(HIDDEN, flush=True)
    result["hidden"] = int(pytest.main([*options, *spec["hidden"]], plugins=[recorder]))
    recorder.settle()
    if spec.get("outcomes"):
        missing = {t: "missing" for t in spec["hidden"] if "::" in t}  # a test id, not a file
        result["outcomes"] = {**missing, **recorder.outcomes}
        result["reports"] = recorder.reports
    if coverage is not None:
        result["coverage"] = coverage_lines(coverage)
    if spec.get("durations"):
        result["durations"] = recorder.durations
    result["cpu"] = cpu_seconds()
    print(RESULT + json.dumps(result, sort_keys=True), flush=True)
    return result["hidden"]


def start_coverage(include):
    import coverage

    cov = coverage.Coverage(data_file=None, include=include or None, branch=False)
    cov.start()
    return cov


def coverage_lines(cov):
    """{relative path: {context: [lines]}} of what each test (context) executed."""
    cov.stop()
    data = cov.get_data()
    root = os.getcwd()
    files = {}
    for path in sorted(data.measured_files()):
        by_context = {}
        for line, contexts in sorted((data.contexts_by_lineno(path) or {}).items()):
            for context in contexts:
                by_context.setdefault(context, []).append(line)
        files[os.path.relpath(path, root)] = by_context
    return files


# -- many mutants, one collection -----------------------------------------------------------------


def run_batch(spec):
    sys.path.insert(0, os.getcwd())
    import pytest

    recorder = Recorder(None, spec.get("budgets"), None, spec.get("stop"))
    mutants = spec["mutants"]
    results = [None] * len(mutants)
    fresh = [i for i, m in enumerate(mutants) if m.get("fresh")]
    # Before anything of the project is imported: these children import the mutant afresh.
    fan_out(spec, fresh, results, lambda job: fresh_child(pytest, spec, recorder, job))
    server = Batch(spec, recorder, results, [i for i in range(len(mutants)) if i not in fresh])
    code = 0
    if server.todo:
        code = int(pytest.main([*spec.get("options", []), *spec.get("paths", [])],
                               plugins=[recorder, server]))  # fmt: skip
    result = {"hidden": code, "batch": results, "cpu": cpu_seconds()}
    print(RESULT + json.dumps(result, sort_keys=True), flush=True)
    return code


def cpu_seconds():
    """The CPU time of this process and of the children it waited for (user + system)."""
    import resource

    usage = [resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return sum(u.ru_utime + u.ru_stime for u in usage)


class Batch:
    """A pytest plugin taking over the run loop once the tests are collected: a forked
    child per mutant swaps its code in and runs its tests."""

    def __init__(self, spec, recorder, results, todo):
        self.spec, self.recorder, self.results, self.todo = spec, recorder, results, todo

    def pytest_runtestloop(self, session):
        items = {item.nodeid: item for item in session.items}
        live = Live({self.spec["mutants"][i]["path"] for i in self.todo})
        fan_out(self.spec, self.todo, self.results,
                lambda job: self._child(session, items, live, job))  # fmt: skip
        return True

    def _child(self, session, items, live, job):
        if job["path"] is not None:
            why = swap(job, live)
            if why is not None:
                return {"fallback": why}
        self.recorder.stop = job.get("stop", self.recorder.stop)
        self.recorder.outcomes, self.recorder.reports, self.recorder.session = {}, {}, None
        chosen = [items[t] for t in job["tests"] if t in items]
        for i, item in enumerate(chosen):
            following = chosen[i + 1] if i + 1 < len(chosen) else None
            try:
                item.config.hook.pytest_runtest_protocol(item=item, nextitem=following)
            except BaseException:
                if not self.recorder.settle():
                    raise
            if self.recorder.enough():
                break
        missing = {t: "missing" for t in job["tests"] if t not in items}
        return answer_of(self.spec, job, self.recorder, missing)


def fresh_child(pytest, spec, recorder, job):
    """The job's tests by a pytest run of their own in this child, the mutant's module
    imported from the mutated text (an import hook): as a fresh process would."""
    if job["path"] is not None:
        serve_mutant(job)
    recorder.stop = job.get("stop", recorder.stop)
    recorder.outcomes, recorder.reports, recorder.session = {}, {}, None
    pytest.main([*spec.get("options", []), *job["tests"]], plugins=[recorder])
    recorder.settle()
    missing = {t: "missing" for t in job["tests"] if "::" in t}
    return answer_of(spec, job, recorder, missing)


def answer_of(spec, job, recorder, missing):
    outcomes = {**missing, **recorder.outcomes}
    failing = [t for t in job["tests"] if outcomes.get(t) != "passed"]
    kept = failing[: int(spec.get("reports", 2))]
    return {"outcomes": outcomes,
            "reports": {t: recorder.reports[t] for t in kept if t in recorder.reports}}  # fmt: skip


def fan_out(spec, todo, results, child):
    """Each job of `todo` (indices of the spec's mutants) in a forked child, `jobs` at a
    time; when one breaks 1 to `confirm` tests and none ran out of budget, another child
    runs its whole hidden set on the mutant (`PHASES`), and when exactly those tests fail
    there, one more runs the set on the original. Answers land in `results` by index."""
    mutants = spec["mutants"]
    pending = [(i, "mutant") for i in todo]  # (mutant index, phase)
    running = {}  # pid -> (mutant index, phase, read end, chunks, started)
    selector = selectors.DefaultSelector()
    timeout = float(spec.get("timeout", 300))
    sleeps = {}  # pid -> Sleep

    def done(index, phase, answer):
        if phase == "mutant":
            results[index] = answer
            going_on = _confirm(spec, answer, mutants[index]["tests"])
        else:
            results[index][phase] = answer
            going_on = phase == "whole" and _exactly(answer, mutants[index], results[index])
        if going_on:
            pending.insert(0, (index, PHASES[PHASES.index(phase) + 1]))

    while pending or running:
        while pending and len(running) < max(1, int(spec.get("jobs", 1))):
            index, phase = pending.pop(0)
            job = phase_job(mutants[index], phase, results[index])
            pid, fd = _fork(child, job)
            running[pid] = (index, phase, fd, [], time.monotonic())
            sleeps[pid] = Sleep()
            selector.register(fd, selectors.EVENT_READ, pid)
        for key, _ in selector.select(timeout=SAMPLE_EVERY):
            pid = key.data
            chunk = os.read(key.fd, 1 << 16)
            if chunk:
                running[pid][3].append(chunk)
                continue
            selector.unregister(key.fd)
            index, phase, fd, chunks, _ = running.pop(pid)
            os.close(fd)
            os.waitpid(pid, 0)
            done(index, phase, {**_decode(b"".join(chunks)), "asleep": sleeps.pop(pid).seconds})
        now = time.monotonic()
        for pid, (index, phase, fd, _, started) in list(running.items()):
            slept = sleeps[pid].update(sample(pid))
            # blocked (waiting forever on a socket, a lock, a sleep), or a loop in C code
            # (the wall-clock timeout: the last resort)
            if slept > BLOCKED_LIMIT or now - started > timeout:
                os.kill(pid, signal.SIGKILL)
                selector.unregister(fd)
                os.close(fd)
                os.waitpid(pid, 0)
                del running[pid]
                done(index, phase, {"outcomes": {}, "reports": {}, "timed_out": True,
                                      "asleep": sleeps.pop(pid).seconds})  # fmt: skip
    selector.close()


# Seconds a child's processes may sleep in all (see `asleep`): a mutant that makes its tests
# wait (a socket's timeout, a sleep, a lock) decides by the wall clock, so it is excluded
# early. The seven libraries of benchmarks/suites.py sleep at most 0.3 s in a run of their
# whole test suites (`sleeps`). A wait counts from the first sample after it began to the
# last before it ended, so one of w seconds measures between w - 2 * SAMPLE_EVERY and w:
# only waits of 4 to 4.5 s in all can land on either side of the limit, away from the usual
# timeouts (1, 2, 3, 5, 10, 30 s).
BLOCKED_LIMIT = 4.0
SAMPLE_EVERY = 0.25


class Sample(NamedTuple):
    """A process tree at one moment: each thread's (CPU ns, run-queue wait ns), and whether
    any is running, runnable or waiting on I/O."""

    wall: float
    threads: dict
    awake: bool


class Sleep:
    """A child's time asleep so far, from samples of its process tree."""

    def __init__(self):
        self.last, self.seconds = None, 0.0

    def update(self, now):
        if self.last is not None:
            self.seconds += asleep(self.last, now)
        self.last = now
        return self.seconds


def asleep(before, after):
    """Seconds between two samples of a process tree in which none of its threads can have
    run, waited for a CPU or waited on I/O: the interval less the CPU and run-queue time its
    threads gained (their sum bounds the time any was active), or 0 when a thread was awake
    at either end (runnable: its current wait shows in the counters only once it runs) or
    one started or ended. A process waiting for its own busy child is not asleep (the child
    is in the tree), and the load does not stretch time asleep: a sleep, a lock or a socket
    nobody writes to takes as long on a loaded machine as on an idle one."""
    if before.awake or after.awake or before.threads.keys() != after.threads.keys():
        return 0.0
    gained = sum(cpu + wait - before.threads[tid][0] - before.threads[tid][1]
                 for tid, (cpu, wait) in after.threads.items())  # fmt: skip
    return max(0.0, after.wall - before.wall - gained / 1e9)


def sample(root):
    """The process tree under `root` now, from /proc (the sandbox's own: only this run's
    processes). A wait in FUSE counts as I/O: the daemon answering it is outside the tree
    and slower on a loaded machine."""
    wall = time.monotonic()
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat(f"/proc/{entry}/stat")
            if fields:
                parents.setdefault(int(fields[1]), []).append(int(entry))
    tree, frontier = [], [root]
    while frontier:
        pid = frontier.pop()
        tree.append(pid)
        frontier += parents.get(pid, [])
    threads, awake = {}, False
    for pid in tree:
        for tid in _listdir(f"/proc/{pid}/task"):
            base = f"/proc/{pid}/task/{tid}/"
            counters, fields = _read(base + "schedstat").split()[:2], _stat(base + "stat")
            if len(counters) < 2 or not fields:
                continue  # it ended meanwhile: the thread set differs from the last sample's
            threads[int(tid)] = (int(counters[0]), int(counters[1]))
            awake = awake or fields[0] in "RD" or _in_fuse(_read(base + "wchan"))
    return Sample(wall, threads, awake)


def _in_fuse(wchan):
    """Whether a thread sleeps in a FUSE request (the kernel waits interruptibly, state S,
    in `request_wait_answer` until the daemon answers)."""
    return "fuse" in wchan or wchan == "request_wait_answer"


def _listdir(path):
    try:
        return os.listdir(path)
    except OSError:
        return []


def _read(path):
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def _stat(path):
    """The fields of a /proc stat file after the command's name: state, ppid, ..."""
    text = _read(path)
    return text[text.rfind(")") + 2 :].split() if text else None


# A candidate's children, in turn: the tests reaching its function on the mutant; its whole
# hidden set on the mutant, ordered as a task's (`task_order`); that set on the original.
PHASES = ("mutant", "whole", "original")


def first_failing(job, answer):
    """The tests that failed in the mutant's first run, in the set's order."""
    return [t for t in job["tests"] if answer["outcomes"].get(t) != "passed"]


def task_order(job, answer):
    """The hidden set as `Suite.validate()` runs the task's: the rest of the set, then the
    tests failing in the mutant's first run, each part in the set's order."""
    failing = first_failing(job, answer)
    return [t for t in job.get("confirm_tests", job["tests"]) if t not in failing] + failing


def phase_job(job, phase, answer):
    """The child's job in `phase`: which code (the mutant's or the original's), which ids in
    which order, and when it may stop (as soon as more tests fail than the task states)."""
    if phase == "mutant":
        return job
    order = task_order(job, answer)
    if phase == "whole":
        return {**job, "tests": order, "stop": len(first_failing(job, answer))}
    return {**job, "path": None, "tests": order, "stop": 0}  # the original passes entirely


def _exactly(whole, job, first):
    """Whether the whole set's run on the mutant failed exactly where its first run did."""
    if "outcomes" not in whole or whole.get("timed_out"):
        return False
    outcomes = whole["outcomes"]
    failing = [t for t in task_order(job, first) if outcomes.get(t) != "passed"]
    return failing == first_failing(job, first) and "timeout" not in outcomes.values()


def _confirm(spec, answer, tests):
    if "outcomes" not in answer or answer.get("timed_out"):
        return False
    outcomes = answer["outcomes"]
    if any(o == "timeout" for o in outcomes.values()):
        return False
    failing = sum(1 for t in tests if outcomes.get(t) != "passed")
    return 1 <= failing <= int(spec.get("confirm", 0))


def _fork(child, job):
    read, write = os.pipe()
    pid = os.fork()
    if pid:
        os.close(write)
        return pid, read
    os.close(read)
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 1)  # children run at once: their progress is noise
    os.dup2(quiet, 2)
    try:
        answer = child(job)
    except BaseException as error:  # noqa: BLE001 - reported, the parent decides
        answer = {"fallback": f"{type(error).__name__}: {error}"}
    view = memoryview(json.dumps(answer).encode())
    while view:
        view = view[os.write(write, view) :]
    os._exit(0)


def _decode(data):
    try:
        return json.loads(data)
    except ValueError:
        return {"fallback": "the child ended without an answer"}


def serve_mutant(job):
    """Import the job's module from the mutated text from now on (a finder ahead of the
    others; pytest's assertion rewriter, placed later, leaves non-test modules alone)."""
    from importlib.machinery import PathFinder, SourceFileLoader

    path = os.path.realpath(os.path.join(os.getcwd(), job["path"]))
    with open(path, encoding="utf-8") as f:
        original = f.read()
    mutated = original[: job["start"]] + job["replacement"] + original[job["end"] :]

    class Loader(SourceFileLoader):
        def get_code(self, fullname):
            return compile(mutated, self.path, "exec", dont_inherit=True)

        def get_source(self, fullname):
            return mutated

    class Finder:
        @staticmethod
        def find_spec(fullname, search=None, target=None):
            spec = PathFinder.find_spec(fullname, search)
            if spec is None or not spec.origin or os.path.realpath(spec.origin) != path:
                return None
            spec.loader = Loader(fullname, spec.origin)
            lines = mutated.splitlines(True)
            linecache.cache[spec.origin] = (len(mutated), None, lines, spec.origin)
            return spec

    sys.meta_path.insert(0, Finder)


class Live:
    """The project's modules (their text, compiled) and functions as the batch process holds
    them once the tests are collected, indexed by file before any child is forked: every
    child starts from that same state, so a child finds the functions to swap without walking
    the heap (a walk per child cost ~0.1 s of CPU and copied most of the heap's pages)."""

    def __init__(self, paths):
        wanted = {os.path.realpath(os.path.join(os.getcwd(), p)) for p in paths}
        self.modules, self.functions, self.texts = {}, {}, {}
        for module in list(sys.modules.values()):
            name = getattr(module, "__file__", None)
            if isinstance(name, str) and os.path.realpath(name) in wanted:
                self.modules.setdefault(os.path.realpath(name), module)
        for path, module in self.modules.items():
            with open(path, encoding="utf-8") as f:
                text = f.read()
            self.texts[path] = text, compile(text, module.__file__, "exec", dont_inherit=True)
        filenames = {m.__file__ for m in self.modules.values()}
        for obj in gc.get_objects():
            if type(obj) is types.FunctionType and obj.__code__.co_filename in filenames:
                self.functions.setdefault(obj.__code__.co_filename, []).append(obj)


def swap(job, live):
    """Make the live functions of the job's module run the mutated text, as importing the
    mutated module would have; None, or why that cannot be done exactly."""
    path = os.path.realpath(os.path.join(os.getcwd(), job["path"]))
    module = live.modules.get(path)
    if module is None:
        return "its module is not imported before the tests run"
    filename = module.__file__
    original, before = live.texts[path]
    mutated = original[: job["start"]] + job["replacement"] + original[job["end"] :]
    pairs = {}
    after = compile(mutated, filename, "exec", dont_inherit=True)
    if not _pair(before, after, pairs):
        return "the mutant changes the module's structure"
    swapped = set()
    for obj in live.functions.get(filename, ()):
        new = pairs.get(obj.__code__)
        if new is None:
            continue
        if new.co_freevars != obj.__code__.co_freevars:
            return "the mutant changes a closure's variables"
        obj.__code__ = new
        swapped.add(new.co_qualname.replace(".<locals>", ""))
    target = job["function"]
    if not any(target == name or target.startswith(name + ".") for name in swapped):
        return "no live function holds the mutated code"
    linecache.cache[filename] = (len(mutated), None, mutated.splitlines(True), filename)
    return None


def _pair(before, after, pairs):
    """Pair the code objects of two compilations of a module, position by position; False
    when their nesting differs (then a mutant cannot be swapped in)."""
    if before == after:
        return True
    if before.co_qualname != after.co_qualname:
        return False
    if pairs.setdefault(before, after) != after:
        return False  # two equal original codes, mutated differently: ambiguous
    inner = [[c for c in code.co_consts if isinstance(c, types.CodeType)]
             for code in (before, after)]  # fmt: skip
    if len(inner[0]) != len(inner[1]):
        return False
    return all(_pair(a, b, pairs) for a, b in zip(*inner, strict=True))


ADDR_NO_RANDOMIZE = 0x0040000  # <linux/personality.h>


def fixed_addresses():
    """Start again with address space randomization off, where the kernel lets us (as
    `setarch -R` does), so that what a report prints is the same in every run: before
    Python 3.12 `None`'s hash is its address, and a set holding `None` is printed in an order
    that ASLR changes from run to run (toolz's `test_outer_join`). Where the call is refused
    (some containers' seccomp profiles), the run goes on as it is."""
    import ctypes

    try:
        personality = ctypes.CDLL(None, use_errno=True).personality
    except (OSError, AttributeError):
        return
    current = personality(0xFFFFFFFF)  # query only
    if current == -1 or current & ADDR_NO_RANDOMIZE:
        return
    if personality(current | ADDR_NO_RANDOMIZE) == -1:
        return
    argv = getattr(sys, "orig_argv", None) or [sys.executable, *sys.argv]
    os.execv(sys.executable, argv)


def _by_repr(item):
    try:
        return (type(item).__name__, repr(item))
    except Exception:  # a repr that raises sorts by its type alone
        return (type(item).__name__, "")


def stable_set_order():
    """Print a set whose items do not sort in their reprs' order, the same in every run.
    Without it a set's order follows the items' hashes, and `None`'s hash (before
    Python 3.12) and every object's default hash are addresses: where randomization stays on
    (a container's seccomp refuses `personality`, as Docker's does), the first line of an
    assert's report, its "Extra items" lists and its full diff came out in a new order each
    run. reprlib (pytest's `saferepr`) and pprint (pytest's own copy too) fall back to the
    reprs where their items do not sort; `sorted_set_items` orders the "Extra items" lists."""
    import pprint
    import reprlib

    unsorted = getattr(reprlib, "_possibly_sorted", None)  # private: checked, never assumed
    if unsorted is not None:

        def possibly_sorted(x):
            if isinstance(x, (set, frozenset)):
                try:
                    return sorted(x)
                except Exception:
                    return sorted(x, key=_by_repr)
            return unsorted(x)

        reprlib._possibly_sorted = possibly_sorted
    try:
        from _pytest._io import pprint as pytest_pprint  # pytest >= 8 has its own copy
    except ImportError:
        pytest_pprint = None
    for module in (pprint, pytest_pprint):
        safe_key = getattr(module, "_safe_key", None)
        if isinstance(safe_key, type):
            module._safe_key = type("SafeKey", (safe_key,), {"__slots__": (), "__lt__": _lt})


def _lt(self, other):
    """pprint's `_safe_key.__lt__`, with the reprs where it would compare addresses."""
    try:
        return self.obj < other.obj
    except TypeError:
        return _by_repr(self.obj) < _by_repr(other.obj)


def sorted_set_items(lines):
    """An assert's explanation with each "Extra items in the left/right set:" list sorted
    (pytest lists them in the set's order): a list ends at a blank line or the next header."""
    out, items = [], None
    for line in lines:
        header = line.startswith(("Extra items in the ", "Full diff"))
        if items is not None and (header or not line.strip()):
            out.extend(sorted(items))
            items = None
        if items is not None:
            items.append(line)
            continue
        out.append(line)
        if line.startswith("Extra items in the ") and line.endswith(" set:"):
            items = []
    out.extend(sorted(items or ()))
    return out


if __name__ == "__main__":
    if sys.argv[1:2] in (["--spec"], ["--batch"]):  # runs whose reports a suite keeps
        fixed_addresses()
        stable_set_order()
    sys.exit(main(sys.argv[1:]))
