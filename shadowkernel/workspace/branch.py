"""A branch: a private line of edits on top of the user's folder.

Staging calls validate the whole edit first, then make one new version (bad input changes
nothing). Requests (lint, navigation, run) go through the workspace's scheduler on its loop
thread; each public method is synchronous and thread-safe and has an awaitable `*_async` twin.
A branch reads untouched files live from the user's folder (that is what the shadow shows), so
they can change under it; accept() guards only the files it touched.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeAlias

import pandas as pd

from ..errors import (
    ArgumentError,
    ConflictError,
    NotFound,
    PathError,
    ShadowError,
    StagingError,
)
from ..lsp import Fix, LineMap, Lint, LintReport, flag_new
from ..lsp.documents import workspace_edit_changes
from ..lsp.lints import text_digest
from ..lsp.navigation import Hover, Location, Symbol
from ..lsp.pool import linters
from ..paths import RelPath, rel
from ..run import RunResult
from ..sched import Answer, Lane, Snapshot
from ..text import patches, ranges
from ..text.blocks import replace_once
from ..text.content import decode, encode
from ..text.merge import is_binary
from ..text.uris import uri_to_rel
from . import arguments, baselints, checkers, gitexport, runs, scratch
from .accept import Accepted, merge_plan
from .diff import Diff, version_diff
from .folder import Folder
from .staging import (
    LINK,
    RECENT_TEXTS,
    Version,
    base_snapshot,
    is_text,
    n_files,
    texts,
    version_snapshot,
)
from .state import BranchState, Conflicts, file_bytes

if TYPE_CHECKING:
    from .workspace import Workspace

LintTable: TypeAlias = pd.DataFrame  # columns: lsp.COLUMNS; attrs: branch, version


class Branch:
    """A private line of edits on top of the user's folder. Create with `ws.branch(name)`."""

    def __init__(
        self, workspace: Workspace, name: str, uid: int, state: BranchState | None = None
    ) -> None:
        self.workspace = workspace
        self.name = name
        self._uid = uid  # names can be reused after drop(); snapshot keys must not be
        self.state = state or BranchState(name)  # versions, bases, scratch and their lock

    @property
    def conflicts(self) -> tuple[RelPath, ...]:
        """The paths ws.merge_check left conflicted when it made this branch (else empty)."""
        return tuple(self.state.conflicts.paths)

    # -- versions -------------------------------------------------------------------------------

    @property
    def version(self) -> int:
        return self.state.head.number

    @property
    def versions(self) -> tuple[Version, ...]:
        return tuple(self.state.versions)

    @property
    def files(self) -> Mapping[RelPath, bytes | None]:
        """Every path this branch touched at its current version (None: deleted)."""
        return self.state.head.files

    @property
    def bases(self) -> Mapping[RelPath, bytes | None]:
        """The user's bytes of each touched path when the branch first touched it."""
        with self.state.lock:
            return MappingProxyType(dict(self.state.bases))

    def read(self, path: str) -> str:
        """The branch's current text of `path` (staged, or the user's file); a binary file is
        refused with its size (read it with `read_bytes`)."""
        data = self.read_bytes(path)
        target = arguments.path("path", path)
        if not is_text(data):
            raise StagingError(f"{target}: a binary file ({len(data)} bytes) in branch "
                               f"{self.name!r}; read it with read_bytes()")  # fmt: skip
        return decode(data, target)

    # -- binary files, modes, the scratch layer ---------------------------------------------------

    def read_bytes(self, path: str) -> bytes:
        """The branch's current bytes of `path` (staged, or the user's file)."""
        target = arguments.path("path", path)
        head = self.state.head
        data = self._current_bytes(head, target)
        if data is None:
            if target in head.files:  # not "does not exist": the agent may think it never did
                raise NotFound(f"path {target!r} was deleted in branch {self.name!r}")
            raise NotFound(f"path {target!r} does not exist in branch {self.name!r}")
        return data

    def write_bytes(self, path: str, data: bytes, mode: int | None = None) -> int:
        """Stage a file's bytes (binary or not), and its mode if given (0o755: executable)."""
        target = self._guard(arguments.path("path", path), "write_bytes")
        content, chosen = arguments.data("data", data), arguments.mode("mode", mode)
        return self._stage({target: content}, f"write {target}",
                           {} if chosen is None else {target: chosen})  # fmt: skip

    def mode(self, path: str) -> int:
        """The mode `path` has in the branch: permission bits, or LINK for a symlink."""
        target = arguments.path("path", path)
        self.read_bytes(target)
        return self.state.mode(self.state.head, target, self.workspace.folder)

    def scratch(self) -> list[scratch.Entry]:
        """What runs wrote that no version holds (path, kind, size, mode): later runs see it;
        lints, diff() and accept() do not (`run(keep=True)` stages it instead)."""
        with self.state.lock:
            return self.state.scratch.listing()

    # -- staging ----------------------------------------------------------------------------------

    def write(self, path: str, text: str, mode: int | None = None) -> int:
        """Stage the full text of a file (created if new), and its mode if given (0o755:
        executable; None keeps the file's). Returns the new version number."""
        target = self._guard(arguments.path("path", path), "write")
        chosen = arguments.mode("mode", mode)
        return self._stage_text({target: text}, f"write {target}",
                                {} if chosen is None else {target: chosen})  # fmt: skip

    def replace(self, path: str, old: str, new: str) -> int:
        """Replace the one occurrence of `old` in `path` by `new`."""
        target = self._guard(arguments.path("path", path), "replace")
        old, new = arguments.text("old", old), arguments.text("new", new)
        with self.state.lock:
            text = self.read(target)
            return self._stage_text({target: replace_once(text, old, new, target)},
                                    f"replace in {target}")  # fmt: skip

    def apply_patch(self, patch: str) -> int:
        """Apply a unified diff (one or more files; '--- /dev/null' creates, '+++ /dev/null'
        deletes). All files or none."""
        arguments.text("patch", patch)
        with self.state.lock:
            version = self.state.head
            files = patches.parse_patch(patch)
            for fp in files:
                for side in (fp.old_path, fp.new_path):
                    if side is not None:
                        self._guard(side, "apply_patch")
            changes = patches.apply_files(files, lambda p: self._current_text(version, p))
            return self._stage_text(changes, f"patch ({n_files(len(changes))})",
                                    patches.modes(files))  # fmt: skip

    def delete(self, path: str) -> int:
        target = self._guard(arguments.path("path", path), "delete")
        with self.state.lock:
            head = self.state.head
            if target in head.files:
                exists = head.files.present(target)
            else:  # a symlink may be deleted too (read() and write() refuse one)
                exists = self.workspace.folder.entry(target)[0] is not None
            if not exists:
                raise NotFound(f"delete: {target!r} does not exist in branch {self.name!r}")
            return self._stage_text({target: None}, f"delete {target}")

    def apply_edit(self, edit: Any, encoding: str = "utf-16") -> int:
        """Apply an LSP WorkspaceEdit (lsprotocol object or JSON dict; positions in the
        server's `encoding`), or a lint's quick fix (`lsp.Fix`, 1-based code points). A fix
        is refused (StagingError: lint again) once a file it edits no longer has the text it
        was computed for; other files may have changed."""
        if edit is None or isinstance(edit, str | bytes | int | float):
            raise ArgumentError(f"edit={edit!r}: give an LSP WorkspaceEdit (object or JSON dict) "
                                "or a lint's quick fix (a row's `fixes` entry)")  # fmt: skip
        with self.state.lock:
            version = self.state.head
            read = lambda p: self._current_text(version, p)  # noqa: E731
            if hasattr(edit, "edits") and hasattr(edit, "title"):  # an lsp.Fix
                changes = self._fix_changes(edit, version, read)
            else:
                roots = [self.workspace.root, *(s.mountpoint for s in self.workspace.shadows)]
                changes = workspace_edit_changes(
                    edit,
                    lambda uri: uri_to_rel(uri, roots),
                    read,
                    encoding,  # type: ignore[arg-type]
                )
            return self._stage_text(changes, f"edit ({n_files(len(changes))})")

    def _fix_changes(self, fix: Any, version: Version, read: Any) -> ranges.Changes:
        by_path: dict[RelPath, list[ranges.TextEdit]] = {}
        for e in fix.edits:
            by_path.setdefault(rel(e.path), []).append(e)
        current = {}
        for path in by_path:
            current[path] = read(path)
            if current[path] is None:
                raise StagingError(f"fix {fix.title!r}: {path!r} does not exist in branch "
                                   f"{self.name!r}")  # fmt: skip
        changed = fix.changed(lambda p: current[p] if p in current else read(p)) \
            if isinstance(fix, Fix) else []  # fmt: skip
        if changed:  # its positions are those of another text: applied, they would damage it
            raise StagingError(self._stale_fix(fix, changed[0], version))
        return {p: ranges.apply_text_edits(current[p], e, p) for p, e in by_path.items()}

    def _stale_fix(self, fix: Fix, path: RelPath, head: Version) -> str:
        """Why `fix` no longer applies: the version whose text of `path` it was computed for
        (the newest such one, found only now), and where the branch is."""
        digest = dict(fix.against)[path]
        folder, found = self.workspace.folder, None
        for version in reversed(self.state.versions[:-1]):
            try:
                data = file_bytes(version, path, folder)
            except ShadowError:
                break
            if data is not None and is_text(data) and text_digest(decode(data, path)) == digest:
                found = version.number
                break
            if path not in version.files:  # older versions show the folder's file too
                break
        computed = f"version {found} of {path}" if found is not None else f"another text of {path}"
        return (f"fix {fix.title!r}: this fix was computed for {computed}; the branch "
                f"{self.name!r} is at version {head.number} and the file changed: lint again "
                "and take the fix from the new table")  # fmt: skip

    def _guard(self, path: RelPath, doing: str) -> RelPath:
        """PathError before any work when `path` is protected (`_stage` checks again)."""
        self.workspace.protection.check([path], doing)
        return path

    def _stage_text(
        self, changes: Mapping[RelPath, str | None], op: str, modes: Mapping[RelPath, int] = {}
    ) -> int:
        data = {p: None if t is None else encode(t, p) for p, t in changes.items()}
        number = self._stage(data, op, modes)
        for path, content in data.items():  # the lint that follows opens these texts as given
            if content is not None:
                RECENT_TEXTS.remember(content, changes[path])  # type: ignore[arg-type]
        return number

    def _stage(
        self, data: Mapping[RelPath, bytes | None], op: str, modes: Mapping[RelPath, int] = {}
    ) -> int:
        """Validate everything first, then make one new version (bad input changes nothing).
        `modes`: the paths whose mode changes (others keep theirs)."""
        self.workspace.check_open()
        protection = self.workspace.protection
        protection.check(data, op)  # DESIGN invariant 7: every staging call comes here
        protection.check_links({p: d for p, d in data.items()
                                if modes.get(p) == LINK and d is not None}, op)  # fmt: skip
        folder, state = self.workspace.folder, self.state
        with state.lock:  # branches forked from the same file share one copy of its base
            self._refuse_links(data, modes, op)
            bases = {p: (self.workspace.shared_base(p, base), mode)
                     for p in data if p not in state.bases
                     for base, mode in [folder.entry(p)]}  # fmt: skip
            return state.stage(data, op, folder, self.workspace.store.make, bases, modes)

    def _refuse_links(
        self, data: Mapping[RelPath, bytes | None], modes: Mapping[RelPath, int], op: str
    ) -> None:
        """StagingError when `data` stages bytes at a symlink without saying LINK: as read()
        refuses a symlink, so does writing through one (else the link became a file and
        accept turned the user's symlink into a regular file). Deleting a link, or staging
        a link (its target, mode LINK), is explicit; a file there after a delete is too."""
        head, folder = self.state.head, self.workspace.folder
        for path, content in data.items():
            if content is None or modes.get(path) == LINK:
                continue
            if path in head.files:
                linked = head.files.present(path) and self.state.mode(head, path, folder) == LINK
            else:
                linked = folder.is_link(path)
            if linked:
                raise StagingError(f"{op}: {path} is a symlink in branch {self.name!r}; stage "
                                   "the file it points to instead (or delete the link first to "
                                   "put a file in its place)")  # fmt: skip

    def _current_bytes(self, version: Version, path: RelPath) -> bytes | None:
        return file_bytes(version, path, self.workspace.folder)

    def _current_text(self, version: Version, path: RelPath) -> str | None:
        data = self._current_bytes(version, path)
        return None if data is None else decode(data, path)

    # -- views ------------------------------------------------------------------------------------

    def _snapshot(self, version: Version) -> Snapshot:
        return version_snapshot(self._uid, version)

    def _base_bytes(self, path: RelPath) -> bytes | None:
        try:
            return self.state.base_bytes(path, self.workspace.folder)
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
        """Lints of this branch's current version (default: the files it staged, but binary
        files and symlinks). `paths` are files of the branch's view: a directory, a missing
        path or one the branch deleted is an error naming it (never an empty table).

        The `new` column says whether the branch introduced the lint (compared with its base).
        `lint_report` gives the same lints as records, without the table.
        """
        return self.lint_report(paths, new_only, servers=servers, fixes=fixes).table()

    async def lint_async(
        self, paths: Sequence[str] | None = None, new_only: bool = False, *,
        servers: Sequence[str] | None = None, fixes: bool = True,
    ) -> LintTable:  # fmt: skip
        report = await self.lint_report_async(paths, new_only, servers=servers, fixes=fixes)
        return report.table()  # built by the caller, not on the shared loop

    def lint_report(
        self, paths: Sequence[str] | None = None, new_only: bool = False, *,
        servers: Sequence[str] | None = None, fixes: bool = True,
    ) -> LintReport:  # fmt: skip
        """`lint`'s answer as records (`LintReport`: the branch, the version, each lint with
        its `new` flag), for callers that read rows: no DataFrame is built."""
        paths, servers, fixes, new_only = self._lint_arguments(paths, new_only, servers, fixes)
        answer = self.workspace.bridge.call(self._lint(paths, servers, fixes))
        return self._report(answer, new_only)

    async def lint_report_async(
        self, paths: Sequence[str] | None = None, new_only: bool = False, *,
        servers: Sequence[str] | None = None, fixes: bool = True,
    ) -> LintReport:  # fmt: skip
        paths, servers, fixes, new_only = self._lint_arguments(paths, new_only, servers, fixes)
        answer = await self.workspace.bridge.call_async(self._lint(paths, servers, fixes))
        return self._report(answer, new_only)

    @staticmethod
    def _lint_arguments(
        paths: Sequence[str] | None, new_only: bool, servers: Sequence[str] | None, fixes: bool
    ) -> tuple[list[RelPath] | None, list[str] | None, bool, bool]:
        return (arguments.paths("paths", paths), arguments.names("servers", servers),
                arguments.flag("fixes", fixes), arguments.flag("new_only", new_only))  # fmt: skip

    def _report(self, answer: tuple[list[Lint], list[bool], int], new_only: bool) -> LintReport:
        lints, flags, version = answer
        report = LintReport.of(self.name, version, lints, flags)
        return report.only_new() if new_only else report

    async def _lint(
        self, paths: Sequence[str] | None, servers: Sequence[str] | None, fixes: bool
    ) -> tuple[list[Lint], list[bool], int]:
        with self.state.lock:
            self._check_open()
            version = self.state.head
            snapshot = self._snapshot(version)
            bases, modes = dict(self.state.bases), dict(self.state.modes)
        targets = self._lint_targets(version, paths)
        servers, checker_names = checkers.chosen(servers, self.workspace.checkers)
        if servers or not checker_names:  # some language server is asked
            self.workspace.check_servers(servers)
        cache, names = self.workspace.base_lints, baselints.servers_key(servers)

        def linting(lane: Lane) -> list[str]:  # the servers the lint asks (the mount: maybe not)
            return [spec.name for spec in linters(lane.pool.specs, servers)]

        async def lint_base(lane: Lane, keys: dict[RelPath, baselints.Key]) -> None:
            missing = {p: keys[p] for p in cache.missing(keys)}
            if missing:  # the base's snapshot hashes every base file: only when needed
                async with cache.linting(missing):
                    base = base_snapshot(bases, modes, self.workspace.base_blob)
                    await lane.show(base, linting(lane))
                    cache.store(missing, await lane.pool.lint(list(missing), servers, fixes=False))

        async def job(lane: Lane) -> Answer[tuple[list[Lint], list[bool], int]]:
            keys = {  # read when served: untouched files are the user's files of that moment
                p: baselints.key(
                    names, p, *((bases[p], True) if p in bases else (self._base_bytes(p), False))
                )
                for p in targets
                if p not in bases or bases[p] is not None  # files the base has
            }
            await lint_base(lane, keys)
            await lane.show(snapshot, linting(lane))
            lints = await lane.pool.lint(targets, servers, fixes=fixes) if targets else []
            await cache.wait(keys)  # base files another lane was linting meanwhile
            await lint_base(lane, keys)  # ... unless that lane failed
            base_lints = cache.lints(keys)
            maps = await _line_maps(version, bases, _may_be_old(lints, base_lints))
            flags = flag_new(lints, base_lints, maps)
            return Answer((lints, flags, version.number), f"{len(lints)} lints ({sum(flags)} new)",
                          lints=len(lints), new_lints=sum(flags))  # fmt: skip

        submitted = self.workspace.submit(self, version.number, "lint", "lint", job)
        lints, flags, number = await submitted
        if checker_names:  # disk-bound checkers: sandboxed runs at this version and its base
            base = base_snapshot(bases, modes, self.workspace.base_blob)
            views, touched = (snapshot.manifest, base.manifest), (version.files, bases)
            found = await checkers.rows(self, number, views, touched, targets, checker_names)
            lints, flags = lints + self._with_texts(found[0], version), flags + found[1]
        return lints, flags, number

    def _with_texts(self, lints: list[Lint], version: Version) -> list[Lint]:
        """`lints` whose fixes say which text they were computed against (`Fix.against`):
        a checker's were, the version's (servers' fixes say so themselves)."""
        digests: dict[RelPath, str | None] = {}

        def digest(path: RelPath) -> str | None:
            if path not in digests:
                try:
                    text = self._current_text(version, path)
                except ShadowError:
                    text = None
                digests[path] = None if text is None else text_digest(text)
            return digests[path]

        def stamped(fix: Fix) -> Fix:
            if fix.against or not isinstance(fix, Fix):
                return fix
            paths = dict.fromkeys(rel(e.path) for e in fix.edits)
            against = tuple((p, d) for p in paths if (d := digest(p)) is not None)
            return dataclasses.replace(fix, against=against)

        return [dataclasses.replace(lint, fixes=tuple(stamped(f) for f in lint.fixes))
                if lint.fixes else lint for lint in lints]  # fmt: skip

    def _lint_targets(self, version: Version, paths: Sequence[str] | None) -> list[RelPath]:
        """The files to lint: `paths`, each a file of the branch's view (else NotFound or an
        ArgumentError naming it: a typo must not look like clean code; a directory is refused,
        not expanded), or by default every file the branch staged except binary files and
        symlinks. A staged file that is not UTF-8 (Latin-1 source, say) is linted too, as
        servers read it (undecodable bytes replaced), as when it is named."""
        if paths is not None:
            targets = list(dict.fromkeys(rel(p) for p in paths))
            for path in targets:
                self._check_lint_target(version, path)
            return targets
        return sorted(texts(version))

    def _check_lint_target(self, version: Version, path: RelPath) -> None:
        files, where = version.files, f"branch {self.name!r} (version {version.number})"
        if path in files and not files.present(path):
            raise NotFound(f"paths: {path!r} was deleted in {where}; nothing to lint there")
        if path in files:
            return
        under = f"{path}/" if path else ""  # '' is the workspace's root
        inside = [p for p in files if p.startswith(under) and files.present(p)]
        full = self.workspace.folder.path(path)  # PathError: out through a symlink
        directory = bool(inside) or os.path.isdir(full)
        if not (directory or os.path.isfile(full)):
            raise NotFound(f"paths: {path!r} is neither staged in {where} nor a file in the "
                           "workspace; stage it or check the name")  # fmt: skip
        if directory:
            shown = sorted(p for p in {*inside, *_files_in(full, under)}
                           if p not in files or files.present(p))[:3]  # fmt: skip
            example = f", e.g. {shown!r}" if shown else ""
            raise ArgumentError(f"paths: {path or '.'!r} is a directory in {where}; lint "
                                f"takes files: list them{example}, or lint() for the staged "
                                "ones")  # fmt: skip

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
        with self.state.lock:
            self._check_open()
            version = self.state.head
            snapshot = self._snapshot(version)
        if position:  # before it is queued; the file is read off the services' loop
            await asyncio.to_thread(self._check_position, version, target, *position)

        async def job(lane: Lane) -> Answer[Any]:
            await lane.show(snapshot)
            answer = await getattr(lane.pool, op)(target, *position)
            if op == "hover":
                return Answer(answer, "hover" if answer else "no hover")
            return Answer(answer, f"{len(answer)} {'symbols' if op == 'symbols' else 'locations'}")

        return await self.workspace.submit(self, version.number, "navigation", op, job)

    def _check_position(self, version: Version, path: RelPath, line: int, column: int) -> None:
        """ArgumentError when (line, column) lies outside `path`'s text at `version`: a server
        would answer for the nearest character (hover) or fail with its own words (jedi's
        "line not in range"), so the Python API and the MCP tools say it here, the same way."""
        text = self._served_text(version, path)
        if text is not None:
            where = f"{path} in branch {self.name!r} (version {version.number})"
            arguments.within(where, text, line, column)

    def _served_text(self, version: Version, path: RelPath) -> str | None:
        """`path`'s text at `version` as servers read it (undecodable bytes replaced), or None
        where the servers' own answer says more: no such file, a folder, a staged symlink."""
        if path in version.files:
            data = version.files[path]
            if data is None or version.modes.get(path) == LINK:
                return None
            return data.decode("utf-8", "replace")
        full = self.workspace.folder.path(path)  # PathError: out through a symlink
        if not os.path.isfile(full):  # nor open() a FIFO, which waits for a writer
            return None
        try:
            with open(full, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return None

    # -- runs -------------------------------------------------------------------------------------

    def run(self, cmd: str | Sequence[str], timeout: float = 60, network: bool = False,
            keep: bool = False, **options: Any) -> RunResult:  # fmt: skip
        """Run a command inside the shadow at this branch's version (plus what earlier runs
        wrote). What the run writes stays in the branch's scratch layer: later runs see it,
        lints and accept() do not (`scratch()` and `diff(scratch=True)` list it); with
        `keep=True` what it wrote under the project (files with their modes, symlinks and
        deletions, less .gitignore'd paths, the usual caches and protected paths, which the
        result's notes list) becomes the branch's next version instead. `options` go to
        `run_in_shadow` (python=True runs `cmd` as Python code; mode, env, cwd, output_cap,
        max_processes, max_memory, max_disk (bytes), writable, cancel, sandbox,
        on_output(stream, chunk) hearing output as it comes), each checked before the run is
        queued (ArgumentError naming it). With `keep`, what no version can hold (a file where
        the folder has a directory) stays in scratch and the result's notes say so.
        Runs of other branches go at the same time (up to
        `ws.max_runs`), this branch's in turn; lints are served meanwhile. An interrupt in the
        caller, setting the `cancel` event (from any thread), drop() or closing the workspace
        kills the run and all its processes, or takes it out of the queue (then `cancelled`
        and nothing ran)."""
        cmd, timeout, network, keep = runs.check(cmd, timeout, network, keep, options)
        cancel = options["cancel"]  # the caller's, or a new event (`runs.check`)
        try:
            return self.workspace.bridge.call(runs.run(self, cmd, timeout, network, keep, options))
        except BaseException:
            cancel.set()
            raise

    async def run_async(self, cmd: str | Sequence[str], timeout: float = 60,
                        network: bool = False, keep: bool = False,
                        **options: Any) -> RunResult:  # fmt: skip
        cmd, timeout, network, keep = runs.check(cmd, timeout, network, keep, options)
        cancel = options["cancel"]  # the caller's, or a new event (`runs.check`)
        try:
            return await self.workspace.bridge.call_async(
                runs.run(self, cmd, timeout, network, keep, options))  # fmt: skip
        except BaseException:  # asyncio cancellation (an MCP client's cancel) included
            cancel.set()
            raise

    # -- diff, accept, drop ---------------------------------------------------------------------

    def diff(self, version: int | None = None, scratch: bool = False) -> Diff:
        """The branch's edits against its base at `version` (default: the current one), as a
        unified diff (git style, with mode lines and `Binary files ... differ`); with
        `scratch=True` followed by what runs left in the scratch layer (see `scratch()`)."""
        arguments.flag("scratch", scratch)
        with self.state.lock:
            chosen = self._version(version)
            listing = self.state.scratch.listing() if scratch else []
            return version_diff(chosen.files, self.state.bases, chosen.modes, self.state.modes,
                                listing)  # fmt: skip

    def _version(self, number: int | None) -> Version:
        if number is None:
            return self.state.head
        if isinstance(number, bool) or not isinstance(number, int):
            raise ArgumentError(f"version={number!r}: give a version number (an int)")
        if not 0 <= number < len(self.state.versions):
            raise NotFound(f"branch {self.name!r} has no version {number} (it has 0 to "
                           f"{self.version})")  # fmt: skip
        return self.state.versions[number]

    def accept(self) -> Accepted:
        """Write the branch's files into the user's folder.

        Only where the user's file still equals the branch's base; where the user changed it
        too, a clean three-way merge is written, otherwise ConflictError lists the files and
        nothing at all is written. A merge_check branch is refused the same way while a path
        still holds the conflict markers the merge put there. Every path is checked before
        any is written (a folder or file in the way is a PathError naming it); each file is
        replaced atomically (temp file + rename).
        """
        folder = self.workspace.folder
        with self.state.lock:
            self._check_open()
            version = self.state.head
            unresolved = self.state.unresolved()
            if unresolved:
                raise ConflictError(
                    f"accept {self.name!r}: {_unresolved(unresolved, self.state.conflicts)}; "
                    "nothing was written. Resolve each (stage the content it should have, or "
                    "delete it), then accept",
                    paths=tuple(unresolved),
                )
            plan = merge_plan(version.files, self.state.bases.get,
                              lambda p: folder.file_entry(p)[0],
                              protected=self.workspace.protection.reason)  # fmt: skip
            if plan.conflicts:
                changes = ", ".join(_user_change(folder, p, version.files[p])
                                    for p in plan.conflicts)  # fmt: skip
                raise ConflictError(
                    f"accept {self.name!r}: the user changed {changes} since the branch forked, "
                    "and that does not merge with the branch's edit; nothing was written. The "
                    "branch keeps the base it forked from: fork a new branch (its base is the "
                    "user's version now), stage the edit there, and drop this one",
                    paths=tuple(plan.conflicts),
                )
            for path in version.files:  # only the mode changed: the user's bytes, our mode
                if path in plan.writes or path in plan.protected:
                    continue
                current = folder.file_entry(path)[0]
                if self._mode_changed(version, path) and current is not None:
                    plan.writes[path] = current
            folder.check_writes(plan.writes)
            self._write(version, plan.writes)
            self.state.rebase({p: folder.file_entry(p) for p in version.files
                               if p not in plan.protected})  # fmt: skip
        return Accepted(
            written=tuple(p for p, d in plan.writes.items() if d is not None),
            deleted=tuple(p for p, d in plan.writes.items() if d is None),
            merged=tuple(plan.merged),
        )

    def _write(self, version: Version, writes: Mapping[RelPath, bytes | None]) -> None:
        """Write accept's plan, deletions first (a file deleted may be where a new folder
        goes). A write the disk refuses even so (full, read-only) is a PathError naming it
        and what was written before it; the paths written are the branch's base now."""
        folder = self.workspace.folder
        folder.sweep_temps(writes)  # what an accept killed mid-write left beside them
        done: list[RelPath] = []
        for path, data in sorted(writes.items(), key=lambda item: (item[1] is not None, item[0])):
            try:
                folder.write_atomic(path, data, self._accepted_mode(version, path))
            except OSError as error:
                self.state.rebase({p: folder.file_entry(p) for p in done})
                why, written = error.strerror or str(error), ", ".join(done) or "nothing"
                raise PathError(f"accept {self.name!r}: cannot write {path} ({why}); written "
                                f"before it: {written}; the rest is not written (accept again "
                                "once the cause is gone)") from None  # fmt: skip
            done.append(path)

    def _mode_changed(self, version: Version, path: RelPath) -> bool:
        return path in version.modes and version.modes[path] != self.state.modes.get(path)

    def _accepted_mode(self, version: Version, path: RelPath) -> int | None:
        """The mode accept gives `path`: the branch's when it changed it, else the user's."""
        return version.modes[path] if self._mode_changed(version, path) else None

    def commit(self, ref: str | None = None, message: str | None = None) -> str:
        """Export the branch's files at its current version as a git commit in the folder's
        repository and point `ref` (default: refs/heads/agent/NAME) at it; returns the
        commit's id. The worktree, the index and HEAD are untouched. The parent is the commit
        the branch's base matches (HEAD, or one of its ancestors); where none matches, HEAD,
        and the message says which paths differ."""
        ref = gitexport.default_ref(self.name) if ref is None else ref
        with self.state.lock:
            self._check_open()
            head = self.state.head
            files, bases = head.files, dict(self.state.bases)
            modes = {**self.state.modes, **head.modes}  # the version's, over its bases'
        if message is None:
            message = f"{self.name} v{head.number}: {head.op}"
        if not arguments.text("message", message).strip():
            raise ArgumentError("message is empty (a commit needs a subject); give the "
                                "commit's message, or leave it out for the default")  # fmt: skip
        return gitexport.commit(self.workspace.root, files, modes, bases, ref, message)

    def drop(self) -> None:
        """Forget the branch (its versions and scratch layer), also in the durable store, and
        cancel its runs. The user's folder is untouched."""
        self.state.drop()
        self.workspace.run_queue.cancel(self.state.key)
        self.workspace._forget(self)

    def _check_open(self) -> None:
        self.state.check_open()
        self.workspace.check_open()

    def __repr__(self) -> str:
        return (f"<Branch {self.name!r} v{self.version}: {n_files(len(self.files))} touched, "
                f"{self.state.status}>")  # fmt: skip


def _files_in(full: str, under: str, most: int = 3) -> list[RelPath]:
    """A few files directly in the user's directory `full` (`under`: its workspace path and
    a '/', or '' for the root)."""
    try:
        with os.scandir(full) as entries:
            names = sorted(e.name for e in entries if e.is_file())[:most]
    except OSError:
        return []
    return [rel(f"{under}{name}") for name in names]


def _may_be_old(lints: Sequence[Lint], base_lints: Sequence[Lint]) -> list[RelPath]:
    """The paths where a lint has the code and message of one of the base's: only their line
    maps can change a `new` flag (elsewhere every lint is new whatever the lines)."""
    keys = {(lint.path, lint.key) for lint in base_lints}
    return sorted({lint.path for lint in lints if (lint.path, lint.key) in keys})


async def _line_maps(version: Version, bases: Mapping[RelPath, bytes | None],
                     targets: Sequence[RelPath]) -> dict[RelPath, LineMap]:  # fmt: skip
    """How each staged target's lines map to its base (the `new` column), kept with the
    version or computed in a worker thread: never on the services' loop."""
    files = version.files
    wanted = {p: bases.get(p) or b"" for p in targets if files.present(p)}
    if any(not files.has_line_map(p, base) for p, base in wanted.items()):
        return await asyncio.to_thread(lambda: {p: files.line_map(p, b) for p, b in wanted.items()})
    return {p: files.line_map(p, base) for p, base in wanted.items()}


def _unresolved(paths: Mapping[RelPath, str], conflicts: Conflicts) -> str:
    """What each unresolved path of a merge holds, in a sentence."""
    a, b = conflicts.labels
    holds = {"markers": "the conflict markers merge_check put there",
             "binary": f"{a}'s bytes (a binary file both changed)",
             "deleted": "one side's edit (the other deleted it)"}  # fmt: skip
    return "; ".join(f"{path} still holds {holds[how]}" for path, how in paths.items())


def _user_change(folder: Folder, path: RelPath, mine: bytes | None) -> str:
    """`path` and how the user's change of it meets the branch's, for accept's refusal."""
    theirs = folder.file_entry(path)[0]
    if theirs is None:
        return f"{path} (now a folder)" if folder.holds_files(path) else f"{path} (deleted)"
    if mine is None:
        return f"{path} (the branch deletes it)"
    return f"{path} ({'binary' if is_binary(mine) or is_binary(theirs) else 'overlapping lines'})"
