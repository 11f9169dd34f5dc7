"""Shadowkernel branches against what parallel agents use today: a git worktree and a language
server per agent (Cursor's parallel agents, Claude Code's worktrees, Serena's per-folder
sessions work this way). Same project, same edits, same questions on both sides.

The project is a real library from PyPI (more-itertools 11.2.1 by default, `--project
NAME==VERSION`), committed to a git repository. Every agent (N of them, all at once) stages E
edits of the same file (more_itertools/more.py, 5,644 lines), each inserting its own undefined
name at its own place and removing the previous one, and asks for that file's lints after each:

- worktrees: `git worktree add` per agent, one language server rooted in each (shadowkernel's
  LSP client, the same on both sides), the file written to the worktree and synced as an open
  document, then its diagnostics;
- shadowkernel: one workspace opened in the agents' coroutine with `loop="running"` (its
  services are tasks on the agents' loop, as the worktrees' clients are; `--loop own`: in a
  thread of their own, the workspace's default), a branch per agent, `write` then
  `lint_report_async` (records, as the worktrees' client answers, and as shadowkernel's MCP
  server and agent loops read lints; `--answer table`: `lint_async`, the pandas lint table
  built from them), the `new` column included (the base of the file is linted once and
  cached).

Each answer is checked: it holds its own branch's current error, no other branch's, and no
stale one of its own. Lints are asked without quick fixes on both sides. With pyright both
sides read a `pyrightconfig.json` that skips unannotated functions (`analyzeUnannotatedFunctions:
false`), fair to both since it is committed in the project. Each side runs in a child process
(the two never share a process), sides alternate per case; figures: answers/s (over the
agents' whole span, and `steady`: once every agent had its first answer, so without the
worktrees' server starts, which fall inside that span), answer latency
p50, mean and p95, the first answer of the slowest branch (from the side's start: worktrees
made and servers started, or the workspace opened; both sides' Python modules are imported
before either clock starts), the CPU per answer of every process of
the side while the agents worked (the worktrees' servers start at their first request, within
that span; shadowkernel's start as the workspace opens, before it, and the lanes it opens
while serving within it; the side's own process apart from its servers), the CPU the side
spent from its start until every agent had its first answer (where both sides fill the cores,
the first answer cannot be faster by more than that ratio), and peak memory as the sum of PSS
over every process of
the side (the driver, shadowkernel's own process, its overlay and servers; the worktrees'
servers), sampled each second and once more as the agents finish. Prints a table, then one
JSON object as the last line. It reports; it never asserts.

Every agent asks again as soon as it is answered, so by Little's law the mean latency is
N / answers/s on either side: the mean ratio is the inverse of the answers/s ratio. The p50
ratio adds how each side spreads its waits: round-robin lanes give every agent about the
same wait (mean / p50 near 1), N servers sharing the cores give some agents short waits and
others long ones (a lower median, a longer p95); the ratios line prints both spreads. An
agent's step is its edit, then its lint: the same law holds for the whole step, so a side
whose edit takes longer (a worktree's write to disk, against staging) leaves its agents less
of the step to wait for answers, a lower p50 at the same answers/s. `edit and answer p50`
times the whole step on both sides.

Measured on 2 cores (2026-12-02, benchmarks/README.md has the runs): `ruff:1000`, 2,000
answers, none wrong, 219.7-284.9 answers/s with nothing else running (6.3-7.6 ms of CPU per
answer in all) and 83.5-123.5 at load 4-5 beside other test suites; 463-558 KB of
shadowkernel's own PSS per branch (its two versions of more.py are 350 KB of that).
With ruff in steady state (`--edits 20`) shadowkernel reaches only 0.63-1.04x the
worktrees' answers/s at 5 / 20 / 50 branches, at 1.01-1.42x their CPU per answer: ruff costs
the same or less on our side (4.4-5.8 ms per answer against 4.7-6.7 on 2026-12-03), and
shadowkernel's own process spends 2.5-3.7 ms per answer against the worktree client's 1.5-2.3
(`answer_costs.py` says where). On 2026-12-04, with the lint report (records) as the answer,
staged text encoded in chunks and lanes that open for agents who stage between answers
(`--edits 100 --repeat 3`): 0.84 / 0.98 / 1.06x at 5 / 20 / 50 branches.

    .venv/bin/python benchmarks/worktrees.py [--quick] [--project more-itertools==11.2.1]
        [--cases ruff:5,ruff:20,ruff:50,pyright:5,pyright:20] [--edits 5] [--lanes N]
        [--memory-state] [--repeat R] [--answer report|table] [--loop running|own]

`--repeat R` runs every case R times (sides alternating from one run to the next), pairs the
two sides within each round and prints each ratio's median and range: this VM's speed moves
between runs by more than some ratios differ (the pyright:20 first answer: 3.9-5.5x over four
single runs on 2026-12-03), so one round is one draw.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import itertools
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import _project
import attrs
from _proc import cpu_seconds

from shadowkernel import Workspace  # imported here as the worktrees' client is: no clock counts it
from shadowkernel.lsp import LspPool, ServerSpec, available_servers, line_map
from shadowkernel.lsp.registry import resolve_specs
from shadowkernel.sched import percentile

PROJECT = "more-itertools==11.2.1"
CASES = "ruff:5,ruff:20,ruff:50,pyright:5,pyright:20,ruff:1000"
MOST_WORKTREES = 100  # beyond this only the shadowkernel side runs (a server per agent is absurd)
MANY_EDITS = 2  # edits per agent in cases beyond MOST_WORKTREES
QUICK = "ruff:5,ruff:20,pyright:5"
PYRIGHT_CONFIG = {"analyzeUnannotatedFunctions": False}
ERROR = re.compile(r"undefined_b(\d+)_(\d+)")
SERVICES = {"running": "on the agents' event loop", "own": "in a thread of their own"}
REQUEST_TIMEOUT = 300.0  # N heavy servers on a loaded machine answer slowly; same on both sides


def server_spec(name: str) -> ServerSpec:
    return attrs.evolve(resolve_specs([name])[0], request_timeout=REQUEST_TIMEOUT)


# -- the project and the edits -----------------------------------------------------------------


def prepare(project: str, into: Path) -> Path:
    """The library's sdist unpacked, with the pyright config, committed to a git repository."""
    # Imported here, in the parent only: evals/ brings scipy and pandas' plotting, 600 modules
    # an agent's process would not hold, whose objects every full collection of the children's
    # garbage collector would walk on both sides.
    from shadowkernel.evals import pypi

    name, _, version = project.partition("==")
    root = pypi.unpack(name, version, into)
    (root / "pyrightconfig.json").write_text(json.dumps(PYRIGHT_CONFIG))
    env = dict(os.environ, GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="b@example.com",
               GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="b@example.com")  # fmt: skip
    for command in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "base"]):
        subprocess.run(["git", "-C", str(root), *command], env=env, check=True)
    return root


def spots(text: str, file: str) -> list[int]:
    """Line indexes where a top-level statement may go (before a top-level def or class)."""
    lines = text.splitlines(keepends=True)
    tops = ("def ", "class ")
    found = [i for i, line in enumerate(lines)
             if line.startswith(tops) and not lines[i - 1].startswith("@")]  # fmt: skip
    if not found:
        raise SystemExit(f"{file} has no top-level def or class to put an edit before; "
                         "choose another module with --file")  # fmt: skip
    return found


def edited(base: str, places: list[int], agent: int, step: int) -> str:
    """The file with agent's error of this step at the agent's place (and no earlier one)."""
    at = line_offsets(base)[places[agent * 7 % len(places)]]
    return f"{base[:at]}zz_b{agent}_{step} = undefined_b{agent}_{step}\n{base[at:]}"


@functools.lru_cache(maxsize=4)
def line_offsets(text: str) -> list[int]:
    """Where each line of `text` begins, found once per text: the driver's own edit costs two
    slices, not a split and a join of 5,644 lines per answer (the same on both sides; it is
    the agent's, not the system's, work)."""
    return [0, *itertools.accumulate(len(line) for line in text.splitlines(keepends=True))]


def wrong(messages: list[str], agent: int, step: int) -> str:
    """Why an answer is wrong ("" when it is right): it must name exactly its own error."""
    seen = {tuple(map(int, m)) for message in messages for m in ERROR.findall(message)}
    if (agent, step) not in seen:
        return "missing its own error"
    others = seen - {(agent, step)}
    if any(a != agent for a, _ in others):
        return "holds another branch's error"
    return "holds a stale error of its own" if others else ""


# -- the two sides (each in its own child process) ---------------------------------------------


class Memory:
    """Peak of the summed PSS of this process and all its descendants, sampled in a thread
    (each sample reads every process's smaps_rollup: milliseconds of kernel time apiece)."""

    def __init__(self, every: float = 1.0) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, args=(every,), daemon=True)
        self._thread.start()

    def _sample(self, every: float) -> None:
        while not self._stop.wait(every):
            self.take()

    def take(self) -> None:
        self.peak = max(self.peak, tree_pss(os.getpid()))

    def stop(self) -> int:
        self.take()
        self._stop.set()
        return self.peak


def tree_pss(pid: int) -> int:
    """Bytes of PSS of `pid` and its descendants."""
    return sum(pss(p) for p in descendants(pid))


def descendants(pid: int) -> list[int]:
    """`pid` and every process below it, from each thread's /proc `children` list: the cost
    follows the tree, not every process of the machine (psutil's parent map reads them all,
    which on a busy machine cost more than a millisecond per answer of the side's CPU)."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        try:
            tasks = os.listdir(f"/proc/{current}/task")
        except OSError:
            continue  # gone meanwhile
        for task in tasks:
            with contextlib.suppress(OSError), open(f"/proc/{current}/task/{task}/children") as f:
                todo += map(int, f.read().split())
    return found


def tree_cpu(pid: int) -> float:
    """CPU seconds (user and system, every thread) of `pid` and its live descendants."""
    return sum(cpu_seconds(p) or 0.0 for p in descendants(pid))


def pss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            for line in rollup:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass  # gone meanwhile
    return 0


class Agents:
    """Per agent: the latency of each answer, when it first answered, and wrong answers; for
    the side: the CPU its processes spent while the agents worked (this process's share
    apart), and the CPU spent from the side's start until every agent had its first answer."""

    def __init__(self, began: float, n: int, memory: Memory | None = None) -> None:
        self.began, self.n = began, n
        self.memory = memory  # sampled once more when the agents finish
        self.latencies: list[float] = []  # from the lint request to its answer
        self.cycles: list[float] = []  # the whole step: from the edit (staged, or written)
        self.times: list[float] = []  # when each answer came
        self.first: dict[int, float] = {}
        self.wrong: list[str] = []
        self.agents_began = self.last = began
        self.cpu = self.own_cpu = 0.0
        self.cpu_at_start = side_cpu()  # nothing of the side runs yet: the baseline
        self.first_cpu = 0.0

    def start(self) -> None:
        """The agents start now (the worktrees are made, or the workspace is open)."""
        self.cpu, self.own_cpu = -tree_cpu(os.getpid()), -own_cpu()
        self.agents_began = time.perf_counter()

    def finish(self) -> None:
        """Every agent is done (before any server stops: a side shorter than the memory
        sampler's second still has its servers' memory counted)."""
        self.cpu += tree_cpu(os.getpid())
        self.own_cpu += own_cpu()
        if self.memory is not None:
            self.memory.take()

    def steady_rate(self) -> float:
        """Answers/s once every agent had its first answer: each side's starts left out (the
        worktrees' servers start at their agent's first request, inside the agents' span)."""
        since = self.began + max(self.first.values(), default=0.0)
        later = sum(1 for t in self.times if t > since)
        return later / (self.last - since) if later else 0.0

    def answered(
        self, agent: int, step: int, edited: float, asked: float, messages: list[str]
    ) -> None:
        now = time.perf_counter()
        self.latencies.append(now - asked)
        self.cycles.append(now - edited)
        self.times.append(now)
        if agent not in self.first:
            self.first[agent] = now - self.began
            if len(self.first) == self.n:  # the last first answer: what it took, in CPU
                self.first_cpu = side_cpu() - self.cpu_at_start
        self.last = now
        if why := wrong(messages, agent, step):
            self.wrong.append(f"agent {agent} step {step}: {why}")


def own_cpu() -> float:
    """CPU seconds of this process, every thread."""
    return cpu_seconds(os.getpid()) or 0.0


def side_cpu() -> float:
    """CPU seconds of this process, its live descendants and the children it reaped (`git
    worktree add`, a server that ended): all a side spent so far."""
    times = os.times()
    return tree_cpu(os.getpid()) + times.children_user + times.children_system


async def worktrees_side(
    root: Path, file: str, server: str, n: int, edits: int, agents: Agents
) -> None:
    base = (root / file).read_text()
    places = spots(base, file)
    trees = root.parent / f"worktrees-{server}-{n}"
    for i in range(n):
        subprocess.run(["git", "-C", str(root), "worktree", "add", "-q", "--detach",
                        str(trees / f"agent-{i}")], check=True)  # fmt: skip
    pools = [LspPool(trees / f"agent-{i}", [server_spec(server)]) for i in range(n)]
    agents.start()

    async def agent(i: int) -> None:
        for step in range(edits):
            text = edited(base, places, i, step)
            began = time.perf_counter()
            (trees / f"agent-{i}" / file).write_text(text)
            asked = time.perf_counter()
            await pools[i].sync({file: text}, [file])
            lints = await pools[i].lint([file], fixes=False)
            agents.answered(i, step, began, asked, [lint.message for lint in lints])

    try:
        await asyncio.gather(*(agent(i) for i in range(n)))
        agents.finish()
    finally:
        await asyncio.gather(*(pool.close() for pool in pools), return_exceptions=True)
        for i in range(n):
            subprocess.run(["git", "-C", str(root), "worktree", "remove", "--force",
                            str(trees / f"agent-{i}")], check=False)  # fmt: skip
        shutil.rmtree(trees, ignore_errors=True)
        subprocess.run(["git", "-C", str(root), "worktree", "prune"], check=False)


async def shadow_side(
    root: Path, file: str, server: str, n: int, edits: int, agents: Agents, answer: str,
    options: dict[str, Any],
) -> dict:  # fmt: skip
    """The workspace opened in the agents' coroutine (with `loop="running"` its services are
    tasks on the agents' loop, as the worktrees' clients are), its figures once they finish."""
    async with Workspace(root, servers=[server_spec(server)], **options) as ws:
        opened = pss(os.getpid())
        cost = await shadow_agents(ws, file, n, edits, agents, answer)
        own = pss(os.getpid())
        return {"lanes": len(ws.shadows), "lanes_first_served_s": lanes_first_served(ws),
                "own_pss_mb": own / 2**20, "own_pss_per_branch_kb": (own - opened) / n / 1024,
                **cost}  # fmt: skip


async def shadow_agents(
    ws: Workspace, file: str, n: int, edits: int, agents: Agents, answer: str
) -> dict:
    base = (Path(ws.root) / file).read_text()
    places = spots(base, file)
    branches = [ws.branch(f"agent-{i}") for i in range(n)]
    agents.start()

    async def agent(i: int) -> None:
        for step in range(edits):
            text = edited(base, places, i, step)
            began = time.perf_counter()
            branches[i].write(file, text)
            asked = time.perf_counter()
            if answer == "table":
                table = await branches[i].lint_async([file], fixes=False)
                messages = list(table["message"])
            else:
                report = await branches[i].lint_report_async([file], fixes=False)
                messages = [lint.message for lint in report.lints]
            agents.answered(i, step, began, asked, messages)

    await asyncio.gather(*(agent(i) for i in range(n)))
    agents.finish()
    return new_column_cost(ws, base, places, n, edits)


def new_column_cost(ws: Workspace, base: str, places: list[int], n: int, edits: int) -> dict:
    """What the `new` column costs per answer (the line map of the edited file against its
    base, computed afresh as for a new version), against the median time a lint was served."""
    base_bytes, costs = base.encode(), []
    for i in range(n):
        for step in range(edits):
            new = edited(base, places, i, step).encode()
            began = time.perf_counter()
            line_map(base_bytes, new)
            costs.append(time.perf_counter() - began)
    # The worst span: one version with edits near both ends of the file.
    lines = base.splitlines(keepends=True)
    spread = "".join(["zz_first = 1\n", *lines[:-3], "zz_last = 2\n", *lines[-3:]]).encode()
    began = time.perf_counter()
    line_map(base_bytes, spread)
    worst = time.perf_counter() - began
    serve = [e.serve for e in ws.events() if e.op == "lint" and e.ok]
    cost, served = percentile(costs, 0.5), percentile(serve, 0.5)
    return {"new_column_ms": cost * 1000, "new_column_spread_ms": worst * 1000,
            "lint_serve_ms": served * 1000,
            "new_column_share": cost / served if served else 0.0}  # fmt: skip


def lanes_first_served(ws: Workspace) -> list[float]:
    """When each lane began its first request, in seconds after the first request began:
    the lanes a workspace opened while serving show when they joined."""
    first: dict[int, float] = {}
    for event in ws.events():
        if event.lane >= 0:  # not a run served in a view of its own
            first[event.lane] = min(first.get(event.lane, event.started), event.started)
    began = min(first.values(), default=0.0)
    return [first[lane] - began for lane in sorted(first)]


def run_side(
    side: str, root: Path, file: str, server: str, n: int, edits: int, lanes: int | None,
    durable: bool, answer: str, loop: str = "running",
) -> dict:  # fmt: skip
    """One side of one case, in this process (the child)."""
    memory = Memory()
    began = time.perf_counter()
    agents = Agents(began, n, memory)
    extra: dict[str, Any] = {}
    if side == "worktrees":
        asyncio.run(worktrees_side(root, file, server, n, edits, agents))
    else:
        # A fresh durable store per case, removed after it: branches of an earlier case stay
        # out, and nothing is left behind in the user's state directory or the cache.
        with contextlib.ExitStack() as stack:
            state = (stack.enter_context(tempfile.TemporaryDirectory(prefix="state-",
                                                                     dir=root.parent))
                     if durable else None)  # fmt: skip
            options: dict[str, Any] = {"state": state, "loop": loop}
            if lanes is not None:
                options["lanes"] = lanes
            found = asyncio.run(shadow_side(root, file, server, n, edits, agents, answer,
                                            options))  # fmt: skip
        extra = {"durable": durable, "answer": answer, "loop": loop, **found}
    peak = memory.stop()
    answers, wall = len(agents.latencies), agents.last - agents.agents_began
    mean = statistics.fmean(agents.latencies) * 1000 if answers else 0.0
    return {
        "side": side, "server": server, "branches": n, "edits": edits, "answers": answers,
        "wrong": len(agents.wrong), "wrong_examples": agents.wrong[:3],
        "wall_s": wall, "answers_per_s": answers / wall, "steady_per_s": agents.steady_rate(),
        "p50_ms": percentile(agents.latencies, 0.5) * 1000,
        "mean_ms": mean,
        "p95_ms": percentile(agents.latencies, 0.95) * 1000,
        "cycle_p50_ms": percentile(agents.cycles, 0.5) * 1000,
        "edit_mean_ms": statistics.fmean(agents.cycles) * 1000 - mean if answers else 0.0,
        "first_answer_slowest_s": max(agents.first.values(), default=0.0),
        "cpu_ms_per_answer": agents.cpu / answers * 1000 if answers else 0.0,
        "own_cpu_ms_per_answer": agents.own_cpu / answers * 1000 if answers else 0.0,
        "first_answers_cpu_s": agents.first_cpu,
        "peak_pss_mb": peak / 2**20, **extra,
    }  # fmt: skip


# -- the parent: cases, both sides alternating ---------------------------------------------------


def child(
    side: str, root: Path, file: str, server: str, n: int, edits: int, lanes: int | None,
    durable: bool, answer: str, loop: str,
) -> dict:  # fmt: skip
    command = [sys.executable, __file__, "--side", side, "--root", str(root), "--file", file,
               "--server", server, "--n", str(n), "--edits", str(edits),
               "--answer", answer, "--loop", loop]  # fmt: skip
    if not durable:
        command.append("--memory-state")
    if lanes is not None:
        command += ["--lanes", str(lanes)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:  # reported as a failed row; the other cases still run
        error = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"side": side, "server": server, "branches": n, "edits": edits, "error": error}
    return json.loads(done.stdout.strip().splitlines()[-1])


def table(rows: list[dict]) -> str:
    head = (f"{'case':<12}{'side':<12}{'lanes':>6}{'answers':>8}{'ans/s':>8}{'steady':>8}"
            f"{'p50 ms':>9}"
            f"{'mean ms':>9}{'p95 ms':>9}{'first s':>9}{'CPU ms':>8}{'PSS MB':>8}"
            f"{'wrong':>6}")  # fmt: skip
    lines = [head, "-" * len(head)]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['server'] + ' x' + str(r['branches']):<12}{r['side']:<12} failed: "
                         f"{r['error'][:120]}")  # fmt: skip
            continue
        lines.append(
            f"{r['server'] + ' x' + str(r['branches']):<12}{r['side']:<12}"
            f"{r.get('lanes', r['branches']):>6}{r['answers']:>8}{r['answers_per_s']:>8.1f}"
            f"{r['steady_per_s']:>8.1f}"
            f"{r['p50_ms']:>9.0f}{r['mean_ms']:>9.0f}{r['p95_ms']:>9.0f}"
            f"{r['first_answer_slowest_s']:>9.2f}{r['cpu_ms_per_answer']:>8.1f}"
            f"{r['peak_pss_mb']:>8.0f}{r['wrong']:>6}"
        )
    return "\n".join(lines)


def ratios(rows: list[dict]) -> list[dict]:
    """Per case: shadowkernel over worktrees (answers/s, p50, first answer, PSS)."""
    out = []
    ok = [r for r in rows if "error" not in r]
    for sk_row in (r for r in ok if r["side"] == "shadowkernel"):
        wt = next((r for r in ok if r["side"] == "worktrees" and r["server"] == sk_row["server"]
                   and r["branches"] == sk_row["branches"]
                   and r.get("round") == sk_row.get("round")), None)  # fmt: skip
        if wt is None:
            continue
        out.append({
            "case": f"{sk_row['server']}:{sk_row['branches']}", "round": sk_row.get("round", 0),
            "answers_per_s": sk_row["answers_per_s"] / wt["answers_per_s"],
            "steady": sk_row["steady_per_s"] / wt["steady_per_s"] if wt["steady_per_s"] else 0.0,
            "p50": sk_row["p50_ms"] / wt["p50_ms"],
            "mean": sk_row["mean_ms"] / wt["mean_ms"],
            "cycle_p50": sk_row["cycle_p50_ms"] / wt["cycle_p50_ms"],
            "edit_mean_ms": (sk_row["edit_mean_ms"], wt["edit_mean_ms"]),
            "cpu_per_answer": sk_row["cpu_ms_per_answer"] / wt["cpu_ms_per_answer"],
            # How far each side's median lies below its mean (1.0: every agent waits alike).
            "spread_sk": sk_row["mean_ms"] / sk_row["p50_ms"],
            "spread_wt": wt["mean_ms"] / wt["p50_ms"],
            "first_answer_speedup": wt["first_answer_slowest_s"] / sk_row["first_answer_slowest_s"],
            # The CPU each side spent until every agent had its first answer: on a machine
            # whose cores both sides fill, the first answer cannot be faster by more than this.
            "first_answers_cpu_s": (sk_row["first_answers_cpu_s"], wt["first_answers_cpu_s"]),
            "first_answers_cpu": wt["first_answers_cpu_s"] / sk_row["first_answers_cpu_s"]
            if sk_row["first_answers_cpu_s"] else 0.0,
            "own_cpu_ms": (sk_row["own_cpu_ms_per_answer"], wt["own_cpu_ms_per_answer"]),
            "servers_cpu_ms": (sk_row["cpu_ms_per_answer"] - sk_row["own_cpu_ms_per_answer"],
                               wt["cpu_ms_per_answer"] - wt["own_cpu_ms_per_answer"]),
            "pss": sk_row["peak_pss_mb"] / wt["peak_pss_mb"],
        })  # fmt: skip
    return out


MEDIAN_OF = ("answers_per_s", "steady", "p50", "cycle_p50", "first_answer_speedup",
             "first_answers_cpu", "pss")  # fmt: skip


def medians(found: list[dict]) -> list[dict]:
    """Per case over its rounds: the median of each ratio in MEDIAN_OF, with its range. This
    machine's speed moves between runs by more than some ratios differ; one round is one
    draw."""
    out = []
    for case in dict.fromkeys(r["case"] for r in found):
        rounds = [r for r in found if r["case"] == case]
        out.append({"case": case, "rounds": len(rounds)} | {
            key: (statistics.median(v), min(v), max(v))
            for key in MEDIAN_OF for v in [[r[key] for r in rounds]]
        })  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--project", default=PROJECT, help="NAME==VERSION of a PyPI sdist")
    parser.add_argument("--cases", default=None, help=f"server:N,... (default {CASES})")
    parser.add_argument("--quick", action="store_true", help=f"cases {QUICK}, 3 edits each")
    parser.add_argument("--file", default=None, help="the module every agent edits (default: "
                        "the project's largest)")  # fmt: skip
    parser.add_argument("--edits", type=int, default=None, help="edits per agent (default 5)")
    parser.add_argument("--lanes", type=int, default=None, help="shadowkernel lanes (default: "
                        "the workspace's own choice)")  # fmt: skip
    parser.add_argument("--memory-state", action="store_true", help="shadowkernel keeps "
                        "branches in memory only (state=None; default: durable, as a "
                        "Workspace opens by default, each staging synced to disk)")  # fmt: skip
    parser.add_argument("--repeat", type=int, default=1, help="rounds of every case, sides "
                        "alternating, ratios paired within a round; medians printed")  # fmt: skip
    parser.add_argument("--answer", choices=("report", "table"), default="report",
                        help="what shadowkernel's agents ask: lint_report_async (records, "
                        "as the worktrees' client answers; default) or lint_async (the "
                        "pandas table built from them)")  # fmt: skip
    parser.add_argument("--loop", choices=("running", "own"), default="running",
                        help="where shadowkernel's services run: the agents' event loop "
                        "(Workspace(loop='running'), as the worktrees' clients do; default) "
                        "or a thread of their own (loop='own', the workspace's default, "
                        "which the synchronous API needs)")  # fmt: skip
    parser.add_argument("--side", help=argparse.SUPPRESS)
    parser.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--server", help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    edits = args.edits or (3 if args.quick else 5)
    if args.side:  # a child: one side of one case
        durable, file = not args.memory_state, args.file or _project.modules(args.root)[0]
        print(json.dumps(run_side(args.side, args.root, file, args.server, args.n, edits,
                                  args.lanes, durable, args.answer, args.loop)))  # fmt: skip
        return
    installed = available_servers()
    load_before = os.getloadavg()
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="sk-worktrees-") as tmp:
        root = prepare(args.project, Path(tmp))
        file = args.file or _project.modules(root)[0]
        spots((root / file).read_text(), file)  # a file with no place for an edit: said now
        cases = (args.cases or (QUICK if args.quick else CASES)).split(",")
        for turn, (round_, case) in enumerate(itertools.product(range(args.repeat), cases)):
            server, _, n = case.partition(":")
            if not installed.get(server):
                print(f"{case}: {server} is not installed, skipped", file=sys.stderr)
                continue
            order: tuple[str, ...] = (("worktrees", "shadowkernel") if turn % 2
                                      else ("shadowkernel", "worktrees"))  # fmt: skip
            if int(n) > MOST_WORKTREES:
                order = ("shadowkernel",)
            for side in order:
                steps = edits if int(n) <= MOST_WORKTREES else min(edits, MANY_EDITS)
                row = child(side, root, file, server, int(n), steps, args.lanes,
                            not args.memory_state, args.answer, args.loop)  # fmt: skip
                rows.append(row | {"round": round_})
                print(f"{case} {side}: {json.dumps(rows[-1])}", file=sys.stderr, flush=True)
    print(
        f"{args.project}, {file}; {edits} edits per agent; load average "
        f"{load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after, {os.cpu_count()} cores; "
        f"shadowkernel's branches {'in memory' if args.memory_state else 'durable'}, "
        f"answers as a {'lint table' if args.answer == 'table' else 'lint report (records)'}, "
        f"services {SERVICES[args.loop]}"
    )
    print(table(rows))
    found = ratios(rows)
    for r in found:
        name = r["case"] + (f" round {r['round'] + 1}" if args.repeat > 1 else "")
        print(
            f"{name}: answers/s {r['answers_per_s']:.2f}x ({r['steady']:.2f}x once every "
            f"agent had its first answer), p50 {r['p50']:.2f}x, mean "
            f"{r['mean']:.2f}x, edit and answer p50 {r['cycle_p50']:.2f}x (the edit "
            f"{r['edit_mean_ms'][0]:.2f} / {r['edit_mean_ms'][1]:.2f} ms), CPU per answer "
            f"{r['cpu_per_answer']:.2f}x, first answer "
            f"{r['first_answer_speedup']:.1f}x faster, PSS {r['pss']:.2f}x of worktrees; "
            f"mean / p50 {r['spread_sk']:.2f} here, {r['spread_wt']:.2f} there"
        )
        print(
            f"{name}: CPU per answer in the side's own process {r['own_cpu_ms'][0]:.2f} / "
            f"{r['own_cpu_ms'][1]:.2f} ms, in its servers {r['servers_cpu_ms'][0]:.2f} / "
            f"{r['servers_cpu_ms'][1]:.2f} ms (shadowkernel / worktrees); CPU until every "
            f"agent had its first answer {r['first_answers_cpu_s'][0]:.2f} / "
            f"{r['first_answers_cpu_s'][1]:.2f} s (the worktrees spent "
            f"{r['first_answers_cpu']:.1f}x as much)"
        )
    middle = medians(found) if args.repeat > 1 else []
    for m in middle:
        spans = (f"{key} {m[key][0]:.2f}x ({m[key][1]:.2f}-{m[key][2]:.2f})" for key in MEDIAN_OF)
        print(f"{m['case']}: median of {m['rounds']} rounds (range): {', '.join(spans)}")
    for r in (r for r in rows if "own_pss_per_branch_kb" in r):
        print(
            f"{r['server']}:{r['branches']}: shadowkernel's own process {r['own_pss_mb']:.0f} MB "
            f"PSS, {r['own_pss_per_branch_kb']:.0f} KB per branch ({r['edits']} versions each); "
            f"its lanes first served {' / '.join(f'{t:.2f}' for t in r['lanes_first_served_s'])} "
            "s after its first request"
        )
    for r in (r for r in rows if "new_column_share" in r):
        print(f"{r['server']}:{r['branches']}: the new column costs {r['new_column_ms']:.2f} ms "
              f"per answer on {file}, {r['new_column_share']:.1%} of a lint's serve time "
              f"(p50 {r['lint_serve_ms']:.1f} ms); {r['new_column_spread_ms']:.1f} ms for a "
              "version edited near both ends")  # fmt: skip
    print(json.dumps({"benchmark": "worktrees", "project": args.project, "file": file,
                      "edits": edits, "load_before": load_before[0],
                      "durable": not args.memory_state, "answer": args.answer, "loop": args.loop,
                      "load_after": os.getloadavg()[0], "repeat": args.repeat, "cases": rows,
                      "ratios": found, "medians": middle}))  # fmt: skip


if __name__ == "__main__":
    main()
