"""`Suite.validate()`: every task's hidden tests, run for real at its start and when solved.

One branch per task: its starting version is staged and the hidden tests run (a task is
only worth asking when they fail there), then the reference solution is staged on top and
they run again (they must pass). For tasks named by test id, "fails" means every
fail-to-pass test fails while every pass-to-pass test passes.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import pandas as pd

from ..agents.loop import CheckResult, stage_edit, stage_start
from .check import make_checker

COLUMNS = ("task", "fails_on_task", "passes_on_original", "failing_at_start", "error",
           "seconds")  # fmt: skip


def fails_as_stated(result: CheckResult, task: Any) -> bool:
    if result.error:
        return False
    if not task.by_test_ids:
        return not result.passed
    outcomes = result.outcomes
    return all(outcomes.get(t) != "passed" for t in task.fail_to_pass) and all(
        outcomes.get(t) in ("passed", "skipped") for t in task.pass_to_pass)  # fmt: skip


def failing(result: CheckResult) -> int:
    return sum(1 for o in result.outcomes.values() if o not in ("passed", "skipped"))


def validate_task(ws: Any, check: Any, task: Any) -> dict[str, Any]:
    began = time.perf_counter()
    branch = ws.branch(f"validate|{task.id}")
    try:
        stage_start(branch, task)
        at_start = check(branch, task, False)
        for edit in task.solution:
            stage_edit(branch, edit)
        solved = check(branch, task, False)
    except Exception as e:  # a task that cannot be staged is reported, not raised
        return {"task": task.id, "fails_on_task": False, "passes_on_original": False,
                "failing_at_start": None, "error": f"{type(e).__name__}: {e}",
                "seconds": time.perf_counter() - began}  # fmt: skip
    finally:
        branch.drop()
    return {"task": task.id, "fails_on_task": fails_as_stated(at_start, task),
            "passes_on_original": solved.passed and not solved.error,
            "failing_at_start": failing(at_start) if task.by_test_ids else None,
            "error": at_start.error or solved.error,
            "seconds": time.perf_counter() - began}  # fmt: skip


def validate(suite: Any, workspace: Any = None, timeout: float = 120) -> pd.DataFrame:
    with _workspace(suite, workspace) as ws:
        check = make_checker(suite, timeout)
        rows = [validate_task(ws, check, task) for task in suite]
    return pd.DataFrame(rows, columns=list(COLUMNS))


@contextlib.contextmanager
def _workspace(suite: Any, workspace: Any) -> Iterator[Any]:
    if workspace is not None:
        yield workspace
        return
    from ..workspace import Workspace

    with Workspace(suite.workspace_root, servers=(), state=None) as ws:  # throwaway branches
        yield ws
