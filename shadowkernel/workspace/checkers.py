"""Disk-bound checkers as lint sources: mypy, tsc, go vet, cargo run sandboxed at a version.

`Workspace(servers=["ruff", "mypy"])`: "mypy" names no language server but a checker
(lsp/checkers.py: its command, the files it reads, its parser). A lint of a branch runs it as
a sandboxed, offline run (run/) on the branch's exact version (not its scratch layer), and on
the branch's base for the `new` column. Rows are cached per content of the files the checker
reads (the user's files by size and modification time, the staged ones by digest), so a
lint that changed none of them costs no run. Rows are those of the lint's paths, like every
other lint source.

Caveat: a checker reads the whole project, so one run costs what the tool costs on it
(seconds for mypy on a mid-sized package); its rows arrive with the language servers' ones.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import weakref
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ..errors import RunError, ServerError
from ..lsp import Lint, mark_new
from ..lsp.checkers import CHECKERS, Checker, checker_argv
from ..lsp.documents import matches
from ..lsp.lints import sort_key
from ..lsp.specs import find_program
from ..overlay.store import Manifest
from ..paths import RelPath
from ..run import RunResult, run_in_shadow
from ..sched import Answer, Lane
from .staging import digest

if TYPE_CHECKING:
    from .branch import Branch
    from .workspace import Workspace

TIMEOUT = 300.0  # seconds one checker run may take
_SKIP = {".git", ".hg", ".svn", ".jj", "__pycache__", ".mypy_cache", ".ruff_cache",
         ".pytest_cache", ".tox", ".nox", ".venv", "venv", "node_modules", ".cache",
         "target"}  # fmt: skip
_CACHES: weakref.WeakKeyDictionary[Workspace, dict[str, tuple[Lint, ...]]] = (
    weakref.WeakKeyDictionary()
)


def chosen(
    servers: Sequence[str] | None, configured: Sequence[str]
) -> tuple[list[str] | None, list[str]]:
    """(the language servers asked, the checkers asked) of a lint's `servers=`."""
    if servers is None:
        return None, list(configured)
    names = [s for s in servers if s in CHECKERS and s in configured]
    return [s for s in servers if s not in names], names


async def rows(
    branch: Branch, number: int, views: tuple[Manifest, Manifest],
    touched: tuple[Mapping[RelPath, bytes | None], Mapping[RelPath, bytes | None]],
    targets: Sequence[RelPath], names: Sequence[str],
) -> tuple[list[Lint], list[bool]]:  # fmt: skip
    """Rows of checkers `names` for `targets` at the version (`views[0]`, staged files
    `touched[0]`) and the `new` flag of each, against the base (`views[1]`, `touched[1]`)."""
    lints: list[Lint] = []
    flags: list[bool] = []
    wanted = set(targets)
    texts = [{p: _text(d) for p, d in files.items() if d is not None} for files in touched]
    for name in names:
        checker = CHECKERS[name]
        now = await _checked(branch, number, checker, views[0], touched[0])
        base = await _checked(branch, number, checker, views[1], touched[1])
        found = [lint for lint in now if lint.path in wanted]
        lints += found
        flags += mark_new(found, [b for b in base if b.path in wanted], texts[1], texts[0])
    pairs = sorted(zip(lints, flags, strict=True), key=lambda pair: sort_key(pair[0]))
    return [lint for lint, _ in pairs], [flag for _, flag in pairs]


async def _checked(
    branch: Branch, number: int, checker: Checker, manifest: Manifest,
    touched: Mapping[RelPath, bytes | None],
) -> tuple[Lint, ...]:  # fmt: skip
    """The checker's rows for one view, from the cache or from a run."""
    workspace = branch.workspace
    cache = _CACHES.setdefault(workspace, {})
    key = await asyncio.to_thread(reads_key, workspace.root, checker, touched)
    if key not in cache:
        result = await _run(
            branch, number, manifest, _command(checker, workspace.root, touched), checker.name
        )
        cache[key] = tuple(_parse(checker, result, _roots(workspace)))
    return cache[key]


async def _run(
    branch: Branch, number: int, manifest: Manifest, argv: list[str], name: str
) -> RunResult:
    """The one call into the run machinery (kept narrow: runs are becoming concurrent)."""

    async def job(lane: Lane) -> Answer[RunResult]:
        result = await asyncio.to_thread(run_in_shadow, lane.shadow, manifest, argv,
                                         timeout=TIMEOUT, network=False)  # fmt: skip
        return Answer(result, f"{name}: exit {result.exit_code}", exit_code=result.exit_code)

    result: RunResult = await branch.workspace.submit(branch, number, "run", f"check {name}", job)
    return result


def _command(checker: Checker, root: str, touched: Mapping[RelPath, bytes | None]) -> list[str]:
    """The checker's command line; tsc without a tsconfig.json in the view is given the
    view's .ts files (the folder's, with the view's own created and deleted ones)."""
    program = find_program(checker.argv[0], checker.search)
    if program is None:
        raise ServerError(f"checker {checker.name!r} is not installed ({checker.argv[0]!r} not "
                          f"found). To install it: {checker.install}")  # fmt: skip
    if checker.name != "tsc" or _in_view(root, touched, "tsconfig.json"):
        return checker_argv(checker, program)
    files = {p: "" for p in _listing(root, ("*.ts",))} | {
        p: "" for p in touched if matches(p, ("*.ts",))
    }
    return checker_argv(checker, program, sorted(p for p in files if _in_view(root, touched, p)))


def _in_view(root: str, touched: Mapping[RelPath, bytes | None], path: str) -> bool:
    if path in touched:
        return touched[path] is not None  # type: ignore[index]
    return os.path.exists(os.path.join(root, path))


def _parse(checker: Checker, result: RunResult, roots: Sequence[str]) -> list[Lint]:
    if result.timed_out or result.exit_code not in checker.ok_codes:
        how = "timed out" if result.timed_out else f"failed with exit code {result.exit_code}"
        tail = (result.stderr or result.stdout).strip()[-800:]
        raise RunError(f"checker {checker.name!r} {how}: {tail}")
    return checker.parse(result.stderr if checker.stream == "stderr" else result.stdout, roots)


def _roots(workspace: Workspace) -> list[str]:
    """Where a run may have seen the project: the user's path, or a shadow's mountpoint."""
    return [workspace.root, *(os.fspath(s.mountpoint) for s in workspace.shadows)]


def reads_key(root: str, checker: Checker, touched: Mapping[RelPath, bytes | None]) -> str:
    """A key for the content of the files `checker` reads in a view: the user's files by
    size and modification time, overlaid with the view's `touched` files by digest."""
    listing: dict[str, str | None] = dict(_listing(root, checker.reads))
    for path, data in touched.items():
        if matches(path, checker.reads):
            listing[path] = None if data is None else digest(data)
    h = hashlib.sha256(checker.name.encode())
    for name in sorted(p for p, v in listing.items() if v is not None):
        h.update(f"{name}\0{listing[name]}\n".encode())
    return h.hexdigest()


def _listing(root: str, patterns: tuple[str, ...]) -> dict[str, str]:
    found = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in _SKIP]
        for name in files:
            if matches(name, patterns):
                full = os.path.join(folder, name)
                try:
                    stat = os.stat(full)
                except OSError:
                    continue
                found[os.path.relpath(full, root)] = f"{stat.st_size}:{stat.st_mtime_ns}"
    return found


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")
