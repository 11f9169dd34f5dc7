"""Task suites: how fast a mutation suite is made, how many mutants are kept, and what a
20-task x 2-condition x 2-seed experiment over it costs in this process and on Ray.

    .venv/bin/python benchmarks/suites.py [--tasks 20] [--seeds 2] [--no-ray]

The project is six 1.16.0 from the sdist .ci/setup fetches (200 tests, under a second), unpacked
under /tmp/shadowkernel-bench-suites. The agent is the SIMULATED one (its numbers are not a
model's; here only the wall time matters). The Ray run starts a local cluster (2 CPUs) and
gives each of its 2 workers its own Workspace; its time includes the cluster's start, which
is also reported alone. Prints a table, then one JSON object as the last line. Needs root and
FUSE; the machine's load is printed with the figures (they are noisy on a shared machine).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tarfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import shadowkernel as sk  # noqa: E402

SDIST = Path(__file__).resolve().parent.parent / ".venv/sdists/six-1.16.0.tar.gz"
ROOT = Path("/tmp/shadowkernel-bench-suites")
CONDITIONS = ["none", "new-lints"]


def unpack() -> Path:
    shutil.rmtree(ROOT, ignore_errors=True)
    ROOT.mkdir(parents=True)
    with tarfile.open(SDIST) as archive:
        archive.extractall(ROOT, filter="data")
    return ROOT / "six-1.16.0"


def generate(project: Path, n: int, per_function: int) -> tuple[sk.evals.Suite, dict]:
    began = time.perf_counter()
    suite = sk.mutation_suite(project, "python -m pytest test_six.py", n=n, seed=0,
                              per_function=per_function)  # fmt: skip
    seconds = time.perf_counter() - began
    tried, kept = int(suite.extra["tried"]), int(suite.extra["kept"])
    return suite, {
        "generation_seconds": seconds,
        "baseline_seconds": float(suite.extra["seconds_baseline"]),
        "candidates_tried": tried,
        "kept": kept,
        "kept_share": kept / tried,
        "tasks_per_minute": kept / seconds * 60,
        "seconds_per_candidate": (seconds - float(suite.extra["seconds_baseline"])) / tried,
        "rejected": json.loads(suite.extra["rejected"]),
    }


def experiment(suite, seeds: int, workers: str | None) -> tuple[float, object]:
    agent = sk.SimulatedAgent(suite, seed=0)
    began = time.perf_counter()
    df = sk.experiment(agent, suite, CONDITIONS, seeds=seeds, budget=3, workers=workers,
                       n_workers=2, progress=False)  # fmt: skip
    return time.perf_counter() - began, df


def ray_cluster() -> tuple[float, str]:
    import ray

    began = time.perf_counter()
    context = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    return time.perf_counter() - began, context.address_info["address"]


def on_ray(suite, seeds: int, df, local: float) -> dict:
    import ray

    try:
        start, address = ray_cluster()
    except Exception as e:  # a 2-core machine under load from other suites: say so
        ray.shutdown()
        return {"ray_error": f"{type(e).__name__}: {e}"}
    try:
        remote, df_ray = experiment(suite, seeds, address)
    finally:
        ray.shutdown()
    same = sk.evals.reproducible(df_ray).equals(sk.evals.reproducible(df))
    return {"ray_start_seconds": start, "experiment_ray_seconds": remote,
            "ray_over_local": remote / local, "ray_same_frame": same}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--per-function", type=int, default=3,
                        help="tasks per function at most")  # fmt: skip
    parser.add_argument("--no-ray", action="store_true")
    args = parser.parse_args()
    load = os.getloadavg()
    suite, figures = generate(unpack(), args.tasks, args.per_function)
    local, df = experiment(suite, args.seeds, None)
    figures.update(cells=len(df), experiment_local_seconds=local,
                   solved_share=float(df["solved"].mean()))  # fmt: skip
    if not args.no_ray:
        figures.update(on_ray(suite, args.seeds, df, local))
    figures["load_before"] = list(load)
    figures["load_after"] = list(os.getloadavg())
    print(f"mutation suite of six 1.16.0: {figures['kept']} tasks kept of "
          f"{figures['candidates_tried']} tried ({figures['kept_share']:.0%}) in "
          f"{figures['generation_seconds']:.1f} s -> {figures['tasks_per_minute']:.1f} tasks/min "
          f"(baseline coverage run {figures['baseline_seconds']:.1f} s, "
          f"{figures['seconds_per_candidate']:.2f} s per candidate)")  # fmt: skip
    print(f"experiment {len(suite)} tasks x {len(CONDITIONS)} conditions x {args.seeds} seeds "
          f"({figures['cells']} cells), SIMULATED agent: local {local:.1f} s")  # fmt: skip
    if "experiment_ray_seconds" in figures:
        print(f"  on a local Ray cluster (2 workers): {figures['experiment_ray_seconds']:.1f} s "
              f"(+{figures['ray_start_seconds']:.1f} s cluster start), ratio "
              f"{figures['ray_over_local']:.2f}, same frame: "
              f"{figures['ray_same_frame']}")  # fmt: skip
    elif "ray_error" in figures:
        print(f"  Ray: {figures['ray_error']}")
    print(f"load average before/after: {load[0]:.1f} / {figures['load_after'][0]:.1f} (2 cores)")
    print(json.dumps(figures, sort_keys=True))


if __name__ == "__main__":
    main()
