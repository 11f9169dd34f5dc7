"""What starting an overlay process costs: a fork of the zygote against a process of its own.

Every lane is a shadow served by an overlay process, and a workspace of ruff lanes opens more
of them under load, while its agents wait for answers. Each start here is a real `Shadow` of
a real project (the library of `worktrees.py`, more-itertools by default), mounted and ready
to serve: `fork` as shadowkernel starts them (a fork of the zygote, which imported trio and
pyfuse3 once; the zygote's own start is measured apart, once per process), `process`
with `SHADOWKERNEL_OVERLAY_FORK=0` (a new Python process importing them itself, as every
overlay started before). Per start: the wall time until the mount answers, and the CPU of the
overlay process (user and system, from /proc, read as it is ready) plus this process's.
Rows alternate; the median wall time and the mean CPU (read in clock ticks of 4-10 ms, which
only a mean averages out). Prints a table, then one JSON object as the last line. It reports;
it never asserts.

    .venv/bin/python benchmarks/overlay_starts.py [--starts 10] [--project NAME==VERSION]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from _proc import cpu_seconds
from worktrees import PROJECT, prepare

from shadowkernel.overlay import zygote
from shadowkernel.overlay.shadow import Shadow


def start(root: Path, forked: bool) -> dict:
    os.environ["SHADOWKERNEL_OVERLAY_FORK"] = "1" if forked else "0"
    began, own = time.perf_counter(), time.process_time()
    with Shadow(root) as shadow:
        wall = time.perf_counter() - began
        own = time.process_time() - own
        child = cpu_seconds(shadow.pid) or 0.0
        os.listdir(shadow.mountpoint)  # it serves
    return {"wall_ms": wall * 1000, "cpu_ms": (child + own) * 1000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--project", default=PROJECT, help="NAME==VERSION of a PyPI sdist")
    parser.add_argument("--starts", type=int, default=10, help="starts per row")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="sk-overlay-starts-") as tmp:
        root = prepare(args.project, Path(tmp))
        began = time.perf_counter()
        with Shadow(root):  # the zygote starts with the first fork
            first = (time.perf_counter() - began) * 1000
        started = zygote._zygote  # None when no zygote could start: every row is a process
        zygote_cpu = (cpu_seconds(started.process.pid) or 0.0) * 1000 if started else 0.0
        rows: dict[str, list[dict]] = {"fork": [], "process": []}
        for _ in range(args.starts):
            for name in ("process", "fork"):
                rows[name].append(start(root, name == "fork"))
    found = {name: {"wall_ms": statistics.median(r["wall_ms"] for r in runs),
                    "cpu_ms": statistics.fmean(r["cpu_ms"] for r in runs)}
             for name, runs in rows.items()}  # fmt: skip
    print(f"{args.project}: {args.starts} starts per row (wall: median, CPU: mean); "
          f"load {load:.1f} before, {os.cpu_count()} cores")  # fmt: skip
    print(f"{'start':<10}{'wall ms':>10}{'CPU ms':>10}")
    print("-" * 30)
    for name, r in found.items():
        print(f"{name:<10}{r['wall_ms']:>10.1f}{r['cpu_ms']:>10.1f}")
    print(f"the zygote itself: {zygote_cpu:.0f} ms of CPU once per process (the first start "
          f"with it took {first:.0f} ms)")  # fmt: skip
    ratio = found["process"]["cpu_ms"] / found["fork"]["cpu_ms"]
    print(f"a fork costs 1/{ratio:.0f} of the CPU of a process of its own")
    print(json.dumps({"benchmark": "overlay_starts", "project": args.project,
                      "starts": args.starts, "load_before": load, "rows": found,
                      "zygote_cpu_ms": zygote_cpu, "first_start_ms": first,
                      "runs": rows}))  # fmt: skip


if __name__ == "__main__":
    main()
