"""A branch: a private line of edits on top of the user's folder.

Staging calls validate the whole edit first, then make one new version (bad input changes
nothing). Requests (lint, navigation, run) go through the workspace's scheduler on its loop
thread; each public method is synchronous and thread-safe and has an awaitable `*_async` twin.
A branch reads untouched files live from the user's folder (that is what the shadow shows), so
they can change under it; accept() guards only the files it touched.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeAlias

import pandas as pd

from ..errors import ArgumentError, ClosedError, ConflictError, NotFound, ShadowError, StagingError
from ..lsp import Lint, lint_table, mark_new
from ..lsp.documents import workspace_edit_changes
from ..lsp.navigation import Hover, Location, Symbol
from ..overlay.store import freeze
from ..paths import RelPath, rel
from ..run import RunResult
from ..sched import Lane, Snapshot
from ..text import patches, ranges
from ..text.blocks import replace_once
from ..text.content import decode, encode
from ..text.uris import uri_to_rel
from . import arguments, baselints, runs, scratch
from .accept import Accepted, merge_plan
from .diff import Diff, version_diff
from .staging import Version, base_snapshot, n_files, staged, version_snapshot

if TYPE_CHECKING:
    from .workspace import Workspace

LintTable: TypeAlias = pd.DataFrame  # columns: lsp.COLUMNS; attrs: branch, version


class Branch:
    """A private line of edits on top of the user's folder. Create with `ws.branch(name)`."""

    def __init__(self, workspace: Workspace, name: str, uid: int) -> None:
        self.workspace = workspace
        self.name = name
        self.conflicts: tuple[RelPath, ...] = ()  # set by ws.merge_check: paths that overlapped
        self._uid = uid  # names can be reused after drop(); snapshot keys must not be
        self._lock = threading.RLock()
        self._bases: dict[RelPath, bytes | None] = {}
        self._modes: dict[RelPath, int] = {}
        self._versions: list[Version] = [Version(0, MappingProxyType({}), freeze({}), "fork")]
        self._scratch = scratch.Scratch()
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
        target = arguments.path("path", path)
        text = self._current_text(self._versions[-1], target)
        if text is None:
            raise NotFound(f"path {target!r} does not exist in branch {self.name!r}")
        return text

    # -- staging ----------------------------------------------------------------------------------

    def write(self, path: str, text: str) -> int:
        """Stage the full text of a file (created if new). Returns the new version number."""
        target = arguments.path("path", path)
        return self._stage_text({target: text}, f"write {target}")

    def replace(self, path: str, old: str, new: str) -> int:
        """Replace the one occurrence of `old` in `path` by `new`."""
        target = arguments.path("path", path)
        old, new = arguments.text("old", old), arguments.text("new", new)
        with self._lock:
            text = self.read(target)
            return self._stage_text({target: replace_once(text, old, new, target)},
                                    f"replace in {target}")  # fmt: skip

    def apply_patch(self, patch: str) -> int:
        """Apply a unified diff (one or more files; '--- /dev/null' creates, '+++ /dev/null'
        deletes). All files or none."""
        arguments.text("patch", patch)
        with self._lock:
            version = self._versions[-1]
            changes = patches.apply_patch(patch, lambda p: self._current_text(version, p))
            return self._stage_text(changes, f"patch ({n_files(len(changes))})")

    def delete(self, path: str) -> int:
        target = arguments.path("path", path)
        with self._lock:
            if self._current_bytes(self._versions[-1], target) is None:
                raise NotFound(f"delete: {target!r} does not exist in branch {self.name!r}")
            return self._stage_text({target: None}, f"delete {target}")

    def apply_edit(self, edit: Any, encoding: str = "utf-16") -> int:
        """Apply an LSP WorkspaceEdit (lsprotocol object or JSON dict; positions in the
        server's `encoding`), or a lint's quick fix (`lsp.Fix`, 1-based code points)."""
        if edit is None or isinstance(edit, str | bytes | int | float):
            raise ArgumentError(f"edit={edit!r}: give an LSP WorkspaceEdit (object or JSON dict) "
                                "or a lint's quick fix (a row's `fixes` entry)")  # fmt: skip
        with self._lock:
            version = self._versions[-1]
            read = lambda p: self._current_text(version, p)  # noqa: E731
            if hasattr(edit, "edits") and hasattr(edit, "title"):  # an lsp.Fix
                changes = self._fix_changes(edit, read)
            else:
                roots = [self.workspace.root, *(s.mountpoint for s in self.workspace.shadows)]
                changes = workspace_edit_changes(
                    edit,
                    lambda uri: uri_to_rel(uri, roots),
                    read,
                    encoding,  # type: ignore[arg-type]
                )
            return self._stage_text(changes, f"edit ({n_files(len(changes))})")

    @staticmethod
    def _fix_changes(fix: Any, read: Any) -> ranges.Changes:
        by_path: dict[RelPath, list[ranges.TextEdit]] = {}
        for e in fix.edits:
            by_path.setdefault(rel(e.path), []).append(e)
        changes: ranges.Changes = {}
        for path, text_edits in by_path.items():
            text = read(path)
            if text is None:
                raise StagingError(f"fix {fix.title!r}: {path!r} does not exist")
            changes[path] = ranges.apply_text_edits(text, text_edits, path)
        return changes

    def _stage_text(self, changes: Mapping[RelPath, str | None], op: str) -> int:
        data = {p: None if t is None else encode(t, p) for p, t in changes.items()}
        return self._stage(data, op)

    def _stage(self, data: Mapping[RelPath, bytes | None], op: str) -> int:
        """Validate everything first, then make one new version (bad input changes nothing)."""
        with self._lock:
            self._check_open()
            folder = self.workspace.folder
            bases = {p: folder.read(p) for p in data if p not in self._bases}
            modes = {**{p: m for p, (_, m) in bases.items()}, **self._modes}
            current = self._versions[-1]
            manifest = staged(current.manifest, data, modes, self.workspace.store.make,
                              folder.is_dir)  # fmt: skip
            for path, (base, mode) in bases.items():
                self._bases[path] = base
                self._modes[path] = mode
            self._scratch.discard(data)
            files = MappingProxyType({**current.files, **data})
            self._versions.append(Version(current.number + 1, files, manifest, op))
            return current.number + 1

    def _current_bytes(self, version: Version, path: RelPath) -> bytes | None:
        if path in version.files:
            return version.files[path]
        return self.workspace.folder.content(path)

    def _current_text(self, version: Version, path: RelPath) -> str | None:
        data = self._current_bytes(version, path)
        return None if data is None else decode(data, path)

    # -- views ------------------------------------------------------------------------------------

    def _snapshot(self, version: Version) -> Snapshot:
        return version_snapshot(self._uid, version)

    def _base_snapshot(self) -> Snapshot:
        return base_snapshot(self._bases, self._modes, self.workspace.base_blob)

    def _base_bytes(self, path: RelPath) -> bytes | None:
        if path in self._bases:
            return self._bases[path]
        try:
            return self.workspace.folder.content(path)
        except ShadowError:
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
        paths, servers = arguments.paths("paths", paths), arguments.names("servers", servers)
        new_only, fixes = arguments.flag("new_only", new_only), arguments.flag("fixes", fixes)
        answer = self.workspace.bridge.call(self._lint(paths, servers, fixes))
        return self._table(*answer, new_only)

    async def lint_async(
        self, paths: Sequence[str] | None = None, new_only: bool = False, *,
        servers: Sequence[str] | None = None, fixes: bool = True,
    ) -> LintTable:  # fmt: skip
        paths, servers = arguments.paths("paths", paths), arguments.names("servers", servers)
        new_only, fixes = arguments.flag("new_only", new_only), arguments.flag("fixes", fixes)
        answer = await self.workspace.bridge.call_async(self._lint(paths, servers, fixes))
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
            snapshot, base = self._snapshot(version), self._base_snapshot()
            bases = dict(self._bases)
        targets = self._lint_targets(version, paths)
        base_texts = {p: _text_or_empty(b) for p, b in bases.items() if b is not None}
        new_texts = {p: d.decode("utf-8") for p, d in version.files.items() if d is not None}
        cache, names = self.workspace.base_lints, baselints.servers_key(servers)

        async def job(lane: Lane) -> tuple[tuple[list[Lint], list[bool], int], str]:
            keys = {  # read when served: untouched files are the user's files of that moment
                p: baselints.key(names, p, bases[p] if p in bases else self._base_bytes(p))
                for p in targets
                if p not in bases or bases[p] is not None  # files the base has
            }
            missing = cache.missing(keys)
            if missing:
                await lane.show(base)
                found = await lane.pool.lint(missing, servers, fixes=False)
                cache.store({p: keys[p] for p in missing}, found)
            await lane.show(snapshot)
            lints = await lane.pool.lint(targets, servers, fixes=fixes) if targets else []
            flags = mark_new(lints, cache.lints(keys), base_texts, new_texts)
            return (lints, flags, version.number), f"{len(lints)} lints ({sum(flags)} new)"

        return await self.workspace.submit(self, version.number, "lint", "lint", job)  # type: ignore[no-any-return]

    def _lint_targets(self, version: Version, paths: Sequence[str] | None) -> list[RelPath]:
        if paths is not None:
            return list(dict.fromkeys(rel(p) for p in paths))
        return sorted(p for p, d in version.files.items() if d is not None)

    # -- navigation -------------------------------------------------------------------------------

    def definition(self, path: str, line: int, column: int) -> list[Location]:
        return self.workspace.bridge.call(self._navigate("definition", path, line, column))

    def references(self, path: str, line: int, column: int) -> list[Location]:
        return self.workspace.bridge.call(self._navigate("references", path, line, column))

    def hover(self, path: str, line: int, column: int) -> Hover | None:
        found: Hover | None
        found = self.workspace.bridge.call(self._navigate("hover", path, line, column))
        return found

    def symbols(self, path: str) -> list[Symbol]:
        """The document symbols of `path` at this branch's version (1-based positions)."""
        return self.workspace.bridge.call(self._navigate("symbols", path))

    async def definition_async(self, path: str, line: int, column: int) -> list[Location]:
        return await self.workspace.bridge.call_async(
            self._navigate("definition", path, line, column))  # fmt: skip

    async def references_async(self, path: str, line: int, column: int) -> list[Location]:
        return await self.workspace.bridge.call_async(
            self._navigate("references", path, line, column))  # fmt: skip

    async def hover_async(self, path: str, line: int, column: int) -> Hover | None:
        return await self.workspace.bridge.call_async(
            self._navigate("hover", path, line, column))  # fmt: skip

    async def symbols_async(self, path: str) -> list[Symbol]:
        return await self.workspace.bridge.call_async(self._navigate("symbols", path))

    async def _navigate(self, op: str, path: str, *position: int) -> Any:
        target = arguments.path("path", path)
        if position:
            position = arguments.position(*position)
        with self._lock:
            self._check_open()
            version = self._versions[-1]
            snapshot = self._snapshot(version)

        async def job(lane: Lane) -> tuple[Any, str]:
            await lane.show(snapshot)
            answer = await getattr(lane.pool, op)(target, *position)
            if op == "hover":
                return answer, "hover" if answer else "no hover"
            return answer, f"{len(answer)} {'symbols' if op == 'symbols' else 'locations'}"

        return await self.workspace.submit(self, version.number, "navigation", op, job)

    # -- runs -------------------------------------------------------------------------------------

    def run(self, cmd: str | Sequence[str], timeout: float = 60, network: bool = False,
            keep: bool = False, **options: Any) -> RunResult:  # fmt: skip
        """Run a command inside the shadow at this branch's version (plus what earlier runs
        wrote). What the run writes stays in the branch's scratch layer: later runs see it,
        lints, diff() and accept() do not; with `keep=True` what it wrote under the project
        (text files and deletions, less .gitignore'd paths and the usual caches) becomes the
        branch's next version instead. `options` go to `run_in_shadow` (python=True runs `cmd`
        as Python code; mode, env, cwd, output_cap, max_processes, cancel). Runs of other
        branches go at the same time (up to `ws.max_runs`), this branch's in turn; lints are
        served meanwhile. An interrupt in the caller, setting the `cancel` event (from any
        thread), drop() or closing the workspace kills the run and all its processes, or takes
        it out of the queue (then `cancelled` and nothing ran)."""
        cancel = options.setdefault("cancel", threading.Event())
        cmd, timeout, network, keep = runs.check(cmd, timeout, network, keep, options)
        try:
            return self.workspace.bridge.call(runs.run(self, cmd, timeout, network, keep, options))
        except BaseException:
            cancel.set()
            raise

    async def run_async(self, cmd: str | Sequence[str], timeout: float = 60,
                        network: bool = False, keep: bool = False,
                        **options: Any) -> RunResult:  # fmt: skip
        cancel = options.setdefault("cancel", threading.Event())
        cmd, timeout, network, keep = runs.check(cmd, timeout, network, keep, options)
        try:
            return await self.workspace.bridge.call_async(
                runs.run(self, cmd, timeout, network, keep, options))  # fmt: skip
        except BaseException:  # asyncio cancellation (an MCP client's cancel) included
            cancel.set()
            raise

    # -- diff, accept, drop ---------------------------------------------------------------------

    def diff(self, version: int | None = None) -> Diff:
        """The branch's edits against its base at `version` (default: the current one), as a
        unified diff (git style)."""
        with self._lock:
            return version_diff(self._version(version).files, self._bases)

    def _version(self, number: int | None) -> Version:
        if number is None:
            return self._versions[-1]
        if isinstance(number, bool) or not isinstance(number, int):
            raise ArgumentError(f"version={number!r}: give a version number (an int)")
        if not 0 <= number < len(self._versions):
            raise NotFound(f"branch {self.name!r} has no version {number} (it has 0 to "
                           f"{self.version})")  # fmt: skip
        return self._versions[number]

    def accept(self) -> Accepted:
        """Write the branch's files into the user's folder.

        Only where the user's file still equals the branch's base; where the user changed it
        too, a clean three-way merge is written, otherwise ConflictError lists the files and
        nothing at all is written. Each file is replaced atomically (temp file + rename).
        """
        folder = self.workspace.folder
        with self._lock:
            self._check_open()
            plan = merge_plan(self._versions[-1].files, self._bases.get, folder.content)
            if plan.conflicts:
                raise ConflictError(
                    f"accept {self.name!r}: the user changed {', '.join(plan.conflicts)} since "
                    "the branch forked and the changes overlap; nothing was written. Re-stage "
                    "on top of the user's version (or drop the branch)",
                    paths=tuple(plan.conflicts),
                )
            for path, data in plan.writes.items():
                folder.write_atomic(path, data, self._modes.get(path, 0o644))
            for path in self._versions[-1].files:
                self._bases[path] = folder.content(path)
        return Accepted(
            written=tuple(p for p, d in plan.writes.items() if d is not None),
            deleted=tuple(p for p, d in plan.writes.items() if d is None),
            merged=tuple(plan.merged),
        )

    def drop(self) -> None:
        """Forget the branch (its versions and scratch layer) and cancel its runs. The user's
        folder is untouched."""
        with self._lock:
            self._state = "dropped"
            self._scratch.clear()
        self.workspace.run_queue.cancel(self._uid)
        self.workspace._forget(self)

    def _check_open(self) -> None:
        if self._state != "open":
            raise ClosedError(f"branch {self.name!r} was {self._state}; fork a new one")
        self.workspace.check_open()

    def __repr__(self) -> str:
        return (f"<Branch {self.name!r} v{self.version}: {n_files(len(self.files))} touched, "
                f"{self._state}>")  # fmt: skip


def merge_branches(merged: Branch, a: Branch, b: Branch) -> None:
    """Stage on the fresh branch `merged` the three-way merge of `a` and `b`: their common base
    (each path's base as the branch that touched it first recorded it) becomes its base."""
    with a._lock, b._lock:
        ours, theirs = a._versions[-1], b._versions[-1]
        paths = sorted({*ours.files, *theirs.files})
        bases = {**b._bases, **a._bases}
        modes = {**b._modes, **a._modes}
        mine = {p: a._current_bytes(ours, p) for p in paths}
        other = {p: b._current_bytes(theirs, p) for p in paths}
    plan = merge_plan(mine, bases.get, other.get)
    result = {p: plan.writes.get(p, other[p]) for p in paths} | {p: mine[p] for p in plan.conflicts}
    changed = {p: d for p, d in result.items() if d != bases[p]}
    with merged._lock:
        merged._bases.update({p: bases[p] for p in changed})
        merged._modes.update({p: modes[p] for p in changed if p in modes})
        if changed:
            merged._stage(changed, f"merge {a.name}@{ours.number} + {b.name}@{theirs.number}")
        merged.conflicts = tuple(plan.conflicts)


def _text_or_empty(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return ""
