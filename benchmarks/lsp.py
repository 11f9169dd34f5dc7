"""How fast are version-exact diagnostics? The LSP pool, per server, on a real project.

For each installed server, in its own pool over its own temporary copy of a project: for the
Python servers a real library from PyPI (`--project`, default more-itertools 11.2.1, its
5,600-line `more.py` edited; `--project synthetic` for a small generated package), a small
TypeScript project for the TypeScript servers, and the test fixtures for clangd (C, with
compile_commands.json) and gopls (Go, a package of two files):

- first: start the server, sync one staged file, lint it (cold: includes initialize);
- edit p50/p95: stage an edit -> final diagnostics for exactly that text, i.e. the time of
  `pool.sync(...)` (the branch switch of the LSP side) plus `pool.lint(...)` (no quick
  fixes; `fixes` adds one code-action round trip per lint);
- definition p50: `pool.definition` at a call site in the edited file;
- rss: the server's resident memory (with child processes) after the edits;
- anchor: the same kind of edit served the naive way, sync then a fixed 2 s wait then
  collect, and whether that answer matched the exact one.

Prints a table, then as its last line one JSON object with every figure and the targets of
issue 3 (warm p50: ruff <= 10 ms, ty <= 15 ms, pyright <= 120 ms, definition <= 10 ms).
It reports; it never asserts.

    .venv/bin/python benchmarks/lsp.py [--edits N] [--anchors N] [--servers ruff,ty,...]
        [--project NAME==VERSION | synthetic]
"""

from __future__ import annotations

import argparse
import asyncio
import builtins
import json
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _project
import attrs

from shadowkernel.evals.pypi import unpack
from shadowkernel.lsp import LspPool, available_servers, builtin_specs

REQUEST_TIMEOUT = 180.0
FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"
# A project written under a folder: (its root, the edited path, its text, a call site).
Setup = Callable[[Path], tuple[Path, str, str, tuple[int, int]]]

TARGETS_MS = {"ruff": 10.0, "ty": 15.0, "pyright": 120.0}
DEFINITION_TARGET_MS = 10.0


def python_project(root: Path) -> tuple[Path, str, str, tuple[int, int]]:
    """Writes the project; returns (edited path, its text, a call site (line, col))."""
    (root / "pkg").mkdir()
    (root / "pkg/__init__.py").write_text("")
    util = ["from __future__ import annotations\n\n"]
    for i in range(40):
        util.append(f"\ndef helper_{i}(value: int, scale: float = 1.0) -> float:\n"
                    f"    \"\"\"Scale value number {i}.\"\"\"\n"
                    f"    return value * scale + {i}\n\n")  # fmt: skip
    (root / "pkg/util.py").write_text("".join(util))
    mod = ["from pkg.util import helper_1, helper_2\n\n\n", "class Model:\n",
           "    def __init__(self, size: int) -> None:\n        self.size = size\n\n"]  # fmt: skip
    for i in range(60):
        mod.append(f"    def step_{i}(self) -> float:\n"
                   f"        return helper_1(self.size) + helper_2(self.size, {i}.0)\n"
                   "\n")  # fmt: skip
    text = "".join(mod)
    (root / "pkg/mod.py").write_text(text)
    return root, "pkg/mod.py", text, (9, 16)  # `helper_1` in step_0


def pypi_project(spec: str) -> Setup:
    """A real library's sdist, unpacked; the edited file is its largest module."""
    name, _, version = spec.partition("==")

    def setup(folder: Path) -> tuple[Path, str, str, tuple[int, int]]:
        top = unpack(name, version, folder)
        module = _project.modules(top)[0]
        text = (top / module).read_text()
        return top, module, text, call_site(text)

    return setup


def call_site(text: str) -> tuple[int, int]:
    """The first call of a name in code (not a doctest, comment or def): (line, column)."""
    for number, line in enumerate(text.splitlines(), 1):
        code = line.strip()
        if code.startswith((">>>", "#", "def ", "class ", "...")):
            continue
        match = re.search(r"(?<![.\w])([a-z_]\w*)\(", line)
        if match and not hasattr(builtins, match.group(1)):  # the project's own function
            return number, match.start(1) + 1
    return 1, 1


def fixture_project(name: str, path: str, call: tuple[int, int]) -> Setup:
    def setup(folder: Path) -> tuple[Path, str, str, tuple[int, int]]:
        root = folder / name
        shutil.copytree(FIXTURES / name, root)
        return root, path, (root / path).read_text(), call

    return setup


def ts_project(root: Path) -> tuple[Path, str, str, tuple[int, int]]:
    (root / "src").mkdir()
    util = "".join(f"export function helper{i}(v: number): number {{ return v * {i}; }}\n"
                   for i in range(40))  # fmt: skip
    (root / "src/util.ts").write_text(util)
    body = "".join(f"  step{i}(): number {{ return helper1(this.size) + helper2({i}); }}\n"
                   for i in range(60))  # fmt: skip
    text = ("import { helper1, helper2 } from './util';\n\nexport class Model {\n"
            "  constructor(public size: number) {}\n" + body + "}\n")  # fmt: skip
    (root / "src/mod.ts").write_text(text)
    (root / "tsconfig.json").write_text('{"compilerOptions": {"strict": true, "noEmit": true}}')
    return root, "src/mod.ts", text, (5, 33)  # `helper1` in step0


def shell_project(root: Path) -> tuple[Path, str, str, tuple[int, int]]:
    """A script of 40 functions and a call of one (ShellCheck lints what the server says)."""
    functions = "".join(f'step{i}() {{\n  echo "step {i}: $1"\n}}\n\n' for i in range(40))
    text = f"#!/bin/bash\n{functions}step1 start\n"
    (root / "run.sh").write_text(text)
    return root, "run.sh", text, (text.count("\n"), 1)  # the call of `step1`


EDITS = {  # per language: an edit whose diagnostics differ from every other edit's
    "python": lambda text, i: text + f"\nvalue_{i} = undefined_{i}\n",
    "typescript": lambda text, i: text + f"export const value{i} = undefined{i};\n",
    "c": lambda text, i: text + f"int value{i} = undefined{i};\n",
    "go": lambda text, i: text + f"var value{i} = undefined{i}\n",
    "shell": lambda text, i: text + f'echo "$undefined_{i}"\n',  # SC2154, naming the variable
}


def project_for(name: str, python: Setup) -> tuple[Setup, Callable[[str, int], str]]:
    language = builtin_specs()[name].languages[0]
    setups: dict[str, Setup] = {
        "python": python, "typescript": ts_project,
        "c": fixture_project("c_project", "src/main.c", (4, 17)),
        "go": fixture_project("go_project", "greet/hello.go", (4, 42)),
        "shell": shell_project,
    }  # fmt: skip
    return setups[language], EDITS[language]


def ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def bench_server(name: str, edits: int, anchors: int, python: Setup) -> dict[str, Any]:
    setup, change = project_for(name, python)
    with tempfile.TemporaryDirectory(prefix=f"sk-lsp-{name}-") as tmp:
        root, path, base, (line, col) = setup(Path(tmp))
        # A real library's largest module: a type checker's first answer may take long.
        spec = attrs.evolve(builtin_specs()[name], request_timeout=REQUEST_TIMEOUT)
        async with LspPool(root, [spec]) as pool:
            started = time.perf_counter()
            await pool.sync({path: change(base, 0)}, [])
            first = await pool.lint([path], fixes=False)
            first_s = time.perf_counter() - started

            times, answers = [], []
            for i in range(1, edits + 1):
                started = time.perf_counter()
                await pool.sync({path: change(base, i)}, [])
                answers.append(await pool.lint([path], fixes=False))
                times.append(time.perf_counter() - started)

            definition_times, target = [], None
            for _ in range(edits):
                started = time.perf_counter()
                try:
                    found = await pool.definition(path, line, col)
                except LookupError:  # the server offers no definition (ruff)
                    break
                definition_times.append(time.perf_counter() - started)
                target = found[0] if found else None

            rss = pool.statistics()[name].rss
            anchor_times, anchor_right = [], 0
            for i in range(edits + 1, edits + 1 + anchors):
                text = change(base, i)
                await pool.sync({path: text}, [])
                exact = await pool.lint([path], fixes=False)
                await pool.sync({path: base}, [])  # back, then the naive way
                started = time.perf_counter()
                await pool.sync({path: text}, [])
                await asyncio.sleep(2.0)  # the anchor: a fixed wait, as naive clients do
                naive = await pool.lint([path], fixes=False)
                anchor_times.append(time.perf_counter() - started)
                anchor_right += naive == exact

    distinct = len({tuple(a) for a in answers})
    return {
        "server": name,
        "file": f"{root.name}/{path}",
        "first_ms": ms(first_s),
        "first_lints": len(first),
        "edit_p50_ms": ms(statistics.median(times)),
        "edit_p95_ms": ms(percentile(times, 0.95)),
        "distinct_answers": distinct,
        "edits": edits,
        "definition_p50_ms": ms(statistics.median(definition_times)) if definition_times else None,
        "definition_target": f"{target.path}:{target.line}:{target.column}" if target else None,
        "rss_mb": round(rss / 2**20, 1),
        "anchor_2s_p50_ms": ms(statistics.median(anchor_times)) if anchor_times else None,
        "anchor_correct": f"{anchor_right}/{anchors}",
    }


def verdicts(rows: list[dict[str, Any]]) -> dict[str, Any]:
    found = {}
    for row in rows:
        if row["server"] in TARGETS_MS:
            found[f"{row['server']}_edit_p50"] = {
                "target_ms": TARGETS_MS[row["server"]], "ms": row["edit_p50_ms"],
                "pass": row["edit_p50_ms"] <= TARGETS_MS[row["server"]]}  # fmt: skip
        if row["definition_p50_ms"] is not None:
            found[f"{row['server']}_definition_p50"] = {
                "target_ms": DEFINITION_TARGET_MS, "ms": row["definition_p50_ms"],
                "pass": row["definition_p50_ms"] <= DEFINITION_TARGET_MS}  # fmt: skip
    return found


def table(rows: list[dict[str, Any]]) -> str:
    columns = ["server", "file", "first_ms", "edit_p50_ms", "edit_p95_ms", "distinct_answers",
               "definition_p50_ms", "rss_mb", "anchor_2s_p50_ms", "anchor_correct"]  # fmt: skip
    widths = {c: max(len(c), *(len(str(r.get(c))) for r in rows)) for c in columns}
    lines = ["  ".join(c.ljust(widths[c]) for c in columns)]
    lines += ["  ".join(str(r.get(c)).ljust(widths[c]) for c in columns) for r in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--edits", type=int, default=30)
    parser.add_argument("--anchors", type=int, default=2)
    parser.add_argument("--servers", default="")
    parser.add_argument(
        "--project",
        default="more-itertools==11.2.1",
        help="Python servers' project: NAME==VERSION from PyPI, or synthetic",
    )
    args = parser.parse_args()
    python = python_project if args.project == "synthetic" else pypi_project(args.project)
    installed = available_servers()
    names = [s for s in args.servers.split(",") if s] or [n for n, ok in installed.items() if ok]
    skipped = {n: "not installed" for n, ok in installed.items() if not ok and n in names}
    rows = []
    for name in names:
        if name in skipped:
            continue
        print(f"benchmarking {name} ...", file=sys.stderr, flush=True)
        try:
            rows.append(asyncio.run(bench_server(name, args.edits, args.anchors, python)))
        except Exception as error:  # report and go on with the other servers
            skipped[name] = f"{type(error).__name__}: {error}"
    print(table(rows))
    for name, why in skipped.items():
        print(f"skipped {name}: {why}")
    print(json.dumps({"benchmark": "lsp", "edits": args.edits, "project": args.project,
                      "servers": rows,
                      "targets": verdicts(rows), "skipped": skipped}))  # fmt: skip


if __name__ == "__main__":
    main()
