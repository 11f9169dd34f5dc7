"""What one language server costs on a real project, and the first-answer ratio those costs
allow between a server per agent and a few shared lanes.

On the project of `worktrees.py` (more-itertools 11.2.1 from PyPI by default, with its
`pyrightconfig.json`), for each server, in the plain folder (no shadow): the first answer of a
fresh server (its start, its first indexing and the check of `more_itertools/more.py`), then
`--checks` answers after an edit (one agent's line inserted, as in `worktrees.py`), each as
wall time and as CPU of the server's processes.

Why: with N agents asking at once on a machine with C cores, each side's slowest first answer
is at least the CPU all first answers need over the cores. A server per agent pays N first
answers: N x first CPU / C (and no less than one first answer). L shared lanes pay L first
answers (one per lane, the base's) and a re-check for each of the N branches: (L x first CPU +
N x recheck CPU) / C; and a lane serves its branches one after another, so it is also no faster
than its own path: its first answer, then ceil(N / L) re-checks. The ratio of the two sides is
the most L lanes can gain on the first answer there, whatever they do around the servers;
`worktrees.py` measures what they do gain. The table gives it for 1 to `--lanes` lanes.

    .venv/bin/python benchmarks/server_costs.py [--servers ruff,pyright] [--checks 20]
        [--branches 5,20] [--lanes 2] [--project NAME==VERSION]

Prints a table, then one JSON object as the last line. It reports; it never asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import tempfile
import time
from pathlib import Path

import _project
from worktrees import PROJECT, edited, prepare, server_spec, spots, tree_cpu

from shadowkernel.lsp import LspPool, available_servers


async def costs(root: Path, file: str, server: str, checks: int) -> dict:
    """The first answer and `checks` answers after an edit, wall and server CPU seconds."""
    base = (root / file).read_text()
    places = spots(base, file)
    pool = LspPool(root, [server_spec(server)])
    try:
        cpu, began = server_cpu(), time.perf_counter()
        await pool.sync({file: base}, [])
        await pool.lint([file], fixes=False)
        first = (time.perf_counter() - began, server_cpu() - cpu)
        walls, cpus = [], []
        for step in range(checks):
            cpu, began = server_cpu(), time.perf_counter()
            await pool.sync({file: edited(base, places, step % 7, step)}, [])
            await pool.lint([file], fixes=False)
            walls.append(time.perf_counter() - began)
            cpus.append(server_cpu() - cpu)
    finally:
        await pool.close()
    return {"server": server, "first_s": first[0], "first_cpu_s": first[1],
            "recheck_s": statistics.median(walls), "recheck_cpu_s": statistics.fmean(cpus),
            "checks": checks}  # fmt: skip


def server_cpu() -> float:
    """CPU seconds so far of this process's children (the server's processes): the whole
    tree's less this process's own."""
    return tree_cpu(os.getpid()) - time.process_time()


def bound(row: dict, branches: int, lanes: int, cores: int) -> float:
    """The first-answer ratio (a server per agent / `lanes` shared lanes) the machine allows:
    each side is bound by the CPU its first answers need over `cores`, and a lane also by its
    serial path (its first answer, then one re-check after another)."""
    servers = max(row["first_s"], branches * row["first_cpu_s"] / cores)
    cpu = (lanes * row["first_cpu_s"] + branches * row["recheck_cpu_s"]) / cores
    serial = row["first_s"] + math.ceil(branches / lanes) * row["recheck_s"]
    shared = max(cpu, serial)
    return servers / shared if shared else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--project", default=PROJECT, help="NAME==VERSION of a PyPI sdist")
    parser.add_argument("--servers", default="ruff,pyright")
    parser.add_argument("--checks", type=int, default=20, help="answers after an edit")
    parser.add_argument("--branches", default="5,20", help="N for the bound, comma-separated")
    parser.add_argument("--lanes", type=int, default=2, help="most shared lanes for the bound")
    args = parser.parse_args()
    installed, rows = available_servers(), []
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="sk-server-costs-") as tmp:
        root = prepare(args.project, Path(tmp))
        file = _project.modules(root)[0]
        for server in args.servers.split(","):
            if installed.get(server):
                rows.append(asyncio.run(costs(root, file, server, args.checks)))
    branches, cores = [int(n) for n in args.branches.split(",")], os.cpu_count() or 1
    for row in rows:
        row["bounds"] = {str(n): {str(lanes): bound(row, n, lanes, cores)
                                  for lanes in range(1, args.lanes + 1)}
                         for n in branches}  # fmt: skip
    print(
        f"{args.project}, {file}; {args.checks} answers after an edit; load average "
        f"{load_before:.1f} before, {os.getloadavg()[0]:.1f} after, {os.cpu_count()} cores"
    )
    head = (f"{'server':<10}{'first s':>9}{'first CPU s':>13}{'recheck s':>11}"
            f"{'recheck CPU s':>15}  first-answer bound at N branches, per lanes")  # fmt: skip
    print(head, "-" * len(head), sep="\n")
    for r in rows:
        shown = "; ".join(f"{n}: " + ", ".join(f"{b:.1f}x ({lanes})" for lanes, b in by.items())
                          for n, by in r["bounds"].items())  # fmt: skip
        print(f"{r['server']:<10}{r['first_s']:>9.2f}{r['first_cpu_s']:>13.2f}"
              f"{r['recheck_s']:>11.3f}{r['recheck_cpu_s']:>15.3f}  {shown}")  # fmt: skip
    print(json.dumps({"benchmark": "server_costs", "project": args.project, "file": file,
                      "lanes": args.lanes, "cores": cores, "load_before": load_before,
                      "load_after": os.getloadavg()[0], "servers": rows}))  # fmt: skip


if __name__ == "__main__":
    main()
