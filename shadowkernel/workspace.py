"""The public API: a `Workspace` over the user's folder and its `Branch`es.

    with sk.Workspace("project", servers=["ruff"]) as ws:
        a = ws.branch("a")
        a.replace("pkg/mod.py", "return a + b", "return a - b")
        a.lint(new_only=True)            # LintTable (pandas), 1-based positions
        a.accept()                       # the only call that writes the user's folder

A branch is a chain of immutable versions; each version maps every path the branch touched to
its bytes (None: deleted) and carries the manifest the shadow shows for it. Requests (lint,
navigation, run) go through the scheduler on the workspace's event loop thread; the public
methods are synchronous and thread-safe, and each has an awaitable `*_async` twin.

Caveats: base lints (for the `new` column) are cached per path and base content, so a lint a
base file had only because of *another* file's content is attributed as if that file had its
base content too. A branch reads untouched files live from the user's folder (that is the
overlay's view), so they can change under it; accept() guards only the files it touched.
Only FUSE mode exists so far (no in-memory fallback).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import hashlib
import html
import itertools
import os
import stat
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TypeVar

import pandas as pd

from . import edits
from .errors import ConflictError, NotFound, PathError, ShadowError, StagingError
from .lsp import Lint, LspPool, lint_table, mark_new
from .lsp.navigation import Hover, Location
from .merge import merge3
from .overlay.shadow import Shadow
from .overlay.store import (
    DEFAULT_MEMORY_BUDGET,
    WHITEOUT,
    Blob,
    BlobStore,
    Dir,
    File,
    Manifest,
    Override,
    freeze,
)
from .paths import RelPath, parent, rel
from .run import RunResult, run_in_shadow
from .sched import Lane, Policy, Scheduler, Timeline, View

T = TypeVar("T")

LintTable = pd.DataFrame  # columns: lsp.COLUMNS; attrs: branch, version


@dataclass(frozen=True)
class Version:
    """One immutable state of a branch."""

    number: int
    files: Mapping[RelPath, bytes | None]  # every touched path -> bytes (None: deleted)
    manifest: Manifest  # what the shadow shows for it
    op: str  # what made it: "fork", "write pkg/mod.py", "patch (2 files)", ...


@dataclass(frozen=True)
class Accepted:
    """What accept() did to the user's folder."""

    written: tuple[RelPath, ...]
    deleted: tuple[RelPath, ...]
    merged: tuple[RelPath, ...]  # written with the user's own changes merged in


class Diff(str):
    """Unified diff text that shows coloured in a notebook."""

    def _repr_html_(self) -> str:
        colors = {"+": "#e6ffec", "-": "#ffebe9", "@": "#ddf4ff"}
        rows = []
        for line in self.splitlines():
            color = colors.get(line[:1], "") if not line.startswith(("+++", "---")) else ""
            style = f' style="background:{color}"' if color else ""
            rows.append(f"<div{style}>{html.escape(line) or '&nbsp;'}</div>")
        body = "".join(rows) or "<i>no changes</i>"
        return f'<pre style="font-size:12px;line-height:1.3">{body}</pre>'


# -- the event loop thread ------------------------------------------------------------------------


class _LoopThread:
    """One asyncio loop in a daemon thread: where shadow services live (DESIGN: process model)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(
            target=self.loop.run_forever, name="shadowkernel-loop", daemon=True
        )
        self.thread.start()

    def call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        if threading.current_thread() is self.thread:
            coroutine.close()
            raise RuntimeError("called the synchronous API from the workspace's own loop; "
                               "use the *_async methods there")  # fmt: skip
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # e.g. KeyboardInterrupt in the caller: stop waiting on our side too
            raise

    async def call_async(self, coroutine: Coroutine[Any, Any, T]) -> T:
        if asyncio.get_running_loop() is self.loop:
            return await coroutine
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coroutine, self.loop))

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        if not self.thread.is_alive():
            self.loop.close()


# -- the workspace ------------------------------------------------------------------------------

_OPEN: weakref.WeakSet[Workspace] = weakref.WeakSet()


def open_workspaces() -> list[Workspace]:
    """Every workspace of this process that is not closed yet (the kernel closes them all)."""
    return list(_OPEN)


@atexit.register
def _close_open_workspaces() -> None:
    # At exit, while the loop threads still run: a __del__ during interpreter teardown
    # would wait on a loop thread that is already gone.
    for workspace in open_workspaces():
        with contextlib.suppress(Exception):
            workspace.close()


class Workspace:
    """The user's folder, its shadow(s) and the branches staged on top of it."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        servers: Sequence[Any] = ("ruff",),
        *,
        lanes: int = 1,
        policy: Policy = "round-robin",
        batch: int = 8,
        idle_timeout: float = 900,
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
    ) -> None:
        self.root = os.path.realpath(path)
        if not os.path.isdir(self.root):
            raise PathError(f"path {os.fspath(path)!r} is not a directory")
        if lanes < 1:
            raise ValueError(f"lanes={lanes}: give at least 1")
        self.servers = tuple(servers)
        self.mode = "fuse"
        self._origin = time.perf_counter()
        self._store = BlobStore(memory_budget)
        self._shadows: list[Shadow] = []
        self._loop = _LoopThread()
        self._branches: dict[str, Branch] = {}
        self._lock = threading.Lock()
        self._base_blobs: dict[tuple[RelPath, str], Blob] = {}
        self._base_lints: dict[tuple[str, RelPath, str], tuple[Lint, ...]] = {}
        self._ids = itertools.count(1)
        self._closed = False
        try:
            self._shadows = [Shadow(self.root, store=self._store) for _ in range(lanes)]
            self._scheduler = self._loop.call(self._start(policy, batch, idle_timeout))
        except BaseException:
            self.close()
            raise
        _OPEN.add(self)

    async def _start(self, policy: Policy, batch: int, idle_timeout: float) -> Scheduler:
        threaded = len(self._shadows) > 1
        lanes = [
            Lane(i, shadow, LspPool(shadow.mountpoint, self.servers, idle_timeout), threaded)
            for i, shadow in enumerate(self._shadows)
        ]
        scheduler = Scheduler(lanes, policy, batch, origin=self._origin)
        scheduler.start()
        return scheduler

    # -- branches --------------------------------------------------------------------------

    def branch(self, name: str) -> Branch:
        """A new branch forked from the user's current files."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"name={name!r}: give a non-empty string")
        with self._lock:
            self._check_open()
            if name in self._branches:
                raise ShadowError(f"branch {name!r} exists; use ws.branches[{name!r}] or "
                                  "drop() it first")  # fmt: skip
            branch = Branch(self, name, next(self._ids))
            self._branches[name] = branch
        return branch

    @property
    def branches(self) -> Mapping[str, Branch]:
        return MappingProxyType(dict(self._branches))

    def _forget(self, branch: Branch) -> None:
        with self._lock:
            if self._branches.get(branch.name) is branch:
                del self._branches[branch.name]

    # -- the timeline ------------------------------------------------------------------------

    def timeline(self, title: str = "shadow timeline") -> Timeline:
        """Every request served so far, with switch/serve times and per-branch waits."""
        return Timeline(list(self._scheduler.events), title=title)

    def statistics(self) -> dict[str, Any]:
        return {
            "lanes": len(self._shadows),
            "queued": len(self._scheduler.queue),
            "branches": len(self._branches),
            "base_lints_cached": len(self._base_lints),
            "servers": [lane.pool.statistics() for lane in self._scheduler.lanes],
        }

    # -- lifecycle ----------------------------------------------------------------------------

    def close(self) -> None:
        """Stop servers, unmount the shadows. Nothing is written to the user's folder."""
        if self._closed:
            return
        self._closed = True
        _OPEN.discard(self)
        scheduler = getattr(self, "_scheduler", None)
        if scheduler is not None:
            with contextlib.suppress(Exception):
                self._loop.call(self._shutdown(scheduler))
        self._loop.stop()
        for shadow in self._shadows:
            with contextlib.suppress(Exception):
                shadow.close()
        self._store.close()

    async def _shutdown(self, scheduler: Scheduler) -> None:
        await scheduler.close()
        await asyncio.gather(*(lane.pool.close() for lane in scheduler.lanes),
                             return_exceptions=True)  # fmt: skip

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            if not self._closed and not sys.is_finalizing():
                self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._branches)} branches"
        return f"<Workspace {self.root} ({self.mode}, {len(self._shadows)} lanes, {state})>"

    def _check_open(self) -> None:
        if self._closed:
            raise ShadowError("this Workspace is closed; open a new one")

    # -- the user's folder (read-only except in accept) ------------------------------------------

    def _user_path(self, path: RelPath) -> str:
        """Absolute path of `path` in the user's folder; PathError if a symlink leads out."""
        full = os.path.join(self.root, path)
        above = os.path.realpath(os.path.dirname(full))
        if above != self.root and not above.startswith(self.root + "/"):
            raise PathError(f"path {path!r} leads out of the workspace through a symlink "
                            f"(its folder resolves to {above})")  # fmt: skip
        return full

    def _read_user(self, path: RelPath) -> tuple[bytes | None, int]:
        """(bytes or None when absent, mode) of a file in the user's folder."""
        full = self._user_path(path)
        try:
            st = os.lstat(full)
        except (FileNotFoundError, NotADirectoryError):
            return None, 0o644
        if stat.S_ISLNK(st.st_mode):
            raise StagingError(f"{path}: is a symlink in the workspace; stage the file it points "
                               "to instead")  # fmt: skip
        if not stat.S_ISREG(st.st_mode):
            raise StagingError(f"{path}: is not a regular file (a directory?); stage files")
        with open(full, "rb") as f:
            return f.read(), stat.S_IMODE(st.st_mode)

    def _user_dir_exists(self, path: RelPath) -> bool:
        return os.path.isdir(os.path.join(self.root, path))

    def _base_blob(self, path: RelPath, data: bytes) -> Blob:
        """One blob per (path, base content), shared by branches, so base views match."""
        key = (path, _digest(data))
        with self._lock:
            blob = self._base_blobs.get(key)
            if blob is None:
                blob = self._base_blobs[key] = self._store.make(data)
        return blob

    async def _submit(self, branch: Branch, version: int, kind: Any, op: str, job: Any) -> Any:
        self._check_open()
        return await self._scheduler.submit(branch.name, version, kind, op, job)


def _digest(data: bytes | None) -> str:
    return "-" if data is None else hashlib.blake2b(data, digest_size=16).hexdigest()


# -- branches -------------------------------------------------------------------------------------


class Branch:
    """A private line of edits on top of the user's folder. Create with `ws.branch(name)`."""

    def __init__(self, workspace: Workspace, name: str, uid: int) -> None:
        self.workspace = workspace
        self.name = name
        self._uid = uid  # names can be reused after drop(); view keys must not be
        self._lock = threading.RLock()
        self._bases: dict[RelPath, bytes | None] = {}
        self._modes: dict[RelPath, int] = {}
        self._versions: list[Version] = [Version(0, MappingProxyType({}), freeze({}), "fork")]
        self._scratch: dict[RelPath, Override] = {}  # what runs wrote; runs only
        self._scratch_generation = 0
        self._state = "open"

    # -- versions -------------------------------------------------------------------------------

    @property
    def version(self) -> int:
        return self._versions[-1].number

    @property
    def versions(self) -> tuple[Version, ...]:
        return tuple(self._versions)

    @property
    def files(self) -> Mapping[RelPath, bytes | None]:
        """Every path this branch touched at its current version (None: deleted)."""
        return self._versions[-1].files

    @property
    def bases(self) -> Mapping[RelPath, bytes | None]:
        """The user's bytes of each touched path when the branch first touched it."""
        with self._lock:
            return MappingProxyType(dict(self._bases))

    def read(self, path: str) -> str:
        """The branch's current text of `path` (staged, or the user's file)."""
        target = rel(path)
        text = self._current_text(self._versions[-1], target)
        if text is None:
            raise NotFound(f"path {target!r} does not exist in branch {self.name!r}")
        return text

    # -- staging ----------------------------------------------------------------------------------

    def write(self, path: str, text: str) -> int:
        """Stage the full text of a file (created if new). Returns the new version number."""
        target = rel(path)
        return self._stage({target: text}, f"write {target}")

    def replace(self, path: str, old: str, new: str) -> int:
        """Replace the one occurrence of `old` in `path` by `new`."""
        target = rel(path)
        with self._lock:
            text = self.read(target)
            return self._stage({target: edits.replace_once(text, old, new, target)},
                               f"replace in {target}")  # fmt: skip

    def apply_patch(self, patch: str) -> int:
        """Apply a unified diff (one or more files; '--- /dev/null' creates, '+++ /dev/null'
        deletes). All files or none."""
        with self._lock:
            version = self._versions[-1]
            changes = edits.apply_patch(patch, lambda p: self._current_text(version, p))
            return self._stage(changes, f"patch ({_files(len(changes))})")

    def delete(self, path: str) -> int:
        target = rel(path)
        with self._lock:
            if self._current_bytes(self._versions[-1], target) is None:
                raise NotFound(f"delete: {target!r} does not exist in branch {self.name!r}")
            return self._stage({target: None}, f"delete {target}")

    def apply_edit(self, edit: Any, encoding: str = "utf-16") -> int:
        """Apply an LSP WorkspaceEdit (lsprotocol object or JSON dict; positions in the
        server's `encoding`), or a lint's quick fix (`lsp.Fix`, 1-based code points)."""
        with self._lock:
            version = self._versions[-1]
            read = lambda p: self._current_text(version, p)  # noqa: E731
            if hasattr(edit, "edits") and hasattr(edit, "title"):  # an lsp.Fix
                changes = self._fix_changes(edit, read)
            else:
                roots = [self.workspace.root, *(s.mountpoint for s in self.workspace._shadows)]
                changes = edits.workspace_edit_changes(
                    edit,
                    lambda uri: edits.uri_to_rel(uri, roots),
                    read,
                    encoding,  # type: ignore[arg-type]
                )
            return self._stage(changes, f"edit ({_files(len(changes))})")

    @staticmethod
    def _fix_changes(fix: Any, read: Any) -> edits.Changes:
        by_path: dict[RelPath, list[edits.TextEdit]] = {}
        for e in fix.edits:
            by_path.setdefault(rel(e.path), []).append(e)
        changes: edits.Changes = {}
        for path, text_edits in by_path.items():
            text = read(path)
            if text is None:
                raise StagingError(f"fix {fix.title!r}: {path!r} does not exist")
            changes[path] = edits.apply_text_edits(text, text_edits, path)
        return changes

    def _stage(self, changes: Mapping[RelPath, str | None], op: str) -> int:
        """Validate everything first, then make one new version (bad input changes nothing)."""
        with self._lock:
            self._check_open()
            data = {p: None if t is None else edits.encode(t, p) for p, t in changes.items()}
            bases = {p: self.workspace._read_user(p) for p in data if p not in self._bases}
            current = self._versions[-1]
            files = dict(current.files)
            files.update(data)
            manifest = dict(current.manifest)
            for path, content in data.items():
                mode = self._modes.get(path) or bases.get(path, (None, 0o644))[1]
                self._put(manifest, path, content, mode)
            for path, (base, mode) in bases.items():
                self._bases[path] = base
                self._modes[path] = mode
            for path in data:
                self._scratch.pop(path, None)  # a staged edit wins over what a run wrote
            number = current.number + 1
            self._versions.append(Version(number, MappingProxyType(files), freeze(manifest), op))
            return number

    def _put(self, manifest: dict[RelPath, Override], path: RelPath, data: bytes | None,
             mode: int) -> None:  # fmt: skip
        if data is None:
            manifest[path] = WHITEOUT
            return
        manifest[path] = File(self.workspace._store.make(data), None, mode, time.time_ns())
        folder = parent(path)
        while folder and folder not in manifest and not self.workspace._user_dir_exists(folder):
            manifest[folder] = Dir(origin=None)  # a new folder: nothing shows through it
            folder = parent(folder)

    def _current_bytes(self, version: Version, path: RelPath) -> bytes | None:
        if path in version.files:
            return version.files[path]
        return self.workspace._read_user(path)[0]

    def _current_text(self, version: Version, path: RelPath) -> str | None:
        data = self._current_bytes(version, path)
        return None if data is None else edits.decode(data, path)

    # -- views ------------------------------------------------------------------------------------

    def _view(self, version: Version) -> View:
        documents = {p: d.decode("utf-8") for p, d in version.files.items() if d is not None}
        return View(("branch", self._uid, version.number), version.manifest, documents)

    def _base_view(self) -> View:
        """The branch's base: its touched files as they were at first touch."""
        manifest: dict[RelPath, Override] = {}
        documents: dict[RelPath, str] = {}
        for path in sorted(self._bases):
            base = self._bases[path]
            if base is None:
                manifest[path] = WHITEOUT
                continue
            blob = self.workspace._base_blob(path, base)
            manifest[path] = File(blob, None, self._modes.get(path, 0o644), 0)
            with contextlib.suppress(StagingError):
                documents[path] = edits.decode(base, path)
        key = ("base", tuple((p, _digest(self._bases[p])) for p in sorted(self._bases)))
        return View(key, freeze(manifest), documents)

    def _base_bytes(self, path: RelPath) -> bytes | None:
        if path in self._bases:
            return self._bases[path]
        with contextlib.suppress(ShadowError):
            return self.workspace._read_user(path)[0]
        return None

    # -- lints ------------------------------------------------------------------------------------

    def lint(
        self,
        paths: Sequence[str] | None = None,
        new_only: bool = False,
        *,
        servers: Sequence[str] | None = None,
        fixes: bool = True,
    ) -> LintTable:
        """Lints of this branch's current version (default: the files it staged).

        The `new` column says whether the branch introduced the lint (compared with its base).
        """
        answer = self.workspace._loop.call(self._lint(paths, servers, fixes))
        return self._table(*answer, new_only)

    async def lint_async(
        self, paths: Sequence[str] | None = None, new_only: bool = False, *,
        servers: Sequence[str] | None = None, fixes: bool = True,
    ) -> LintTable:  # fmt: skip
        answer = await self.workspace._loop.call_async(self._lint(paths, servers, fixes))
        return self._table(*answer, new_only)

    def _table(
        self, lints: list[Lint], flags: list[bool], version: int, new_only: bool
    ) -> LintTable:
        # Built by the caller, not on the shared loop: a DataFrame costs milliseconds.
        table = lint_table(lints, self.name, version, flags)
        table.attrs.update(branch=self.name, version=version)
        if new_only:
            table = table[table["new"].fillna(True)].reset_index(drop=True)
        return table

    async def _lint(
        self, paths: Sequence[str] | None, servers: Sequence[str] | None, fixes: bool
    ) -> tuple[list[Lint], list[bool], int]:
        with self._lock:
            self._check_open()
            version = self._versions[-1]
            view, base_view = self._view(version), self._base_view()
            bases = {p: b for p, b in self._bases.items()}
        targets = self._lint_targets(version, paths)
        base_texts = {p: _text_or_empty(b) for p, b in bases.items() if b is not None}
        new_texts = {p: d.decode("utf-8") for p, d in version.files.items() if d is not None}
        ws = self.workspace
        names = ",".join(sorted(servers)) if servers else "*"

        def base_key(path: RelPath) -> tuple[str, RelPath, str]:
            return (names, path, _digest(bases[path] if path in bases else self._base_bytes(path)))

        async def job(lane: Lane) -> tuple[tuple[list[Lint], list[bool], int], str]:
            in_base = [p for p in targets if p not in bases or bases[p] is not None]
            missing = [p for p in in_base if base_key(p) not in ws._base_lints]
            if missing:
                await lane.show(base_view)
                found = await lane.pool.lint(missing, servers, fixes=False)
                for path in missing:
                    ws._base_lints[base_key(path)] = tuple(x for x in found if x.path == path)
            await lane.show(view)
            lints = await lane.pool.lint(targets, servers, fixes=fixes) if targets else []
            base_lints = [x for p in in_base for x in ws._base_lints[base_key(p)]]
            flags = mark_new(lints, base_lints, base_texts, new_texts)
            return (lints, flags, version.number), f"{len(lints)} lints ({sum(flags)} new)"

        return await ws._submit(self, version.number, "lint", "lint", job)  # type: ignore[no-any-return]

    def _lint_targets(self, version: Version, paths: Sequence[str] | None) -> list[RelPath]:
        if paths is not None:
            return list(dict.fromkeys(rel(p) for p in paths))
        return sorted(p for p, d in version.files.items() if d is not None)

    # -- navigation -------------------------------------------------------------------------------

    def definition(self, path: str, line: int, column: int) -> list[Location]:
        return self.workspace._loop.call(self._navigate("definition", path, line, column))

    def references(self, path: str, line: int, column: int) -> list[Location]:
        return self.workspace._loop.call(self._navigate("references", path, line, column))

    def hover(self, path: str, line: int, column: int) -> Hover | None:
        return self.workspace._loop.call(self._navigate("hover", path, line, column))

    async def definition_async(self, path: str, line: int, column: int) -> list[Location]:
        return await self.workspace._loop.call_async(self._navigate("definition", path, line,
                                                                    column))  # fmt: skip

    async def references_async(self, path: str, line: int, column: int) -> list[Location]:
        return await self.workspace._loop.call_async(self._navigate("references", path, line,
                                                                    column))  # fmt: skip

    async def hover_async(self, path: str, line: int, column: int) -> Hover | None:
        return await self.workspace._loop.call_async(self._navigate("hover", path, line, column))

    async def _navigate(self, op: str, path: str, line: int, column: int) -> Any:
        target = rel(path)
        with self._lock:
            self._check_open()
            version = self._versions[-1]
            view = self._view(version)

        async def job(lane: Lane) -> tuple[Any, str]:
            await lane.show(view)
            answer = await getattr(lane.pool, op)(target, line, column)
            if op == "hover":
                return answer, "hover" if answer else "no hover"
            return answer, f"{len(answer)} locations"

        return await self.workspace._submit(self, version.number, "navigation", op, job)

    # -- runs -------------------------------------------------------------------------------------

    def run(self, cmd: str | Sequence[str], timeout: float = 60, network: bool = False,
            **options: Any) -> RunResult:  # fmt: skip
        """Run a command inside the shadow at this branch's version (plus what earlier runs
        wrote). What the run writes stays in the branch's scratch layer: later runs see it,
        lints, diff() and accept() do not. `options` go to `run_in_shadow` (python=True runs
        `cmd` as Python code; mode, env, cwd, output_cap, max_processes, cancel). An interrupt
        in the caller, or setting the `cancel` event, kills the run and all its processes."""
        cancel = options.setdefault("cancel", threading.Event())
        try:
            return self.workspace._loop.call(self._run(cmd, timeout, network, options))
        except BaseException:
            cancel.set()
            raise

    async def run_async(self, cmd: str | Sequence[str], timeout: float = 60,
                        network: bool = False, **options: Any) -> RunResult:  # fmt: skip
        return await self.workspace._loop.call_async(self._run(cmd, timeout, network, options))

    async def _run(self, cmd: Any, timeout: float, network: bool, options: dict[str, Any]) -> Any:
        with self._lock:
            self._check_open()
            version = self._versions[-1]

        async def job(lane: Lane) -> tuple[Any, str]:
            with self._lock:
                # Staging drops a path from the scratch layer, so what is left there is newer.
                manifest = freeze({**version.manifest, **self._scratch})
            result = await asyncio.to_thread(
                run_in_shadow, lane.shadow, manifest, cmd, timeout=timeout, network=network,
                **options,
            )  # fmt: skip
            written = _written(result, lane.shadow)
            self._absorb(written)
            lane.touched(set(written))
            how = "timed out" if result.timed_out else f"exit {result.exit_code}"
            return result, f"{how}, {_files(len(written))} written ({result.mode})"

        return await self.workspace._submit(self, version.number, "run", "run", job)

    def _absorb(self, written: Mapping[RelPath, Override | None]) -> None:
        with self._lock:
            for path, override in written.items():
                # None: the run left no override where the run's view had one, and the user's
                # folder has nothing there; a whiteout keeps it gone over the version's file.
                self._scratch[path] = WHITEOUT if override is None else override
            self._scratch_generation += 1

    # -- diff, accept, drop ---------------------------------------------------------------------

    def diff(self) -> Diff:
        """The branch's edits against its base, as a unified diff (git style)."""
        with self._lock:
            files = self._versions[-1].files
            parts = [edits.render_diff(p, self._bases.get(p), files[p]) for p in sorted(files)]
        return Diff("".join(parts))

    def accept(self) -> Accepted:
        """Write the branch's files into the user's folder.

        Only where the user's file still equals the branch's base; where the user changed it
        too, a clean three-way merge is written, otherwise ConflictError lists the files and
        nothing at all is written. Each file is replaced atomically (temp file + rename).
        """
        with self._lock:
            self._check_open()
            plan, merged, conflicts = self._accept_plan()
            if conflicts:
                raise ConflictError(
                    f"accept {self.name!r}: the user changed {', '.join(conflicts)} since the "
                    "branch forked and the changes overlap; nothing was written. Re-stage on "
                    "top of the user's version (or drop the branch)",
                    paths=tuple(conflicts),
                )
            for path, data in plan.items():
                self._write_user(path, data)
            for path in self._versions[-1].files:
                self._bases[path] = self.workspace._read_user(path)[0]
        return Accepted(
            written=tuple(p for p, d in plan.items() if d is not None),
            deleted=tuple(p for p, d in plan.items() if d is None),
            merged=tuple(merged),
        )

    def _accept_plan(self) -> tuple[dict[RelPath, bytes | None], list[RelPath], list[RelPath]]:
        plan: dict[RelPath, bytes | None] = {}
        merged: list[RelPath] = []
        conflicts: list[RelPath] = []
        for path, mine in sorted(self._versions[-1].files.items()):
            base, theirs = self._bases.get(path), self.workspace._read_user(path)[0]
            if theirs == mine:
                continue
            if theirs == base:
                plan[path] = mine
                continue
            result = _merge_bytes(base, mine, theirs)
            if result is None:
                conflicts.append(path)
            else:
                plan[path] = result
                merged.append(path)
        return plan, merged, conflicts

    def _write_user(self, path: RelPath, data: bytes | None) -> None:
        full = self.workspace._user_path(path)
        if data is None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(full)
            return
        folder = os.path.dirname(full)
        os.makedirs(folder, exist_ok=True)
        mode = self._modes.get(path, 0o644)
        with contextlib.suppress(FileNotFoundError):
            mode = stat.S_IMODE(os.lstat(full).st_mode)  # keep the user's mode
        fd, temp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(full)}.", suffix=".sk")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                os.fchmod(f.fileno(), mode)
            os.replace(temp, full)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise

    def drop(self) -> None:
        """Forget the branch (its versions and scratch layer). The user's folder is untouched."""
        with self._lock:
            self._state = "dropped"
            self._scratch.clear()
        self.workspace._forget(self)

    def _check_open(self) -> None:
        if self._state != "open":
            raise ShadowError(f"branch {self.name!r} was {self._state}; fork a new one")
        self.workspace._check_open()

    def __repr__(self) -> str:
        return (f"<Branch {self.name!r} v{self.version}: {_files(len(self.files))} touched, "
                f"{self._state}>")  # fmt: skip


def _files(n: int) -> str:
    return f"{n} file" if n == 1 else f"{n} files"


def _text_or_empty(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return ""


def _merge_bytes(base: bytes | None, mine: bytes | None, theirs: bytes | None) -> bytes | None:
    """A clean three-way merge of text files, or None (a conflict, or not mergeable)."""
    if base is None or mine is None or theirs is None:
        return None  # created or deleted on one side while changed on the other
    try:
        texts = [d.decode("utf-8") for d in (base, mine, theirs)]
    except UnicodeDecodeError:
        return None
    result = merge3(*texts)
    return None if result.text is None else result.text.encode("utf-8")


def _written(result: RunResult, shadow: Shadow) -> dict[RelPath, Override | None]:
    """What a run wrote (its delta on the manifest it ran on)."""
    return dict(result.written)
