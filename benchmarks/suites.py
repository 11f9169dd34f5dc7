"""Task suites from real libraries: reproducible, validated by construction, and enough of them.

    .venv/bin/python benchmarks/suites.py build [--tasks 1000] [--parallel 2] [--out DIR]
    .venv/bin/python benchmarks/suites.py build --scale 0.05      # a measured subset
    .venv/bin/python benchmarks/suites.py repro [--tasks 10]      # the same seed twice
    .venv/bin/python benchmarks/suites.py sleeps                  # the libraries' own sleeps
    .venv/bin/python benchmarks/suites.py experiment [--tasks 20] [--seeds 2] [--no-ray]

`build` is the one command that makes >= 1,000 mutation tasks from the seven libraries below,
each fetched from PyPI (`shadowkernel.evals.pypi`), unpacked under /tmp/shadowkernel-suites
and mutated with its own pytest suite (`import_time=False`), two libraries at a time; each
library's suite is written to DIR/<name>.json (`Suite.to_json()`). Every kept task is
validated while it is made (its hidden set, run as one set in the task's order, fails as
stated on the mutant and passes on the original), and `build` re-checks 5 tasks per library
(`--validate N`), evenly spaced through its suite, with `Suite.validate()` (a process of its
own at the task's start and with its solution); `Suite.from_json` reads a written one back.
With `--scale` each library's quota is scaled down and the time of the whole build is
extrapolated (baseline once, then the seconds per kept task, shared by the two lanes).
Besides wall time it reports CPU time: each test process's own (the driver reports it: the
sandboxed test processes are beyond what /usr/bin/time counts) plus this process's.
`repro` makes the more-itertools suite twice with the same seed and compares the JSON byte
for byte. `experiment` runs the SIMULATED agent over a six suite in this process and on a
local Ray cluster (its numbers show the machinery, not a model).

Measured here, 2026-12-02 (docs/suites.md, "1,000 tasks", has the tables): `build` as
committed made 1,044 tasks in 15 min 3 s on a quiet machine (load 0.9 -> 0.7; 1,310 s of
CPU, 1,235 of it in the test processes), 35 of 35 re-validated; the same build beside other
work (4.6 runnable on average, no idle time) took 22 min 40 s with 113 of 113 re-validated
(`--validate 20`), and gave the same suites but for four statements holding values from
os.urandom or an address's tail, which reports mask now.
`sleeps` runs each library's own tests once and reports how long they sleep (0.31 s at
most, load 7), against the limit (30 s then, 4 s now).
Prints a table, then one JSON object as the last line. Needs FUSE and
the libraries' test dependencies in this interpreter (pytest, coverage).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import math
import os
import resource
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import shadowkernel as sk  # noqa: E402
from shadowkernel.evals import pypi  # noqa: E402

ROOT = Path("/tmp/shadowkernel-suites")


@dataclass(frozen=True)
class Library:
    name: str
    version: str
    command: str  # its own tests, relative to the unpacked sdist
    quota: int  # tasks it contributes to a 1,000-task build
    per_function: int = 3  # tasks per function at most


# Small pure-Python libraries whose sdists carry their own pytest suites, which run in seconds.
# Without the functions that run at import time (left out: each is judged on the whole
# suite), at 3 tasks per function the candidates run out at boltons 649, toolz 203, parse 41,
# jmespath ~60 and inflection 6 (measured: 974 in all), so toolz gives 4 per function and
# more-itertools, slower under mutation (~4 s of CPU per kept task), makes up the rest.
LIBRARIES = (
    # its conftest.py predates pytest 8's hook signature (and only skips Python 2 files)
    Library("boltons", "24.1.0", "python -m pytest tests --noconftest", 700),
    Library("toolz", "1.0.0", "python -m pytest toolz/tests", 300, per_function=4),
    # less its prime sieves' tests: test_primes alone is most of the suite's 40 s of CPU
    Library("more-itertools", "11.2.1", "python -m pytest tests -k 'not PrimeFunctionTests'", 40),
    Library("parse", "1.20.2", "python -m pytest tests", 100),
    Library("jmespath", "1.0.1", "python -m pytest tests", 60),
    Library("six", "1.16.0", "python -m pytest test_six.py", 15),
    Library("inflection", "0.5.1", "python -m pytest test_inflection.py", 15),
)
MORE_ITERTOOLS = LIBRARIES[2]  # `repro` makes it twice


def unpacked(lib: Library) -> Path:
    folder = ROOT / f"{lib.name}-{lib.version}"
    shutil.rmtree(folder, ignore_errors=True)
    return pypi.unpack(lib.name, lib.version, folder)


def make(lib: Library, n: int, workers: int, seed: int = 0) -> tuple[sk.evals.Suite, float]:
    began = time.perf_counter()
    suite = sk.mutation_suite(unpacked(lib), lib.command, n=n, seed=seed,
                              per_function=lib.per_function,
                              max_candidates=6 * n + 20, workers=workers,
                              import_time=False)  # fmt: skip
    return suite, time.perf_counter() - began


def build(args: argparse.Namespace) -> dict:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    load, began = os.getloadavg(), time.perf_counter()
    chosen = args.libraries.split(",") if args.libraries else [lib.name for lib in LIBRARIES]
    libraries = [lib for lib in LIBRARIES if lib.name in chosen]
    # `parallel` libraries at once: one's baseline (a single process) overlaps another's
    # forked children; each library's suite is the same whatever runs beside it.
    with cf.ThreadPoolExecutor(args.parallel) as pool:
        rows = list(pool.map(lambda lib: build_one(lib, args, out), libraries))
    wall = time.perf_counter() - began
    kept = sum(r["kept"] for r in rows)
    per_task = wall / kept if kept else float("nan")
    projected = wall if args.scale >= 1 else projection(rows, args.parallel)
    print(f"built {kept} tasks from {len(rows)} libraries in {wall:.0f} s ({wall / 60:.1f} "
          f"min; {per_task:.2f} s per task), {args.parallel} libraries at a time x "
          f"{args.workers} workers; a {args.tasks}-task build: {projected / 60:.1f} min"
          f"{'' if args.scale >= 1 else ' (projected)'} (load {load[0]:.1f} -> "
          f"{os.getloadavg()[0]:.1f}, 2 cores)")  # fmt: skip
    tests_cpu = sum(r["cpu_seconds"] for r in rows)
    cpu = tests_cpu + cpu_seconds()
    print(f"CPU: {tests_cpu:.0f} s in the test processes (baselines, batches and their "
          f"children, single runs) + {cpu - tests_cpu:.0f} s in this one = {cpu:.0f} s; on 2 "
          f"idle cores at least half of it in wall time: {cpu / 2 / 60:.1f} min")  # fmt: skip
    return {"mode": "build", "scale": args.scale, "workers": args.workers,
            "parallel": args.parallel, "libraries": rows, "tasks": kept,
            "measured_seconds": wall, "projected_minutes": projected / 60,
            "cpu_seconds": cpu, "idle_two_core_minutes": cpu / 2 / 60,
            "load_before": list(load), "load_after": list(os.getloadavg())}  # fmt: skip


def cpu_seconds() -> float:
    """User + system CPU of this process (the test processes run sandboxed, beyond what
    RUSAGE_CHILDREN sees: each reports its own, `Suite.extra["seconds_cpu"]`)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def build_one(lib: Library, args: argparse.Namespace, out: Path) -> dict:
    """One library's suite, written to OUT/<name>.json, a sample re-validated for real."""
    quota = max(1, math.ceil(lib.quota * args.tasks / 1000 * args.scale))
    suite, seconds = make(lib, quota, args.workers)
    (out / f"{lib.name}.json").write_text(suite.to_json())
    sample, began = spread(suite, args.validate), time.perf_counter()
    table = sample.validate() if len(sample) else None
    validating = time.perf_counter() - began
    valid = int((table["fails_on_task"] & table["passes_on_original"]).sum()) if len(
        sample) else 0  # fmt: skip
    baseline = float(suite.extra["seconds_baseline"])
    kept = len(suite)
    row = {"library": f"{lib.name} {lib.version}", "quota": quota, "kept": kept,
           "tried": int(suite.extra["tried"]), "candidates": int(suite.extra["candidates"]),
           "seconds": round(seconds, 1), "baseline_seconds": round(baseline, 1),
           "batch_seconds": float(suite.extra["seconds_batches"]),
           "cpu_seconds": float(suite.extra["seconds_cpu"]),
           "single_seconds": float(suite.extra["seconds_single"]),
           "original_asleep_seconds": float(suite.extra["seconds_asleep"]),
           "seconds_per_task": round((seconds - baseline) / kept, 2) if kept else None,
           "validated": f"{valid}/{len(sample)}", "validate_seconds": round(validating, 1),
           "rejected": json.loads(suite.extra["rejected"]),
           "full_quota": math.ceil(lib.quota * args.tasks / 1000)}  # fmt: skip
    print(f"{lib.name:>16} {lib.version:<8} kept {kept:>4}/{quota:<4} of {row['tried']:>4} "
          f"tried in {seconds:7.1f} s (baseline {baseline:.1f} s, batches "
          f"{row['batch_seconds']:.0f} s, single runs {row['single_seconds']:.0f} s) "
          f"validated {valid}/{len(sample)} in {validating:.0f} s; CPU of its tests "
          f"{row['cpu_seconds']:.0f} s, load {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
    return row


def spread(suite: sk.evals.Suite, k: int) -> sk.evals.Suite:
    """`k` tasks evenly spaced through the suite (its first, and on to its last ones)."""
    n = len(suite)
    picked = sorted({i * n // k for i in range(k)})  # all of them when k >= n
    return suite.with_tasks([suite.tasks[i] for i in picked])


def projection(rows: list[dict], parallel: int) -> float:
    """Seconds of the full build from a scaled one: each library's baseline once, then its
    seconds per kept task times its full quota, the sum shared by `parallel` lanes."""
    total = sum(r["baseline_seconds"] + r["seconds_per_task"] * r["full_quota"]
                for r in rows if r["kept"])  # fmt: skip
    return total / parallel


def repro(args: argparse.Namespace) -> dict:
    lib = MORE_ITERTOOLS
    load = os.getloadavg()
    (first, a), (second, b) = (make(lib, args.tasks, args.workers) for _ in range(2))
    same = first.to_json() == second.to_json()
    print(f"{lib.name} {lib.version}, n={args.tasks}, seed 0, twice: {len(first)} tasks in "
          f"{a:.0f} s and {b:.0f} s; byte-identical JSON: {same} (load {load[0]:.1f} -> "
          f"{os.getloadavg()[0]:.1f})")  # fmt: skip
    return {"mode": "repro", "library": f"{lib.name} {lib.version}", "tasks": len(first),
            "identical": same, "seconds": [a, b], "bytes": len(first.to_json()),
            "load_before": list(load), "load_after": list(os.getloadavg())}  # fmt: skip


def sleeps(args: argparse.Namespace) -> dict:
    """Each library's whole test command run once (no mutant), its process tree sampled as
    a batch samples a child (`_pytest_driver.asleep`), but every 0.1 s (finer samples count
    more time asleep): how long the originals' own tests sleep, against `BLOCKED_LIMIT`."""
    import shlex
    import subprocess

    from shadowkernel.evals import _pytest_driver as driver

    load, rows = os.getloadavg(), []
    for lib in LIBRARIES:
        argv = [sys.executable if w == "python" else w for w in shlex.split(lib.command)]
        began, watch = time.perf_counter(), driver.Sleep()
        child = subprocess.Popen(argv, cwd=unpacked(lib), stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)  # fmt: skip
        while child.poll() is None:
            watch.update(driver.sample(child.pid))
            time.sleep(0.1)  # the sampling period (the process ends the loop)
        rows.append({"library": f"{lib.name} {lib.version}", "exit": child.returncode,
                     "seconds": round(time.perf_counter() - began, 1),
                     "asleep": round(watch.seconds, 2)})  # fmt: skip
        print(f"{lib.name:>16} {lib.version:<8} its tests asleep {watch.seconds:6.2f} s of "
              f"{rows[-1]['seconds']:6.1f} s wall (exit {child.returncode}); the limit: "
              f"{driver.BLOCKED_LIMIT:.0f} s, load {os.getloadavg()[0]:.1f}")  # fmt: skip
    return {"mode": "sleeps", "libraries": rows, "limit": driver.BLOCKED_LIMIT,
            "load_before": list(load), "load_after": list(os.getloadavg())}  # fmt: skip


def experiment(args: argparse.Namespace) -> dict:
    suite, seconds = make(Library("six", "1.16.0", "python -m pytest test_six.py", 0),
                          args.tasks, args.workers)  # fmt: skip
    agent = sk.SimulatedAgent(suite, seed=0)
    conditions = ["none", "new-lints"]
    began = time.perf_counter()
    df = sk.experiment(agent, suite, conditions, seeds=args.seeds, budget=3, progress=False)
    local = time.perf_counter() - began
    figures = {"mode": "experiment", "generation_seconds": seconds, "cells": len(df),
               "experiment_local_seconds": local,
               "solved_share": float(df["solved"].mean())}  # fmt: skip
    print(f"six suite: {len(suite)} tasks in {seconds:.1f} s; {len(df)} cells (SIMULATED "
          f"agent) in {local:.1f} s in process")  # fmt: skip
    if not args.no_ray:
        import ray

        began = time.perf_counter()
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        try:
            start = time.perf_counter() - began
            began = time.perf_counter()
            df_ray = sk.experiment(agent, suite, conditions, seeds=args.seeds, budget=3,
                                   workers="local", n_workers=2, progress=False)  # fmt: skip
            remote = time.perf_counter() - began
        finally:
            ray.shutdown()
        same = sk.evals.reproducible(df_ray).equals(sk.evals.reproducible(df))
        figures.update(ray_start_seconds=start, experiment_ray_seconds=remote, same_frame=same)
        print(f"  on Ray (2 workers): {remote:.1f} s (+{start:.1f} s start), same frame: {same}")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="mode", required=True)
    b = sub.add_parser("build", help=">= 1,000 validated tasks from the libraries")
    b.add_argument("--tasks", type=int, default=1000)
    b.add_argument("--scale", type=float, default=1.0, help="share of each quota to make")
    b.add_argument("--validate", type=int, default=5,
                   help="tasks re-validated per library (evenly spaced)")  # fmt: skip
    b.add_argument("--out", default=str(ROOT / "built"))
    b.add_argument("--libraries", default="", help="comma-separated names (default: all)")
    b.add_argument("--parallel", type=int, default=2, help="libraries built at once")
    r = sub.add_parser("repro", help="the same seed twice, compared byte for byte")
    r.add_argument("--tasks", type=int, default=10)
    sub.add_parser("sleeps", help="how long each library's own tests sleep")
    e = sub.add_parser("experiment", help="the SIMULATED agent over a six suite")
    e.add_argument("--tasks", type=int, default=20)
    e.add_argument("--seeds", type=int, default=2)
    e.add_argument("--no-ray", action="store_true")
    for p, workers in ((b, 1), (r, 2), (e, 2)):
        p.add_argument("--workers", type=int, default=workers, help="children at once")
    args = parser.parse_args()
    modes = {"build": build, "repro": repro, "sleeps": sleeps, "experiment": experiment}
    figures = modes[args.mode](args)
    print(json.dumps(figures, sort_keys=True))


if __name__ == "__main__":
    main()
