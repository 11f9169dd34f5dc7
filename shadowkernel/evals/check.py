"""Deciding a task: its hidden tests, run inside the shadow at the branch's version.

`check(branch, task, with_visible)` is the loop's checker. For a suite folder's task the
command runs our own interpreter (the suite's projects need only pytest) on the hidden
folder. For a task that names its tests by id (mutation and SWE-bench suites) it runs the
project's `Environment` (its interpreter, its setup command) on `fail_to_pass` and
`pass_to_pass`, and the task is solved when every one of them passes; a task with a
`test_patch` is graded in a throwaway branch holding the agent's files plus that patch, so
the agent's own branch never shows the graded tests. Plugin autoloading is off unless the
environment asks for it, and no bytecode is written. Output shown to agents is normalized
(durations and memory addresses removed) so that seeded experiments reproduce bit for bit.
A suite's `budgets` (CPU seconds per test id, derived by `mutation_suite` from the original's
own durations) stop a looping test by its CPU time, so the outcome does not depend on the
machine's load; the run's wall-clock `timeout` remains the last resort.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..agents.loop import CheckResult
from ..agents.observation import RunShown, tail
from . import _pytest_driver as driver

DRIVER = str(Path(driver.__file__).resolve())
EXIT_MEANINGS = {2: "interrupted (collection errors?)", 3: "pytest internal error",
                 4: "pytest usage error", 5: "no tests collected"}  # fmt: skip


def environment() -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/root"),
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        "PYTHONHASHSEED": "0",
    }


def command(task: Any, ini: str | None, with_visible: bool, project_root: str) -> list[str]:
    visible: list[str] = []
    if with_visible:
        if os.path.isdir(os.path.join(project_root, task.project, "tests")):
            visible.append("tests")
        if task.repro:
            visible.append(task.repro)
    return [sys.executable, DRIVER, ini or "-", task.hidden, *visible]


def visible_command(argv: list[str]) -> str:
    shown = [Path(a).name + "/" if os.path.isabs(a) else a for a in argv[4:]]
    return "pytest -q " + " ".join(shown)


def parse(stdout: str) -> tuple[str | None, str, dict[str, Any]]:
    """(visible output or None, hidden output, exit codes) from the driver's output."""
    codes: dict[str, Any] = {}
    match = re.search(rf"^{re.escape(driver.RESULT)}(.*)$", stdout, re.M)
    if match:
        codes = json.loads(match[1])
        stdout = stdout[: match.start()]
    visible = None
    before, _, hidden = stdout.partition(driver.HIDDEN + "\n")
    if driver.VISIBLE in before:
        visible = before.split(driver.VISIBLE + "\n", 1)[1]
    return visible, hidden, codes


# Durations, and memory addresses: whole ones, and what is left of one where pytest's
# `saferepr` cuts a long repr in the middle ("<test_itert...fda256ba690>": the head may keep
# "0x7f" before the "...", the tail the address's last digits before the ">"), or unittest's
# diff does ("<tests.test_more.ZipBroadcastTe[49 chars]90>").
_NOISE = [(re.compile(r" in \d+(\.\d+)?s\b"), ""), (re.compile(r"0x[0-9a-f]{6,}"), "0x?"),
          (re.compile(r"\b0x[0-9a-f]*(?=\.\.\.|\[\d+ chars\])"), "0x?"),
          (re.compile(r"(?<=\.\.\.)x?[0-9a-f]+(?=>)"), "?"),
          (re.compile(r"(?<=chars\])x?[0-9a-f]+(?=>)"), "?"),
          # values drawn from os.urandom or the clock: boltons' `uuid4()` and its GUIDs
          (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"),
           "<uuid>"),
          (re.compile(r"\b[0-9a-f]{24,}\b"), "<hex>")]  # fmt: skip


def normalize(output: str, patterns: list[tuple[re.Pattern[str], str]] = _NOISE) -> str:
    """`output` without what differs from run to run: durations, addresses, random UUIDs
    and long hex strings (a hash shows as `<hex>` too) by default."""
    for pattern, repl in patterns:
        output = pattern.sub(repl, output)
    return output


def make_checker(suite: Any, timeout: float = 60):
    """The checker the loop calls: (branch, task, with_visible) -> CheckResult."""

    def check(branch: Any, task: Any, with_visible: bool) -> CheckResult:
        if task.by_test_ids:
            return check_ids(branch, task, suite.environments.get(task.project), with_visible,
                             timeout, getattr(suite, "budgets", None))  # fmt: skip
        argv = command(task, suite.pytest_ini, with_visible, suite.workspace_root)
        result = branch.run(argv, timeout=timeout, cwd=task.project, env=environment())
        return interpret(result, argv)

    return check


# -- tasks whose tests are named by id ------------------------------------------------------------

_GRADES = itertools.count(1)


def spec_argv(env: Any, hidden: list[str], visible: list[str], coverage: list[str] | None = None,
              budgets: Mapping[str, float] | None = None, durations: bool = False,
              stop: int | None = None) -> list[str]:  # fmt: skip
    """The driver's command for test ids in the project's Environment (a shell line when it
    has a setup command). `budgets`: CPU seconds per test id (those run and named)."""
    spec: dict[str, Any] = {"hidden": hidden, "visible": visible,
                            "options": list(env.options), "outcomes": True,
                            "coverage": coverage, "durations": durations}  # fmt: skip
    if stop is not None:
        spec["stop"] = stop
    if budgets:
        spec["budgets"] = {t: budgets[t] for t in dict.fromkeys([*visible, *hidden])
                           if t in budgets}  # fmt: skip
    return _in_setup(env, [env.python, DRIVER, "--spec", json.dumps(spec)])


def batch_argv(env: Any, spec_file: str) -> list[str]:
    """The driver's command judging a batch of mutants (`_pytest_driver.run_batch`)."""
    return _in_setup(env, [env.python, DRIVER, "--batch", spec_file])


def _in_setup(env: Any, argv: list[str]) -> list[str]:
    if env.setup:
        return ["/bin/sh", "-c", f"{env.setup} && exec {shlex.join(argv)}"]
    return argv


def variables(env: Any) -> dict[str, str]:
    """The environment variables of a run in the project's Environment."""
    values = environment()
    if env.autoload:
        del values["PYTEST_DISABLE_PLUGIN_AUTOLOAD"]
    values.update(dict(env.env))
    return values


def run_ids(branch: Any, task: Any, env: Any, hidden: list[str], visible: list[str],
            timeout: float, budgets: Mapping[str, float] | None = None) -> Any:  # fmt: skip
    """Run test ids in `branch` (or, with a test patch, in a grading branch made from it)."""
    argv = spec_argv(env, hidden, visible, budgets=budgets)
    options = {"timeout": timeout, "cwd": task.project or ".", "env": variables(env)}
    if not task.test_patch:
        return branch.run(argv, **options)
    grade = branch.workspace.branch(f"{branch.name}|grade-{next(_GRADES)}")
    try:
        for path, data in sorted(branch.files.items()):
            if data is None:
                grade.delete(path)
            else:
                grade.write(path, data.decode("utf-8"))
        grade.apply_patch(task.test_patch)
        return grade.run(argv, **options)
    finally:
        grade.drop()


def hidden_order(pass_to_pass: Sequence[str], fail_to_pass: Sequence[str]) -> list[str]:
    """The order every check runs a task's hidden tests in (and generation judges them in):
    the tests that must go on passing first, so what a failing test leaves behind (jmespath's
    parser cache, filled by a racing thread under a mutant) cannot change their outcome."""
    return [*pass_to_pass, *fail_to_pass]


def check_ids(branch: Any, task: Any, env: Any, with_visible: bool, timeout: float,
              budgets: Mapping[str, float] | None = None) -> CheckResult:  # fmt: skip
    if env is None:
        return CheckResult(False, None, error=f"the suite has no environment for project "
                           f"{task.project!r} (Suite.environments)")  # fmt: skip
    hidden = hidden_order(task.pass_to_pass, task.fail_to_pass)
    visible = list(task.visible_tests) if with_visible else []
    result = run_ids(branch, task, env, hidden, visible, timeout, budgets)
    return interpret_ids(result, task, visible)


def solved(outcomes: dict[str, str], task: Any) -> bool:
    """Every fail-to-pass test passed; every pass-to-pass test passed or was skipped."""
    return all(outcomes.get(t) == "passed" for t in task.fail_to_pass) and all(
        outcomes.get(t) in ("passed", "skipped") for t in task.pass_to_pass)  # fmt: skip


def interpret_ids(result: Any, task: Any, visible: list[str]) -> CheckResult:
    shown_output, hidden, data = parse(result.stdout)
    outcomes = data.get("outcomes", {}) if isinstance(data, dict) else {}
    error = None
    if result.timed_out:
        error = "the hidden tests timed out"
    elif "hidden" not in data:
        error = f"the check did not finish (exit {result.exit_code}): {tail(result.stderr, 500)}"
    shown = None
    if visible and shown_output is not None:
        command = "pytest -q " + " ".join(visible)
        shown = RunShown(command, data.get("visible"), tail(normalize(shown_output)))
    return CheckResult(error is None and solved(outcomes, task), data.get("hidden"), shown,
                       tail(normalize(hidden)), error, result.duration,
                       outcomes=dict(outcomes), reports=dict(data.get("reports", {})))  # fmt: skip


def interpret(result: Any, argv: list[str]) -> CheckResult:
    visible, hidden, codes = parse(result.stdout)
    code = codes.get("hidden", result.exit_code)
    error = None
    if result.timed_out:
        error = "the hidden tests timed out"
    elif "hidden" not in codes:
        error = f"the check did not finish (exit {result.exit_code}): {tail(result.stderr, 500)}"
    elif code in (3, 4, 5):
        error = f"hidden tests: {EXIT_MEANINGS[code]}"
    shown = None
    if visible is not None:
        out = normalize(visible + (result.stderr if "visible" not in codes else ""))
        shown = RunShown(visible_command(argv), codes.get("visible"), tail(out))
    return CheckResult(code == 0 and error is None, code, shown,
                       tail(normalize(hidden)), error, result.duration)  # fmt: skip
