"""Runs beside runs and lints, and cancellation, on a real project (issue 20's run targets).

    .venv/bin/python benchmarks/concurrency.py [--project more-itertools==11.2.1] [--repeat 5]

The project is a real library's sdist from PyPI (`evals/pypi.py`, cached), unpacked fresh into a
temporary folder; every branch stages a real edit of it. One workspace with ruff, all sides
measured in this one run, alternating where they compare:

- three `sleep 2` runs on three branches at once: wall time from asking to the last answer,
  with `max_runs=3`, with the default limit (one per core: the third run queues), and through
  the shared FUSE mount (`mode="fuse"`: such a run holds the lane, as every run did before);
- a ruff lint of `recipes.py` on a fourth branch (a fresh edit before each, so each is a real
  lint), p50 while idle and while a run of another branch is going (`sleep`, then a run that
  keeps a core busy), alternating idle and busy rounds;
- cancellation: from `cancel.set()` until every process of the run (found in /proc by a
  marker, the sandbox's own processes included) is gone; for a queued run, until the caller
  has its answer; and `ws.close()` with a run going, until its processes are gone.

Prints a table, then one JSON object as the last line. Needs root, FUSE and bwrap.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import shadowkernel as sk  # noqa: E402
from shadowkernel.evals.pypi import unpack  # noqa: E402

TARGETS = {"three_runs_s": 2.6, "lint_during_run_ratio": 1.2, "cancel_s": 1.0}
RUN_SECONDS = 2
LINTED = "more_itertools/recipes.py"


def spawn(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Future[Any]:
    pool = ThreadPoolExecutor(1)
    future = pool.submit(call, *args, **kwargs)
    pool.shutdown(wait=False)
    return future


def edited(ws: sk.Workspace, name: str) -> sk.Branch:
    """A branch with a real edit of the project (so its run gets a view of its own)."""
    branch = ws.branch(name)
    branch.replace("more_itertools/more.py", "import math\n", f"import math  # {name}\n")
    return branch


def three_runs(ws: sk.Workspace, tag: str, **options: Any) -> float:
    """Seconds from asking three branches for a `sleep 2` run each to the last answer."""
    branches = [edited(ws, f"{tag}-{i}") for i in range(3)]
    began = time.perf_counter()
    runs = [spawn(b.run, f"sleep {RUN_SECONDS}", network=True, **options) for b in branches]
    results = [r.result() for r in runs]
    took = time.perf_counter() - began
    assert all(r.ok for r in results), [r.stderr for r in results]
    return took


def lint_seconds(branch: sk.Branch, i: int) -> float:
    """One real lint: a fresh edit (an unused import), then its answer, which must hold it."""
    branch.replace(LINTED, "import random\n", f"import random\nimport os as unused_{i}\n")
    began = time.perf_counter()
    table = branch.lint(paths=[LINTED])
    took = time.perf_counter() - began
    assert "F401" in set(table["code"]), table[["code", "message", "line"]].to_string()
    branch.replace(LINTED, f"import random\nimport os as unused_{i}\n", "import random\n")
    return took


def lints_beside_runs(ws: sk.Workspace, repeat: int) -> dict[str, float]:
    """p50 of lints idle and during another branch's run (sleeping, then busy), alternating."""
    linted, runner = ws.branch("linted"), edited(ws, "runner")
    programs = {"sleep": "sleep 600", "busy": "bash -c 'while :; do :; done'"}
    times: dict[str, list[float]] = {"idle": [], "sleep": [], "busy": []}
    lint_seconds(linted, 999)  # the servers' first answer is not what is compared
    for round_ in range(repeat):
        for side in times:
            run, cancel = None, threading.Event()
            if side != "idle":
                marker = f"skbench-{uuid.uuid4().hex[:10]}"
                run = spawn(runner.run, f"exec -a {marker} {programs[side]}", network=True,
                            timeout=600, cancel=cancel)  # fmt: skip
                while not any(_argv0(pid).startswith(marker) for pid in tree(marker)):
                    if run.done():
                        raise AssertionError(f"the run ended early: {run.result()}")
                    time.sleep(0.002)
            times[side] += [lint_seconds(linted, round_ * 10 + k) for k in range(3)]
            if run is not None:
                cancel.set()
                run.result()
    return {side: statistics.median(values) for side, values in times.items()}


def tree(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline and b"concurrency.py" not in cmdline:
                found.append(int(entry))
    return found


def sleepers(marker: str) -> str:
    return (f"bash -c 'exec -a {marker}-x sleep 1000' & bash -c 'exec -a {marker}-y sleep 1000' "
            "& wait")  # fmt: skip


def wait_running(marker: str) -> list[int]:
    """The run's processes once both sleepers run."""
    while sum(1 for pid in tree(marker) if _argv0(pid).startswith(marker)) < 2:
        time.sleep(0.002)
    return tree(marker)


def _argv0(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
    except OSError:
        return ""


def gone_after(pids: list[int], marker: str, began: float) -> float:
    """Seconds from `began` until none of `pids` is a live process of the run."""
    while any(marker.encode() in _cmdline(pid) for pid in pids):
        time.sleep(0.001)
    return time.perf_counter() - began


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def cancel_running(ws: sk.Workspace, repeat: int) -> list[float]:
    branch, times = edited(ws, "cancelled"), []
    for _ in range(repeat):
        marker, cancel = f"skbench-{uuid.uuid4().hex[:10]}", threading.Event()
        run = spawn(branch.run, sleepers(marker), network=True, timeout=600, cancel=cancel)
        pids = wait_running(marker)
        began = time.perf_counter()
        cancel.set()
        times.append(gone_after(pids, marker, began))
        assert run.result().cancelled
    return times


def cancel_queued(project: Path, repeat: int) -> list[float]:
    """A run queued behind another (max_runs=1): from cancel.set() to the caller's answer."""
    times = []
    with sk.Workspace(project, servers=["ruff"], max_runs=1) as ws:
        holder, queued = edited(ws, "holder"), edited(ws, "queued")
        for _ in range(repeat):
            stop, cancel = threading.Event(), threading.Event()
            held = spawn(holder.run, "sleep 600", network=True, cancel=stop)
            run = spawn(queued.run, "echo never", network=True, cancel=cancel)
            while len(ws.run_queue) < 2:
                time.sleep(0.002)
            began = time.perf_counter()
            cancel.set()
            result = run.result()
            times.append(time.perf_counter() - began)
            assert result.cancelled and not result.stdout
            stop.set()
            held.result()
    return times


def close_with_a_run(project: Path) -> float:
    ws = sk.Workspace(project, servers=["ruff"])
    marker = f"skbench-{uuid.uuid4().hex[:10]}"
    run = spawn(edited(ws, "closed").run, sleepers(marker), network=True, timeout=600)
    pids = wait_running(marker)
    began = time.perf_counter()
    ws.close()
    took = gone_after(pids, marker, began)
    assert isinstance(run.exception(), sk.errors.ClosedError)
    return took


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--project", default="more-itertools==11.2.1")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    name, version = args.project.split("==")
    report: dict[str, Any] = {"project": args.project, "cores": len(os.sched_getaffinity(0)),
                              "load_start": os.getloadavg()[0], "targets": TARGETS}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="sk-bench-concurrency-") as tmp:
        project = unpack(name, version, Path(tmp))
        with sk.Workspace(project, servers=["ruff"], max_runs=3) as ws:
            edited(ws, "warm").run("true", network=True)  # the sandbox's first start
            report["one_run_s"] = statistics.median(three_runs_single(ws, args.repeat))
            report["three_runs_s"] = statistics.median(
                three_runs(ws, f"three{i}") for i in range(args.repeat))  # fmt: skip
            report["three_runs_fuse_s"] = three_runs(ws, "fuse", mode="fuse")
            lints = lints_beside_runs(ws, args.repeat)
            report["cancel_running_s"] = cancel_running(ws, args.repeat * 2)
        with sk.Workspace(project, servers=["ruff"]) as ws:
            report["max_runs_default"] = ws.max_runs
            report["three_runs_default_s"] = three_runs(ws, "default")
        report["cancel_queued_s"] = cancel_queued(project, args.repeat)
        report["close_s"] = close_with_a_run(project)
    report["lint_idle_ms"] = round(lints["idle"] * 1000, 1)
    report["lint_during_sleep_run_ms"] = round(lints["sleep"] * 1000, 1)
    report["lint_during_busy_run_ms"] = round(lints["busy"] * 1000, 1)
    report["lint_during_run_ratio"] = round(lints["sleep"] / lints["idle"], 3)
    report["lint_during_busy_run_ratio"] = round(lints["busy"] / lints["idle"], 3)
    report["cancel_s"] = max(*report["cancel_running_s"], *report["cancel_queued_s"],
                             report["close_s"])  # fmt: skip
    report["load_end"] = os.getloadavg()[0]
    print_table(report)
    print(json.dumps(report, sort_keys=True))


def three_runs_single(ws: sk.Workspace, repeat: int) -> list[float]:
    """One `sleep 2` run alone, end to end: the floor the three concurrent runs compare with."""
    branch, times = edited(ws, "alone"), []
    for _ in range(repeat):
        began = time.perf_counter()
        assert branch.run(f"sleep {RUN_SECONDS}", network=True).ok
        times.append(time.perf_counter() - began)
    return times


def print_table(r: dict[str, Any]) -> None:
    t = r["targets"]
    print(f"{r['project']}, {r['cores']} cores, load {r['load_start']:.2f} -> {r['load_end']:.2f}")
    print(f"\n{'case':<58}{'measured':>12}{'target':>12}")
    rows = [
        ("one `sleep 2` run alone, end to end (s)", r["one_run_s"], ""),
        ("three `sleep 2` runs, three branches, max_runs=3 (s)", r["three_runs_s"],
         f"<= {t['three_runs_s']}"),
        (f"  the same, default max_runs={r['max_runs_default']} (s)", r["three_runs_default_s"],
         ""),
        ("  the same through the shared mount, mode='fuse' (s)", r["three_runs_fuse_s"], ""),
        ("ruff lint of recipes.py, idle, p50 (ms)", r["lint_idle_ms"], ""),
        ("  during another branch's `sleep` run, p50 (ms)", r["lint_during_sleep_run_ms"],
         f"<= {t['lint_during_run_ratio']}x"),
        ("  ratio", r["lint_during_run_ratio"], f"<= {t['lint_during_run_ratio']}"),
        ("  during a run keeping a core busy, p50 (ms)", r["lint_during_busy_run_ms"], ""),
        ("  ratio", r["lint_during_busy_run_ratio"], ""),
        ("cancel a running run: its processes gone, max (s)", max(r["cancel_running_s"]),
         f"<= {t['cancel_s']}"),
        ("cancel a queued run: the caller answered, max (s)", max(r["cancel_queued_s"]),
         f"<= {t['cancel_s']}"),
        ("ws.close() with a run going: its processes gone (s)", r["close_s"],
         f"<= {t['cancel_s']}"),
    ]  # fmt: skip
    for label, value, target in rows:
        print(f"{label:<58}{value:>12.3f}{target:>12}")
    print()


if __name__ == "__main__":
    # Branches are durable by default: keep this run's (and its servers') out of the user's
    # state home, where the temporary copies' folders would be left behind.
    with tempfile.TemporaryDirectory(prefix="sk-bench-state-") as state_home:
        os.environ["XDG_STATE_HOME"] = state_home
        main()
