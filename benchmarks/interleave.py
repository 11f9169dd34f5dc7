"""How many branches can one shadow serve? The interleaver under load.

N branches x E edits each, all through the public API: every branch is an agent coroutine that
stages an edit (a full-text write of one of the project's modules: a snippet appended) and
awaits its lint, E times. The project is a real library from PyPI (`--project NAME==VERSION`,
default more-itertools 11.2.1: more.py has 5,644 lines), or `--project toy` for the small
generated package this benchmark used before. All agents start at once, so the scheduler
always has a queue and interleaves them (round-robin by default). Measured from the
workspace's timeline:

- answers/s: lint answers per second of wall time (all N x E lints; target >= 100/s with ruff);
- switch p50/p95: time to bring the shadow and the servers to a branch's version, over the
  requests that needed a switch (activate + pool sync);
- mean wait: per branch, the mean time its requests queued; reported as the mean over
  branches and the worst branch;
- each lint includes the quick fixes (one code-action round trip per lint) unless --no-fixes,
  and the `new` column (the base of a file is linted once per content and cached).

Cases: ruff with 1 lane, ruff with 2 lanes, pyright with 1 lane (fewer branches: pyright
answers in tens of ms, not ms; the row says how many). Server start-up is excluded (one warm-up
lint first) and reported separately. Prints a table, then one JSON object as the last line.
It reports; it never asserts.

    .venv/bin/python benchmarks/interleave.py [--project more-itertools==11.2.1] [--branches 200]
        [--edits 5] [--pyright-branches 20] [--cases ruff,ruff-2-lanes,pyright]
        [--policy round-robin]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _project

import shadowkernel as sk
from shadowkernel.evals import pypi
from shadowkernel.lsp import available_servers
from shadowkernel.sched import percentile

TARGET_ANSWERS_PER_SECOND = 100.0
MODULES = 20
PROJECT = "more-itertools==11.2.1"

SNIPPETS = [
    "import json\n",
    "value_{i} = undefined_{i}\n",
    "def f_{i}(x):\n    return x + {i}\n",
    "import os, sys\n",
    "x_{i} = [1,2 ,3]\n",
    "print(helper_{i}(1))\n",
]


def make_project(root: Path, project: str) -> tuple[Path, list[str]]:
    """The project folder and the modules agents edit: a PyPI library's sdist unpacked, or
    (`toy`) a small package of MODULES modules importing one another."""
    if project != "toy":
        name, _, version = project.partition("==")
        top = pypi.unpack(name, version, root)
        return top, sorted(_project.modules(top))
    (root / "pkg").mkdir(parents=True)
    (root / "pkg/__init__.py").write_text("")
    for k in range(MODULES):
        prev = f"from pkg.m{k - 1} import f{k - 1}\n" if k else ""
        body = f"import os\n{prev}\n\ndef f{k}(x: int) -> int:\n    return x + {k}\n"
        (root / f"pkg/m{k}.py").write_text(body)
    return root, [f"pkg/m{k}.py" for k in range(MODULES)]


async def agent(
    branch: sk.Branch, modules: list[str], edits: int, rng: random.Random
) -> list[float]:
    """Stage an edit, await its lint, E times; returns each answer's latency."""
    latencies = []
    for step in range(edits):
        path = rng.choice(modules)
        branch.write(path, branch.read(path) + rng.choice(SNIPPETS).format(i=step))
        began = time.perf_counter()
        await branch.lint_async()
        latencies.append(time.perf_counter() - began)
    return latencies


async def interleave(ws: sk.Workspace, modules: list[str], branches: int, edits: int,
                     seed: int) -> list[float]:  # fmt: skip
    rng = random.Random(seed)
    agents = [agent(ws.branch(f"b{n}"), modules, edits, random.Random(rng.random()))
              for n in range(branches)]  # fmt: skip
    results = await asyncio.gather(*agents)
    return [x for r in results for x in r]


def run_case(name: str, server: str, lanes: int, branches: int, edits: int, policy: str,
             fixes: bool, project: str) -> dict[str, Any]:  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="sk-bench-") as tmp:
        root, modules = make_project(Path(tmp) / "project", project)
        began = time.perf_counter()
        with sk.Workspace(root, servers=[server], lanes=lanes, policy=policy) as ws:  # type: ignore[arg-type]
            opened = time.perf_counter() - began
            warm = time.perf_counter()
            for lane in range(lanes):  # start every lane's server outside the measurement
                w = ws.branch(f"warm{lane}")
                w.write(modules[0], w.read(modules[0]) + "\n")
                w.lint()
            warmup = time.perf_counter() - warm
            skip = len(ws.timeline())
            if not fixes:
                _no_fixes(ws)
            wall = time.perf_counter()
            latencies = asyncio.run(interleave(ws, modules, branches, edits, seed=7))
            wall = time.perf_counter() - wall
            events = ws.timeline().events[skip:]
        row = summarize(name, server, lanes, branches, edits, policy, wall, latencies, events,
                        opened, warmup)  # fmt: skip
        return {"project": project, **row}


def _no_fixes(ws: sk.Workspace) -> None:
    """Make lint() skip the code-action round trips (for --no-fixes)."""
    original = sk.Branch._lint

    async def lint(self: sk.Branch, paths: Any, servers: Any, fixes: bool) -> Any:
        return await original(self, paths, servers, False)

    sk.Branch._lint = lint  # type: ignore[method-assign]


def summarize(name: str, server: str, lanes: int, branches: int, edits: int, policy: str,
              wall: float, latencies: list[float], events: Any, opened: float,
              warmup: float) -> dict[str, Any]:  # fmt: skip
    switches = [e.switch for e in events if e.switch > 0]
    waits: dict[str, list[float]] = {}
    for e in events:
        waits.setdefault(e.branch, []).append(e.started - e.queued)
    per_branch = [statistics.fmean(w) for w in waits.values()]
    failed = sum(1 for e in events if not e.ok)
    serve = sum(e.finished - e.started for e in events)
    return {
        "case": name,
        "server": server,
        "lanes": lanes,
        "policy": policy,
        "branches": branches,
        "edits": edits,
        "answers": len(latencies),
        "failed": failed,
        "wall_s": wall,
        "answers_per_s": len(latencies) / wall if wall else 0.0,
        "switches": len(switches),
        "switch_p50_ms": percentile(switches, 0.5) * 1000,
        "switch_p95_ms": percentile(switches, 0.95) * 1000,
        "switch_share": sum(switches) / serve if serve else 0.0,
        "serve_p50_ms": percentile([e.finished - e.started for e in events], 0.5) * 1000,
        "mean_wait_ms": statistics.fmean(per_branch) * 1000 if per_branch else 0.0,
        "max_branch_wait_ms": max(per_branch) * 1000 if per_branch else 0.0,
        "latency_p50_ms": percentile(latencies, 0.5) * 1000,
        "open_s": opened,
        "warmup_s": warmup,
    }


def table(rows: list[dict[str, Any]]) -> str:
    head = (f"{'case':<14}{'branches':>9}{'answers':>8}{'ans/s':>8}{'switch p50':>11}"
            f"{'p95 ms':>8}{'switch%':>8}{'wait ms':>9}{'worst':>9}{'failed':>7}")  # fmt: skip
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['case']:<14}{r['branches']:>9}{r['answers']:>8}{r['answers_per_s']:>8.1f}"
            f"{r['switch_p50_ms']:>11.2f}{r['switch_p95_ms']:>8.2f}{100 * r['switch_share']:>7.0f}%"
            f"{r['mean_wait_ms']:>9.0f}{r['max_branch_wait_ms']:>9.0f}{r['failed']:>7}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--project", default=PROJECT, help="NAME==VERSION from PyPI, or toy")
    parser.add_argument("--branches", type=int, default=200)
    parser.add_argument("--edits", type=int, default=5)
    parser.add_argument("--pyright-branches", type=int, default=20)
    parser.add_argument("--cases", default="ruff,ruff-2-lanes,pyright")
    parser.add_argument("--policy", default="round-robin", choices=["round-robin", "fifo"])
    parser.add_argument("--no-fixes", action="store_true", help="lint without quick fixes")
    args = parser.parse_args()
    installed = available_servers()
    cases = {
        "ruff": ("ruff", 1, args.branches),
        "ruff-2-lanes": ("ruff", 2, args.branches),
        "ruff-fifo": ("ruff", 1, args.branches),
        "pyright": ("pyright", 1, args.pyright_branches),
        "basedpyright": ("basedpyright", 1, args.pyright_branches),
    }
    rows = []
    for name in args.cases.split(","):
        server, lanes, branches = cases[name]
        if not installed.get(server):
            print(f"{name}: {server} is not installed, skipped", file=sys.stderr)
            continue
        policy = "fifo" if name.endswith("fifo") else args.policy
        rows.append(run_case(name, server, lanes, branches, args.edits, policy, not args.no_fixes,
                             args.project))  # fmt: skip
        print(f"{name}: done", file=sys.stderr, flush=True)
    print(table(rows))
    print(f"target: >= {TARGET_ANSWERS_PER_SECOND:.0f} lint answers/s with ruff on one shadow")
    ruff = next((r for r in rows if r["case"] == "ruff"), None)
    print(json.dumps({
        "benchmark": "interleave",
        "project": args.project,
        "cases": rows,
        "target_answers_per_s": TARGET_ANSWERS_PER_SECOND,
        "ruff_meets_target": None if ruff is None
        else ruff["answers_per_s"] >= TARGET_ANSWERS_PER_SECOND,
    }))  # fmt: skip


if __name__ == "__main__":
    # Branches are durable by default: keep this run's (and its servers') out of the user's
    # state home, where the temporary copies' folders would be left behind.
    with tempfile.TemporaryDirectory(prefix="sk-bench-state-") as state_home:
        os.environ["XDG_STATE_HOME"] = state_home
        main()
