"""Where one lint answer's CPU goes: shadowkernel's own process against the client a worktree
per agent runs, one answer at a time, on a real project.

`worktrees.py` finds shadowkernel spending more CPU per ruff answer than a worktree and a
server per agent (1.2-1.3x), which is what keeps its steady answers/s below theirs on busy
cores. This benchmark takes the concurrency away to say where that CPU goes. On the project of
`worktrees.py` (more-itertools 11.2.1 by default), `--branches` agents take turns editing
`more_itertools/more.py` (each edit its own undefined name, as there), one answer at a time,
with ruff:

- `worktree`: the file written to a copy of the project, then synced to one server and linted
  through shadowkernel's LSP client (`LspPool`), as each agent of `worktrees.py`'s worktree
  side does;
- `shadowkernel`: one workspace with one lane, durable as it opens by default, a branch per
  agent: `write` then `lint_async` (the `new` column and the lint table included);
- `shadowkernel, report`: the same with `lint_report_async`, the lints as records (as the
  worktree's client answers; what shadowkernel's MCP server and agent loops read);
- `report, agents' loop`: the same with the workspace's services on the agents' event loop
  (`Workspace(loop="running")`, as an async host opens it): no hand-off between threads;
- `shadowkernel, in memory`: the same with `state=None` (no journal, no flusher);
- `shadowkernel + jedi`: the first row with jedi-language-server beside ruff, kept for
  navigation (the README's first example and the MCP server's defaults): a lint asks ruff
  alone, and no server it does not ask is synced (before 2026-12-04, jedi took every
  branch's text at every switch);
- `staging only`: `write` alone, durable (what staging a version costs before any lint);
- `staging, spilled`: the same past the workspace's memory budget (`memory_budget=0`), where
  every version's bytes go to a spill file, as in a long history (a copy of more.py per
  version fills the default 256 MiB after about 1,400 versions);
- `lint table`: `lint_table` of one lint, alone (timeit), the table every answer builds.

Per answer: the CPU of this process (every thread: the agent's, the services loop's, the
journal's flusher), the CPU of the side's other processes (the server; shadowkernel's overlay),
and the wall time. Rounds alternate the rows; the table gives each row's median over rounds.
Prints a table, then one JSON object as the last line. It reports; it never asserts.

    .venv/bin/python benchmarks/answer_costs.py [--answers 300] [--branches 4] [--rounds 3]
        [--project NAME==VERSION]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import timeit
from collections.abc import Awaitable, Callable
from pathlib import Path

import _project
from _proc import cpu_seconds
from worktrees import PROJECT, edited, prepare, server_spec, spots, tree_cpu

import shadowkernel as sk
from shadowkernel.lsp import Lint, LspPool, available_servers, lint_table

WARMUP = 8  # answers before the measured ones: the servers started, the base linted


async def measure(answers: int, step: Callable[[int], Awaitable[None]]) -> dict:
    """Run `step` for WARMUP then `answers` answers; CPU and wall per measured answer (ms)."""
    for i in range(WARMUP):
        await step(i)
    own, others = time.process_time(), tree_cpu(os.getpid()) - (cpu_seconds(os.getpid()) or 0)
    began = time.perf_counter()
    for i in range(WARMUP, WARMUP + answers):
        await step(i)
    wall = time.perf_counter() - began
    own = time.process_time() - own
    others = tree_cpu(os.getpid()) - (cpu_seconds(os.getpid()) or 0) - others
    return {"own_cpu_ms": own / answers * 1000, "other_cpu_ms": others / answers * 1000,
            "wall_ms": wall / answers * 1000}  # fmt: skip


async def worktree(tree: Path, file: str, texts: list[str], answers: int) -> dict:
    pool = LspPool(tree, [server_spec("ruff")])

    async def step(i: int) -> None:
        (tree / file).write_text(texts[i])
        await pool.sync({file: texts[i]}, [file])
        await pool.lint([file], fixes=False)

    try:
        return await measure(answers, step)
    finally:
        await pool.close()


def shadowkernel(root: Path, file: str, texts: list[str], answers: int, n: int, *,
                 durable: bool, lint: str | None, spilled: bool = False,
                 servers: tuple[str, ...] = ("ruff",), loop: str = "own") -> dict:  # fmt: skip
    """`lint`: "table" (`lint_async`), "report" (`lint_report_async`), None (staging only);
    `loop`: the workspace's (its services in their own thread, or on the agents' loop)."""
    return asyncio.run(_shadowkernel(root, file, texts, answers, n, durable=durable, lint=lint,
                                     spilled=spilled, servers=servers, loop=loop))  # fmt: skip


async def _shadowkernel(root: Path, file: str, texts: list[str], answers: int, n: int, *,
                        durable: bool, lint: str | None, spilled: bool,
                        servers: tuple[str, ...], loop: str) -> dict:  # fmt: skip
    state = tempfile.mkdtemp(prefix="state-", dir=root.parent) if durable else None
    budget = {"memory_budget": 0} if spilled else {}  # every version past the budget
    specs = [server_spec(name) for name in servers]
    async with sk.Workspace(root, servers=specs, lanes=1, state=state, loop=loop,
                            **budget) as ws:  # fmt: skip
        branches = [ws.branch(f"agent-{i}") for i in range(n)]

        async def step(i: int) -> None:
            branches[i % n].write(file, texts[i])
            if lint == "table":
                await branches[i % n].lint_async([file], fixes=False)
            elif lint == "report":
                await branches[i % n].lint_report_async([file], fixes=False)

        return await measure(answers, step)


def table_cost(file: str) -> dict:
    lint = Lint(file, 10, 4, 10, 12, "error", "F821", "Ruff", "Undefined name `x`")
    seconds = min(timeit.repeat(lambda: lint_table([lint], "agent-0", 3, [True]),
                                number=500, repeat=5)) / 500  # fmt: skip
    return {"own_cpu_ms": seconds * 1000, "other_cpu_ms": 0.0, "wall_ms": seconds * 1000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--project", default=PROJECT, help="NAME==VERSION of a PyPI sdist")
    parser.add_argument("--answers", type=int, default=300, help="measured answers per row")
    parser.add_argument("--branches", type=int, default=4, help="agents taking turns")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, rows alternating")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="sk-answer-costs-") as tmp:
        root = prepare(args.project, Path(tmp))
        file = _project.modules(root)[0]
        base = (root / file).read_text()
        places = spots(base, file)
        n, count = args.branches, WARMUP + args.answers
        texts = [edited(base, places, i % n, i // n) for i in range(count)]
        tree = shutil.copytree(root, root.parent / "worktree", symlinks=True)
        side = functools.partial(shadowkernel, root, file, texts, args.answers, n)
        rows = {
            "worktree": lambda: asyncio.run(worktree(tree, file, texts, args.answers)),
            "shadowkernel": lambda: side(durable=True, lint="table"),
            "shadowkernel, report": lambda: side(durable=True, lint="report"),
            "report, agents' loop": lambda: side(durable=True, lint="report", loop="running"),
            "shadowkernel, in memory": lambda: side(durable=False, lint="table"),
            "shadowkernel + jedi": lambda: side(
                durable=True, lint="table", servers=("ruff", "jedi-language-server")
            ),
            "staging only": lambda: side(durable=True, lint=None),
            "staging, spilled": lambda: side(durable=True, lint=None, spilled=True),
            "lint table": lambda: table_cost(file),
        }
        if not available_servers().get("jedi-language-server"):
            print("jedi-language-server is not installed: its row is skipped", file=sys.stderr)
            del rows["shadowkernel + jedi"]
        runs: dict[str, list[dict]] = {name: [] for name in rows}
        for k in range(args.rounds):
            for name in list(rows)[:: 1 if k % 2 == 0 else -1]:
                runs[name].append(rows[name]())
    found = {name: {key: statistics.median(r[key] for r in results) for key in results[0]}
             for name, results in runs.items()}  # fmt: skip
    baseline = found["worktree"]
    print(f"{args.project}, {file} with ruff; {args.branches} agents taking turns, "
          f"{args.answers} answers per row, median of {args.rounds} rounds; load average "
          f"{load_before:.1f} before, {os.getloadavg()[0]:.1f} after, "
          f"{os.cpu_count()} cores")  # fmt: skip
    print(f"{'row':<26}{'own CPU ms':>11}{'others ms':>11}{'wall ms':>9}{'own / worktree':>16}")
    print("-" * 73)
    for name, r in found.items():
        print(f"{name:<26}{r['own_cpu_ms']:>11.2f}{r['other_cpu_ms']:>11.2f}{r['wall_ms']:>9.2f}"
              f"{r['own_cpu_ms'] / baseline['own_cpu_ms']:>15.2f}x")  # fmt: skip
    extra = found["shadowkernel"]["own_cpu_ms"] - baseline["own_cpu_ms"]
    records = found["shadowkernel, report"]["own_cpu_ms"] - baseline["own_cpu_ms"]
    here = found["report, agents' loop"]["own_cpu_ms"] - baseline["own_cpu_ms"]
    print(f"shadowkernel's own process spends {extra:.2f} ms more per answer than the worktree's "
          f"client ({records:.2f} ms with the report, {here:.2f} with it on the agents' loop); "
          "servers and overlay "
          f"{found['shadowkernel']['other_cpu_ms']:.2f} ms against "
          f"{baseline['other_cpu_ms']:.2f}")  # fmt: skip
    print(json.dumps({"benchmark": "answer_costs", "project": args.project, "file": file,
                      "branches": args.branches, "answers": args.answers,
                      "rounds": args.rounds, "load_before": load_before,
                      "load_after": os.getloadavg()[0], "rows": found, "runs": runs}))  # fmt: skip


if __name__ == "__main__":
    main()
