"""The language-server pool rooted at the shadow: one server per spec, started lazily.

The scheduler switches the shadow (the files under `root`) to branch B at version k, then
calls `sync(documents, changed)`; from then on every answer reflects exactly B@k. A server
is brought to that state when a request asks it, not at every switch (`_Behind`):

- every staged document is open in each server that handles it, with exactly its text;
  documents that are no longer staged are closed (the server falls back to the disk);
- a document opened only to be linted (read from the disk) is closed when its path changes;
- servers that read the disk hear about `changed` paths via didChangeWatchedFiles;
- diagnostics are awaited for the version just sent (see client.py), never by a sleep.

The pool is generic: what differs between servers (how diagnostics become final, where
quick fixes come from, which files they handle) is in their `ServerSpec`; starting,
restarting and idle-stopping the servers is the `Supervisor`'s (supervisor.py).

Caveats: all public calls are serialised by one lock (the scheduler serves one branch at a
time anyway). A crashed server is restarted and the interrupted call retried once; a server
idle for `idle_timeout` seconds is shut down and restarted on the next use.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from lsprotocol import types as lsp

from ..errors import ArgumentError, NotFound, PathError, ServerError, ShadowError
from ..paths import RelPath, rel
from . import navigation
from .client import LanguageClient
from .codec import structure
from .documents import TextIndex, file_uri_path, matches, uri_to_path
from .fixes import fix_from_action
from .lints import Fix, Lint, lint_from_diagnostic, sort_key
from .registry import resolve_specs
from .specs import ServerSpec
from .supervisor import ServerStatistics, Supervisor

T = TypeVar("T")

# Cap on per-diagnostic code-action requests in one lint call (a file with thousands of
# lints would otherwise cost thousands of round trips for fixes nobody reads).
MAX_FIX_REQUESTS = 200


class LspPool:
    def __init__(
        self,
        root: str | os.PathLike[str],
        servers: Sequence[str | ServerSpec | Mapping[str, Any]],
        idle_timeout: float = 900,
        project: str | os.PathLike[str] | None = None,
    ) -> None:
        self.root = Path(root).absolute()
        self._roots = tuple(dict.fromkeys((self.root, self.root.resolve())))
        # Server names mean what the project's configuration says (default: read at root).
        self.project = Path(project).absolute() if project else self.root
        self.specs = resolve_specs(servers, self.project)
        self._servers = Supervisor(self.specs, self.root, idle_timeout, self._open_staged,
                                   self.project)  # fmt: skip
        self._lock = asyncio.Lock()
        self._documents: dict[RelPath, str] = {}
        self._changed: tuple[RelPath, ...] = ()
        self._on_disk: dict[RelPath, bool] = {}
        self._behind: weakref.WeakKeyDictionary[LanguageClient, _Behind] = (
            weakref.WeakKeyDictionary()
        )
        self._closed = False

    async def __aenter__(self) -> LspPool:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Start every server now instead of at the first request (a workspace does so as it
        opens: a server's start, 0.3 s for ruff in the shadow, is then not in the first
        answer). Under the pool's lock, so no switch happens while a server starts; one that
        fails to start is left for the first request to report."""
        async with self._lock:
            for spec in self.specs:
                if not self._closed:
                    with contextlib.suppress(ShadowError, OSError, TimeoutError):
                        await self._servers.start(spec)

    # -- branch state ---------------------------------------------------------------------

    async def sync(
        self, documents: Mapping[RelPath, str] | Mapping[str, str], changed: Iterable[str] = ()
    ) -> None:
        """Make this the state every server answers about (see the module docstring): each
        running server is brought to it by the next request that asks it."""
        docs = {rel(path): text for path, text in documents.items()}
        changed_paths = tuple(dict.fromkeys(rel(p) for p in changed))
        async with self._lock:
            self._check_open()
            previous, self._documents, self._changed = self._documents, docs, changed_paths
            for client in self._servers.running():
                if set(client.spec.restart_on) & set(changed_paths):
                    self._servers.stop(client.spec.name)  # started afresh on next use
            clients = self._servers.running()
            watched = [p for p in changed_paths if any(_hears(c, p) for c in clients)]
            events = self._file_events(watched)
            for client in clients:
                heard = [(path, kind) for path, kind in events if _hears(client, path)]
                self._behind.setdefault(client, _Behind()).missed(previous, changed_paths, heard)

    def saw(self, paths: Iterable[RelPath]) -> None:
        """Note whether each of `paths` is on the disk now, before a switch changes it (the
        servers read them as they are): a file that was there is Changed, not Created, in the
        switch's file events. A type checker takes Created as a new file of the project and
        re-checks all of it (basedpyright on sympy: twice the CPU of a Changed)."""
        for path in paths:
            if path not in self._on_disk:
                self._on_disk[path] = (self.root / path).exists()

    def _file_events(self, changed: Sequence[RelPath]) -> list[tuple[RelPath, lsp.FileChangeType]]:
        events = []
        for path in changed:
            exists = (self.root / path).exists()
            if not exists:
                kind = lsp.FileChangeType.Deleted
            elif self._on_disk.get(path):
                kind = lsp.FileChangeType.Changed
            else:  # new to us: Created makes servers add it to their file lists
                kind = lsp.FileChangeType.Created
            self._on_disk[path] = exists
            events.append((path, kind))
        return events

    async def _run(self, spec: ServerSpec, call: Callable[[LanguageClient], Awaitable[T]]) -> T:
        """`call` on the spec's server, brought to the synced state first."""

        async def brought(client: LanguageClient) -> T:
            await self._bring(client)
            return await call(client)

        return await self._servers.run(spec, brought)

    async def _bring(self, client: LanguageClient) -> None:
        """Tell `client` what changed in the switches it missed (nothing when it missed none)."""
        behind = self._behind.pop(client, None)
        if behind is None:
            return
        # The disk changed first (the FUSE switch), then the editor state: same order here.
        heard = behind.net_events()
        if heard:
            await client.files_changed(heard)
        recheck = client.spec.recheck_open if heard else ""
        for path in list(client.documents):
            gone = path not in self._documents and path in behind.seen
            if gone or recheck == "reopen":  # reopened below, or by the next lint
                await client.close(path)
        sent = {path: doc.version for path, doc in client.documents.items()}
        for path, text in self._documents.items():
            if matches(path, client.spec.patterns):
                await client.put(path, text)
        if recheck == "resend":
            for path, document in list(client.documents.items()):
                if sent.get(path) == document.version:  # same text: recheck against the disk
                    await client.resend(path)

    # -- lints ------------------------------------------------------------------------------

    async def lint(
        self,
        paths: Sequence[str] | None = None,
        servers: Sequence[str] | None = None,
        *,
        fixes: bool = True,
    ) -> list[Lint]:
        """Lints for `paths` (default: the staged and changed files) from every selected
        server that handles them and lints (not one kept for navigation, `NoDiagnostics`);
        files no server handles give no lints."""
        async with self._lock:
            self._check_open()
            targets = self._targets(paths)
            jobs = []
            for spec in linters(self.specs, servers):
                handled = [p for p in targets if matches(p, spec.patterns)]
                if handled:
                    jobs.append(self._run(spec, self._linter(handled, fixes)))
            results = await _all(jobs)
        return sorted((lint for result in results for lint in result), key=sort_key)

    def _targets(self, paths: Sequence[str] | None) -> list[RelPath]:
        if paths is not None:
            return list(dict.fromkeys(rel(p) for p in paths))
        changed = [p for p in self._changed if (self.root / p).is_file()]
        return list(dict.fromkeys([*self._documents, *changed]))

    def _linter(
        self, paths: list[RelPath], fixes: bool
    ) -> Callable[[LanguageClient], Awaitable[list[Lint]]]:
        async def lint_all(client: LanguageClient) -> list[Lint]:
            for path in paths:
                await client.put(path, self._text(path))
            budget = [MAX_FIX_REQUESTS if fixes else 0]
            per_path = await _all([self._lint_one(client, p, budget) for p in paths])
            return [lint for lints in per_path for lint in lints]

        return lint_all

    async def _lint_one(
        self, client: LanguageClient, path: RelPath, budget: list[int]
    ) -> list[Lint]:
        diagnostics = await client.diagnostics(path)
        index = client.documents[path].index
        wanted = diagnostics[: max(budget[0], 0)]
        budget[0] -= len(wanted)
        actions = await self._quick_fixes(client, path, wanted)
        lints = []
        for i, diagnostic in enumerate(diagnostics):
            lint = lint_from_diagnostic(path, index, diagnostic, client.spec.name)
            if i < len(wanted):
                lint = _with_fixes(lint, [self._fix(client, a) for a in actions[i]])
            lints.append(lint)
        return lints

    async def _quick_fixes(
        self, client: LanguageClient, path: RelPath, diagnostics: list[lsp.Diagnostic]
    ) -> list[list[lsp.CodeAction]]:
        """Quick fixes per diagnostic, from the source the server's spec names."""
        if not diagnostics:
            return []
        return await client.spec.quick_fixes.quick_fixes(client, path, diagnostics)

    def _fix(self, client: LanguageClient, action: lsp.CodeAction) -> Fix:
        return fix_from_action(self._resolver(client), action)

    def _text(self, path: RelPath) -> str:
        if path in self._documents:
            return self._documents[path]
        try:
            return (self.root / path).read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            raise NotFound(f"paths: {path!r} is neither staged nor a file under the shadow "
                           f"{self.root}; stage it or check the name") from None  # fmt: skip
        except IsADirectoryError:
            raise PathError(f"paths: {path!r} is a directory; give files") from None

    # -- navigation ------------------------------------------------------------------------------

    async def definition(
        self, path: str, line: int, column: int, server: str | None = None
    ) -> list[navigation.Location]:
        found: list[navigation.Location] = await self._at(
            path, line, column, "definition_provider", server, "textDocument/definition", {}
        )
        return found

    async def references(
        self,
        path: str,
        line: int,
        column: int,
        server: str | None = None,
        include_declaration: bool = True,
    ) -> list[navigation.Location]:
        context = {"context": {"includeDeclaration": include_declaration}}
        found: list[navigation.Location] = await self._at(
            path, line, column, "references_provider", server, "textDocument/references", context
        )
        return found

    async def hover(
        self, path: str, line: int, column: int, server: str | None = None
    ) -> navigation.Hover | None:
        found: navigation.Hover | None = await self._at(
            path, line, column, "hover_provider", server, "textDocument/hover", {}
        )
        return found

    async def symbols(self, path: str, server: str | None = None) -> list[navigation.Symbol]:
        target = rel(path)

        async def ask(client: LanguageClient) -> list[navigation.Symbol]:
            await client.put(target, self._text(target))
            result = await client.document_symbols(target)
            return navigation.symbols(self._resolver(client), client.uri(target), result)

        return await self._first_answer(target, "document_symbol_provider", server, ask)

    async def workspace_symbols(self, query: str) -> list[navigation.Symbol]:
        """Symbols matching `query` from every server of the pool that offers them."""

        async def ask(client: LanguageClient) -> list[navigation.Symbol]:
            raw = await client.request("workspace/symbol", {"query": query})
            return navigation.workspace_symbols(self._resolver(client),
                                                structure("workspace/symbol", raw))  # fmt: skip

        found: list[navigation.Symbol] = []
        async with self._lock:
            self._check_open()
            for spec in self.specs:
                if (await self._servers.client(spec)).supports("workspace_symbol_provider"):
                    found += await self._run(spec, ask)
        return found

    async def _at(
        self,
        path: str,
        line: int,
        column: int,
        provider: str,
        server: str | None,
        method: str,
        extra: dict[str, Any],
    ) -> Any:
        target = rel(path)
        if line < 1 or column < 1:
            raise ArgumentError(f"line={line}, column={column}: positions are 1-based; "
                                "the first column of the first line is 1, 1")  # fmt: skip

        async def ask(client: LanguageClient) -> Any:
            await client.put(target, self._text(target))
            index = client.documents[target].index
            result = await client.position_request(method, target, index.to_lsp(line, column),
                                                   **extra)  # fmt: skip
            if method == "textDocument/hover":
                return navigation.hover(index, result)
            return navigation.locations(self._resolver(client), result)

        return await self._first_answer(target, provider, server, ask)

    async def _first_answer(
        self,
        path: RelPath,
        provider: str,
        server: str | None,
        ask: Callable[[LanguageClient], Awaitable[T]],
    ) -> T:
        """The first non-empty answer from the servers (in pool order) that handle `path`
        and offer `provider` (ruff offers hover only for noqa comments, so ask on)."""
        async with self._lock:
            self._check_open()
            candidates = [s for s in select(self.specs, [server] if server else None)
                          if matches(path, s.patterns)]  # fmt: skip
            if not candidates:
                raise NotFound(f"path {path!r}: no server in this pool handles it "
                               f"({', '.join(s.name for s in self.specs)} take other files); "
                               "open the workspace with a server for such files")  # fmt: skip
            answer: T | None = None
            offered = False
            for spec in candidates:
                if not (await self._servers.client(spec)).supports(provider):
                    continue
                offered = True
                answer = await self._run(spec, ask)
                if answer:
                    return answer
            if not offered:
                what = provider.removesuffix("_provider").replace("_", " ")
                raise NotFound(f"path {path!r}: none of {[s.name for s in candidates]} "
                               f"offers {what}")  # fmt: skip
            return answer  # type: ignore[return-value]  # an empty answer of the last server

    def _resolver(self, client: LanguageClient) -> navigation.Resolver:
        def resolve(uri: str) -> tuple[str, bool, TextIndex]:
            path, inside = uri_to_path(self._roots, uri)
            if inside and path in client.documents:
                return path, True, client.documents[path].index  # type: ignore[index]
            where = self.root / path if inside else Path(file_uri_path(uri))
            try:
                text = where.read_text(encoding="utf-8", errors="replace")
            except OSError:
                text = ""
            return path, inside, TextIndex(text, client.encoding)

        return resolve

    # -- servers -----------------------------------------------------------------------------------

    async def _open_staged(self, client: LanguageClient) -> None:
        """A fresh server opens every staged document it handles (see the module docstring)."""
        self._behind.pop(client, None)  # it reads the disk as it is now
        for path, text in self._documents.items():
            if matches(path, client.spec.patterns):
                await client.put(path, text)

    def statistics(self) -> dict[str, ServerStatistics]:
        """Per server of the pool: state, pid, resident memory (with children), restarts."""
        return self._servers.statistics()

    def client(self, name: str) -> LanguageClient | None:
        """The running client of server `name` (for tests and diagnostics)."""
        return self._servers.get(name)

    async def close(self) -> None:
        self._closed = True
        await self._servers.close()

    def kill(self) -> None:
        """Kill the servers at once, without the loop: for when the loop they ran on ended."""
        self._closed = True
        self._servers.kill()

    def _check_open(self) -> None:
        if self._closed:
            raise ServerError("this LspPool is closed; create a new one")


def select(specs: Sequence[ServerSpec], servers: Sequence[str] | None) -> list[ServerSpec]:
    """The specs `servers` names (all of them for None); NotFound for a name none has."""
    if servers is None:
        return list(specs)
    known = {spec.name for spec in specs}
    if unknown := [s for s in servers if s not in known]:
        raise NotFound(f"servers: {unknown} not in this pool (it has {sorted(known)})")
    return [spec for spec in specs if spec.name in servers]


def linters(specs: Sequence[ServerSpec], servers: Sequence[str] | None) -> list[ServerSpec]:
    """The selected specs that lint; ArgumentError naming one asked by name that is kept for
    navigation only (`NoDiagnostics`), which a lint never waits for."""
    chosen = select(specs, servers)
    if servers is not None and (quiet := [s.name for s in chosen if not s.diagnostics.lints]):
        raise ArgumentError(f"{', '.join(quiet)}: kept for navigation only, not asked for "
                            "lints (diagnostics='none' in its spec)")  # fmt: skip
    return [spec for spec in chosen if spec.diagnostics.lints]


@dataclass
class _Behind:
    """What a running server missed since a request last asked it: the paths that were
    documents or changed meanwhile (an open one not staged now closes), and each watched
    path's first and last file event (told as one net event). Syncing at every switch made
    every server take every branch's text: with ruff and jedi-language-server (kept for
    navigation) a ruff lint of more-itertools' more.py cost twice the CPU of ruff's alone."""

    seen: set[RelPath] = field(default_factory=set)
    events: dict[RelPath, tuple[lsp.FileChangeType, lsp.FileChangeType]] = field(
        default_factory=dict
    )

    def missed(self, documents: Iterable[RelPath], changed: Iterable[RelPath],
               events: Iterable[tuple[RelPath, lsp.FileChangeType]]) -> None:  # fmt: skip
        self.seen.update(documents, changed)
        for path, kind in events:
            first = self.events[path][0] if path in self.events else kind
            self.events[path] = (first, kind)

    def net_events(self) -> list[tuple[RelPath, lsp.FileChangeType]]:
        """One event per path, from what the server knew of it to what the disk shows now."""
        change = lsp.FileChangeType
        kinds = {(True, True): change.Changed, (True, False): change.Deleted,
                 (False, True): change.Created}  # (existed, exists) -> the event  # fmt: skip
        out = []
        for path, (first, last) in self.events.items():
            known = (first != change.Created, last != change.Deleted)
            if known in kinds:  # not created and deleted again unseen
                out.append((path, kinds[known]))
        return out


def _hears(client: LanguageClient, path: RelPath) -> bool:
    """Whether `client` must be told that `path` changed on disk."""
    return client.spec.reads_disk and matches(path, client.spec.watch)


def _with_fixes(lint: Lint, fixes: list[Fix]) -> Lint:
    return replace(lint, fixes=tuple(fixes)) if fixes else lint


async def _all(jobs: Sequence[Coroutine[Any, Any, T]]) -> list[T]:
    """Await concurrently; on the first failure cancel the rest and raise it. One job is
    awaited in this task: a task and its group for each of a lint's one server and one file
    made 6 of the 19 loop iterations a ruff lint took."""
    if len(jobs) == 1:
        return [await jobs[0]]
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(job) for job in jobs]
    except BaseExceptionGroup as failures:
        first: BaseException = failures
        while isinstance(first, BaseExceptionGroup):
            first = first.exceptions[0]
        raise first from None
    return [task.result() for task in tasks]
