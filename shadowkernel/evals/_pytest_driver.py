"""Run inside the shadow by the check: the visible tests (optionally), then the hidden tests.

Invoked as a script (not `-m`), so the run imports pytest (and coverage, when asked) and
nothing of shadowkernel: any interpreter with pytest can run it, the project's own venv
included. One process serves both test sets, which halves a check's cost (the interpreter
and pytest start once). Prints a marker before each set and a JSON line at the end; exits
with the hidden tests' exit code.

    python _pytest_driver.py INI HIDDEN [VISIBLE...]     a suite folder's tests (folders)
    python _pytest_driver.py --spec JSON                 test ids (mutation, SWE-bench tasks)

The spec is {"hidden": [ids], "visible": [ids], "options": [pytest args], "outcomes": bool,
"coverage": [include patterns] or null, "budgets": {id: CPU seconds} or null, "budget":
CPU seconds for tests the mapping does not name, "durations": bool}. With "outcomes" the
JSON line also carries each test's outcome ("passed", "failed", "error", "skipped",
"timeout", or "missing" when it was not found) and the report of each failure; with
"coverage" it carries, per measured file, the lines each test executed (`switch_context` per
test: lines run at import or collection time belong to the context ""); with "durations" the
CPU seconds each test took (setup to teardown).

A test's budget is CPU time of this process (`ITIMER_PROF`), not wall time: a test that
loops is stopped the same way on an idle machine and on a loaded one, so its outcome
("timeout") does not depend on the load. A loop inside C code that never returns to the
interpreter is not interrupted by it; the run's wall-clock limit stops that one.
"""

import json
import os
import signal
import sys
import time

VISIBLE = "@@shadowkernel-visible@@"
HIDDEN = "@@shadowkernel-hidden@@"
RESULT = "@@shadowkernel-result@@ "
REPORT_LIMIT = 3000  # characters kept of each failure's report


class BudgetExceeded(BaseException):
    """Raised in a test that used up its CPU budget (a BaseException: `except Exception` in
    the code under test does not swallow it)."""


def _over_budget(signum, frame):
    raise BudgetExceeded("the test used up its CPU-time budget")


class Recorder:
    """A pytest plugin: each test's outcome and failure report; switches coverage contexts;
    arms each test's CPU budget and measures its CPU time."""

    def __init__(self, coverage=None, budgets=None, budget=None):
        self.outcomes, self.reports, self.coverage = {}, {}, coverage
        self.budgets, self.budget = budgets or {}, budget
        self.durations, self._started = {}, {}
        if self.budgets or self.budget:
            signal.signal(signal.SIGPROF, _over_budget)

    def pytest_runtest_logreport(self, report):
        if report.failed and "BudgetExceeded" in report.longreprtext:
            self.outcomes[report.nodeid] = "timeout"
            self.reports.setdefault(report.nodeid, "the test used up its CPU-time budget")
        elif report.failed:
            kind = "failed" if report.when == "call" else "error"
            self.outcomes[report.nodeid] = kind
            self.reports.setdefault(report.nodeid, report.longreprtext[-REPORT_LIMIT:])
        elif report.skipped and report.nodeid not in self.outcomes:
            self.outcomes[report.nodeid] = "skipped"
        elif report.when == "call" and report.passed:
            self.outcomes.setdefault(report.nodeid, "passed")

    def pytest_collectreport(self, report):
        if report.failed:
            self.outcomes[report.nodeid or "<collection>"] = "error"
            self.reports[report.nodeid or "<collection>"] = report.longreprtext[-REPORT_LIMIT:]

    def pytest_runtest_setup(self, item):
        if self.coverage is not None:
            self.coverage.switch_context(item.nodeid)
        self._started[item.nodeid] = time.process_time()
        seconds = self.budgets.get(item.nodeid, self.budget)
        if seconds:
            signal.setitimer(signal.ITIMER_PROF, seconds)

    def pytest_runtest_teardown(self, item, nextitem):
        if self.coverage is not None and nextitem is None:
            self.coverage.switch_context("")

    def pytest_runtest_logfinish(self, nodeid, location):
        signal.setitimer(signal.ITIMER_PROF, 0)
        if nodeid in self._started:
            self.durations[nodeid] = time.process_time() - self._started.pop(nodeid)


def main(argv):
    if argv[:1] == ["--spec"]:
        return run_spec(json.loads(argv[1]))
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
    recorder = Recorder(coverage, spec.get("budgets"), spec.get("budget"))
    options = list(spec.get("options", []))
    result = {}
    if spec.get("visible"):
        print(VISIBLE, flush=True)
        result["visible"] = int(pytest.main([*options, *spec["visible"]], plugins=[recorder]))
        recorder.outcomes, recorder.reports = {}, {}  # the hidden set is judged on its own
    print(HIDDEN, flush=True)
    result["hidden"] = int(pytest.main([*options, *spec["hidden"]], plugins=[recorder]))
    if spec.get("outcomes"):
        missing = {t: "missing" for t in spec["hidden"] if "::" in t}  # a test id, not a file
        result["outcomes"] = {**missing, **recorder.outcomes}
        result["reports"] = recorder.reports
    if coverage is not None:
        result["coverage"] = coverage_lines(coverage)
    if spec.get("durations"):
        result["durations"] = recorder.durations
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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
