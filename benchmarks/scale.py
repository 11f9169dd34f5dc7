"""A big real project: sympy 1.13.3 (~1,500 Python files, its own tests), each step through
shadowkernel beside the same step done natively.

    .venv/bin/python benchmarks/scale.py [--reps 2] [--branches 4]    # about 4-8 minutes

The sdists of sympy and mpmath (sympy's one dependency, put on PYTHONPATH) come from PyPI
through `evals/pypi.py` (cached); sympy is made a git repository, as a user's checkout is.
Native steps work in `git worktree` checkouts of it. Each row runs once per side per
repetition, alternating which side goes first (the machine is shared: read the CPU columns
beside the wall ones):

- fork: `Workspace(...)` opened with ruff and N branches made; natively `git worktree add` of
  N checkouts.
- ruff lint: `lint([file])` of an edited deep module (warm server); natively `ruff check FILE`.
- type check, first: each branch's first `lint()` of its own edited deep module with
  basedpyright on one lane (the branch, and its base for the `new` column); natively one
  basedpyright server at a checkout, each module opened edited and checked, as an editor does.
- type check, again: the same lints, or checks, again.
- run tests: `run()` of pytest on one test file; natively the same command in a checkout.
- runs at once: the N branches' runs together (`max_runs` at a time); natively N pytest
  processes in N checkouts together.
- review: `diff()`, `merge_check` and `accept()` into a copy; natively `git diff` and
  `git apply` into a copy.

CPU is this process's own with its reaped children's (git, ruff) where a row runs
subprocesses, plus the language server's process tree (`LanguageClient.cpu_seconds`) for the
type checks, plus the pytest processes' (`/usr/bin/time` inside the command) for runs. The
JSON last line holds every row's samples.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import shadowkernel as sk
from shadowkernel.evals import pypi
from shadowkernel.lsp import LspPool

DEEP = [
    "sympy/polys/domains/finitefield.py",
    "sympy/physics/quantum/spin.py",
    "sympy/core/basic.py",
    "sympy/combinatorics/permutations.py",
    "sympy/sets/sets.py",
    "sympy/matrices/dense.py",
]
TESTS = [
    "sympy/core/tests/test_basic.py",
    "sympy/physics/quantum/tests/test_spin.py",
    "sympy/polys/domains/tests/test_domains.py",
    "sympy/combinatorics/tests/test_permutations.py",
    "sympy/sets/tests/test_conditionset.py",
    "sympy/matrices/tests/test_interactions.py",
]
PYTEST = (
    "export PYTHONPATH={dep}; /usr/bin/time -f 'CPU %U %S' {python} -m pytest -q -p no:randomly "
    "-p no:cacheprovider {test} 2>&1 | tail -2"
)


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def with_children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own_cpu() + usage.ru_utime + usage.ru_stime


def timed(
    call: Callable[[], Any], cpu_of: Callable[[], float] = own_cpu
) -> tuple[float, float, Any]:
    """(wall seconds, CPU seconds as `cpu_of` counts them, result)."""
    wall, cpu = time.perf_counter(), cpu_of()
    result = call()
    return time.perf_counter() - wall, cpu_of() - cpu, result


def reported_cpu(output: str) -> float:
    """The CPU seconds `/usr/bin/time -f 'CPU %U %S'` printed in `output`."""
    for line in output.splitlines():
        if line.startswith("CPU "):
            user, system = line.split()[1:3]
            return float(user) + float(system)
    raise RuntimeError(f"no CPU line in the run's output: {output[-300:]!r}")


def edited(text: str, i: int) -> str:
    return text + f"\n\ndef _added_{i}(x: int) -> str:\n    import os\n    return x + {i}\n"


class Bench:
    def __init__(self, root: Path, dep: Path, scratch: Path, branches: int) -> None:
        self.root, self.dep, self.scratch, self.n = root, dep, scratch, branches
        self.samples: dict[str, dict[str, list[tuple[float, float]]]] = {}

    def add(self, row: str, side: str, wall: float, cpu: float) -> None:
        self.samples.setdefault(row, {}).setdefault(side, []).append((wall, cpu))

    def pytest(self, i: int) -> str:
        test = TESTS[i % len(TESTS)]
        return PYTEST.format(dep=self.dep, python=sys.executable, test=test)

    # -- one repetition of each side ---------------------------------------------------------

    def shadow_side(self, rep: int) -> None:
        state = self.scratch / f"state-{rep}"
        wall, cpu, ws = timed(lambda: self._open(state), with_children_cpu)
        self.add("fork", "shadowkernel", wall, cpu)
        try:
            branches = list(ws.branches.values())
            for i, branch in enumerate(branches):
                path = DEEP[i % len(DEEP)]
                branch.write(path, edited(branch.read(path), i))
            branches[0].lint([DEEP[0]])  # the server is up
            wall, cpu, _ = timed(lambda: branches[1].lint([DEEP[1]]))
            self.add("ruff lint", "shadowkernel", wall, cpu)
            self._shadow_runs(branches)
            wall, cpu, _ = timed(lambda: self._review(ws, branches), with_children_cpu)
            self.add("review", "shadowkernel", wall, cpu)
        finally:
            ws.close()
        self._shadow_types(state, rep)

    def _open(self, state: Path) -> sk.Workspace:
        ws = sk.Workspace(self.root, servers=["ruff"], state=state)
        for i in range(self.n):
            ws.branch(f"b{i}")
        return ws

    def _shadow_runs(self, branches: list[sk.Branch]) -> None:
        wall, cpu, result = timed(lambda: branches[0].run(self.pytest(0), timeout=900))
        self.add("run tests", "shadowkernel", wall, cpu + reported_cpu(result.stdout))
        with ThreadPoolExecutor(self.n) as pool:

            def run(i: int) -> Any:
                return branches[i].run(self.pytest(i), timeout=900)

            wall, cpu, results = timed(lambda: list(pool.map(run, range(self.n))))
        self.add("runs at once", "shadowkernel", wall,
                 cpu + sum(reported_cpu(r.stdout) for r in results))  # fmt: skip

    def _review(self, ws: sk.Workspace, branches: list[sk.Branch]) -> None:
        branches[0].diff()
        ws.merge_check(branches[0], branches[1]).drop()
        copy = self.scratch / "accepted"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(self.root, copy, symlinks=True)
        with sk.Workspace(copy, servers=[], state=None) as other:
            mine = other.branch("b0")
            mine.write(DEEP[0], branches[0].read(DEEP[0]))
            mine.accept()

    def _shadow_types(self, state: Path, rep: int) -> None:
        ws = sk.Workspace(self.root, servers=["basedpyright"], lanes=1, state=None)
        try:
            branches = [ws.branch(f"t{i}") for i in range(self.n)]
            for i, branch in enumerate(branches):
                path = DEEP[i % len(DEEP)]
                branch.write(path, edited(branch.read(path), i))
            ws.branch("warm").lint(["setup.py"])  # the server is up
            (lane,) = ws._scheduler.lanes
            server = lane.pool.client("basedpyright")
            for row in ("type check, first", "type check, again"):
                before = server.cpu_seconds()
                wall, cpu, _ = timed(lambda: [b.lint() for b in branches])
                self.add(row, "shadowkernel", wall, cpu + server.cpu_seconds() - before)
        finally:
            ws.close()

    def native_side(self, rep: int) -> None:
        trees = [self.scratch / f"tree-{rep}-{i}" for i in range(self.n)]
        wall, cpu, _ = timed(lambda: [self._git("worktree", "add", "-q", str(t)) for t in trees],
                             with_children_cpu)  # fmt: skip
        self.add("fork", "native", wall, cpu)
        try:
            for i, tree in enumerate(trees):
                path = tree / DEEP[i % len(DEEP)]
                path.write_text(edited(path.read_text(), i))
            ruff = str(Path(sys.executable).parent / "ruff")
            check = [ruff, "check", "-q", DEEP[1]]
            wall, cpu, _ = timed(lambda: subprocess.run(check, cwd=trees[1], capture_output=True),
                                 with_children_cpu)  # fmt: skip
            self.add("ruff lint", "native", wall, cpu)
            self._native_runs(trees)
            wall, cpu, _ = timed(lambda: self._native_review(trees), with_children_cpu)
            self.add("review", "native", wall, cpu)
            asyncio.run(self._native_types(trees[0]))
        finally:
            for tree in trees:
                self._git("worktree", "remove", "--force", str(tree))

    def _native_runs(self, trees: list[Path]) -> None:
        def run(i: int) -> str:
            done = subprocess.run(["bash", "-c", self.pytest(i)], cwd=trees[i],
                                  capture_output=True, text=True, timeout=900)  # fmt: skip
            return done.stdout

        wall, cpu, out = timed(lambda: run(0))
        self.add("run tests", "native", wall, cpu + reported_cpu(out))
        with ThreadPoolExecutor(self.n) as pool:
            wall, cpu, outs = timed(lambda: list(pool.map(run, range(self.n))))
        self.add("runs at once", "native", wall, cpu + sum(reported_cpu(o) for o in outs))

    def _native_review(self, trees: list[Path]) -> None:
        diff = subprocess.run(["git", "diff"], cwd=trees[0], capture_output=True, check=True)
        copy = self.scratch / "accepted-native"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(self.root, copy, symlinks=True)
        subprocess.run(["git", "apply"], cwd=copy, input=diff.stdout, check=True)

    async def _native_types(self, tree: Path) -> None:
        """An editor: one basedpyright at the checkout, each module opened edited, checked."""
        pool = LspPool(tree, ["basedpyright"], project=tree)
        try:
            await pool.sync({}, [])
            await pool.lint(["setup.py"])
            server = pool.client("basedpyright")
            assert server is not None
            for row in ("type check, first", "type check, again"):
                before, wall, cpu = server.cpu_seconds(), time.perf_counter(), own_cpu()
                for i in range(self.n):
                    path = DEEP[i % len(DEEP)]
                    await pool.sync({path: edited((tree / path).read_text(), i)}, [])
                    await pool.lint()
                self.add(row, "native", time.perf_counter() - wall,
                         own_cpu() - cpu + server.cpu_seconds() - before)  # fmt: skip
        finally:
            await pool.close()

    def _git(self, *args: str) -> None:
        subprocess.run(["git", "-C", str(self.root), *args], check=True, capture_output=True)


def checkout(into: Path) -> tuple[Path, Path]:
    """sympy as a git repository, and mpmath's source folder (for PYTHONPATH)."""
    root = pypi.unpack("sympy", "1.13.3", into / "src")
    dep = pypi.unpack("mpmath", "1.3.0", into / "dep")
    env = {**os.environ, "GIT_AUTHOR_NAME": "u", "GIT_AUTHOR_EMAIL": "u@example.com",
           "GIT_COMMITTER_NAME": "u", "GIT_COMMITTER_EMAIL": "u@example.com"}  # fmt: skip
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "sympy 1.13.3"]):
        subprocess.run(["git", *args], cwd=root, env=env, check=True)
    return root, dep


def table(samples: dict[str, dict[str, list[tuple[float, float]]]]) -> None:
    print(f"{'step':<20} {'shadow wall':>11} {'native wall':>11} {'shadow cpu':>10} "
          f"{'native cpu':>10} {'cpu ratio':>9}")  # fmt: skip
    for row, sides in samples.items():
        shadow, native = sides.get("shadowkernel", []), sides.get("native", [])
        if not (shadow and native):
            continue
        sw, nw = (statistics.median(s[0] for s in x) for x in (shadow, native))
        sc, nc = (statistics.median(s[1] for s in x) for x in (shadow, native))
        ratio = sc / nc if nc else float("nan")
        print(f"{row:<20} {sw:>10.2f}s {nw:>10.2f}s {sc:>9.2f}s {nc:>9.2f}s {ratio:>9.2f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--branches", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="shadowkernel-scale-") as folder:
        os.environ.setdefault("XDG_STATE_HOME", os.path.join(folder, "xdg-state"))
        root, dep = checkout(Path(folder))
        bench = Bench(root, dep, Path(folder), args.branches)
        load = [os.getloadavg()[0]]
        for rep in range(args.reps):
            sides = [bench.shadow_side, bench.native_side]
            for side in sides if rep % 2 == 0 else sides[::-1]:
                side(rep)
        load.append(os.getloadavg()[0])
    table(bench.samples)
    print(json.dumps({"project": "sympy 1.13.3", "branches": args.branches, "reps": args.reps,
                      "load": load, "samples": bench.samples}))  # fmt: skip


if __name__ == "__main__":
    main()
