"""Deciding a task: its hidden tests, run inside the shadow at the branch's version.

`check(branch, task, with_visible)` is the loop's checker for suites in the folder format.
The command runs our own interpreter (the suite's projects need only pytest) with plugin
autoloading off and no bytecode written. Output shown to agents is normalized (durations and
memory addresses removed) so that seeded experiments reproduce bit for bit.
"""

from __future__ import annotations

import json
import os
import re
import sys
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


def parse(stdout: str) -> tuple[str | None, str, dict[str, int]]:
    """(visible output or None, hidden output, exit codes) from the driver's output."""
    codes: dict[str, int] = {}
    match = re.search(rf"^{re.escape(driver.RESULT)}(.*)$", stdout, re.M)
    if match:
        codes = json.loads(match[1])
        stdout = stdout[: match.start()]
    visible = None
    before, _, hidden = stdout.partition(driver.HIDDEN + "\n")
    if driver.VISIBLE in before:
        visible = before.split(driver.VISIBLE + "\n", 1)[1]
    return visible, hidden, codes


_NOISE = [(re.compile(r" in \d+(\.\d+)?s\b"), ""), (re.compile(r"0x[0-9a-f]{6,}"), "0x?")]


def normalize(output: str) -> str:
    for pattern, repl in _NOISE:
        output = pattern.sub(repl, output)
    return output


def make_checker(suite: Any, timeout: float = 60):
    """The checker the loop calls: (branch, task, with_visible) -> CheckResult."""

    def check(branch: Any, task: Any, with_visible: bool) -> CheckResult:
        argv = command(task, suite.pytest_ini, with_visible, suite.workspace_root)
        result = branch.run(argv, timeout=timeout, cwd=task.project, env=environment())
        return interpret(result, argv)

    return check


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
