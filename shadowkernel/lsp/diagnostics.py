"""Diagnostics modes: how a server's diagnostics become final for the text just sent.

Servers differ here more than anywhere else: some answer `textDocument/diagnostic` (pull),
some only publish (push, final when the publish carries the version sent), and
typescript-language-server publishes without a version, so its answer comes from tsserver
directly. Each way is one `DiagnosticsMode`; a `ServerSpec` names the one its server needs
(`diagnostics=PullDiagnostics()`, or a mode's `name`, "pull"), and the client asks it. A
server with a quirk of its own gets a subclass beside its spec; nothing else changes.

A mode reads the client it is given and nothing else: `client.request`, `client.uri(path)`,
`client.documents[path]` (text, version), `client.capabilities`, `client.registered(method)`
and `client.wait_for_registration`, `client.publications` (the publishes heard so far) and
`client.spec`.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from lsprotocol import types as lsp

from ..errors import ServerError
from ..paths import RelPath
from .codec import structure
from .jsonrpc import CONTENT_MODIFIED, SERVER_CANCELLED, ResponseError, ServerCrashed, unanswered
from .patience import patiently

if TYPE_CHECKING:
    from .client import LanguageClient

Diagnostics = list[lsp.Diagnostic]

_PULL = "textDocument/diagnostic"


class DiagnosticsMode(abc.ABC):
    """One way to get the diagnostics of an open document, final for its last version."""

    name: ClassVar[str]  # what a ServerSpec or a jupyter-lsp dict may call it
    lints: ClassVar[bool] = True  # False: the server is never asked (navigation only)

    @abc.abstractmethod
    async def final(self, client: LanguageClient, path: RelPath) -> Diagnostics:
        """The diagnostics for the text of `path` last sent to `client` (it is open)."""


@dataclass(frozen=True)
class PullDiagnostics(DiagnosticsMode):
    """`textDocument/diagnostic` from each provider (static or registered): final by asking.
    Waits (bounded) for the registration, which servers like pyright send late."""

    name: ClassVar[str] = "pull"
    retries: int = 10  # requests the server cancelled because the text moved on

    async def final(self, client: LanguageClient, path: RelPath) -> Diagnostics:
        results = [await self._pull(client, path, i) for i in await self._providers(client)]
        return [d for result in results for d in result]

    async def _providers(self, client: LanguageClient) -> list[str | None]:
        if not pull_identifiers(client):
            # Registration arrives after `initialized`; wait for it (bounded), not a sleep.
            await client.wait_for_registration(_PULL, client.spec.request_timeout)
        if identifiers := pull_identifiers(client):
            return identifiers
        raise ServerError(f"{client.spec.name} did not offer pull diagnostics; set "
                          "diagnostics='push' (or 'auto') in its ServerSpec")  # fmt: skip

    async def _pull(
        self, client: LanguageClient, path: RelPath, identifier: str | None
    ) -> Diagnostics:
        params: dict[str, Any] = {"textDocument": {"uri": client.uri(path)}}
        if identifier:
            params["identifier"] = identifier
        for _ in range(self.retries):
            try:
                raw = await client.request(_PULL, params)
            except ResponseError as error:
                if error.code in (SERVER_CANCELLED, CONTENT_MODIFIED):
                    continue  # the server dropped the request because the text moved on
                raise
            return list(getattr(structure(_PULL, raw), "items", ()) or ())
        raise ServerError(f"{client.spec.name} kept cancelling diagnostics for {path!r}; retry")


@dataclass(frozen=True)
class PushDiagnostics(DiagnosticsMode):
    """Waits for a `publishDiagnostics` that carries the version sent (or a later one).

    A publish without a version cannot be told apart from one for an older text, so it is
    never the answer. With `resends`, one that arrives after the text was sent makes the
    client send the same text again as a new version (didChange), whose publish carries it,
    at most `resends` times: gopls 0.5 publishes a file it has just opened without a version
    and then never again while nothing changes. (Not the default: clangd clears a closed
    file with an unversioned publish and ignores a didChange that changes nothing.)"""

    name: ClassVar[str] = "push"
    resends: int = 0

    async def final(self, client: LanguageClient, path: RelPath) -> Diagnostics:
        for attempt in range(self.resends + 1):
            document = client.documents[path]
            mark = document.unversioned if attempt < self.resends else None
            try:
                return await self._wait(client, path, document.version, mark)
            except UnversionedPublish:
                await client.resend(path)
        raise AssertionError("unreachable: the last attempt ignores unversioned publishes")

    async def _wait(
        self, client: LanguageClient, path: RelPath, version: int, mark: int | None
    ) -> Diagnostics:
        timeout = client.spec.request_timeout
        published = client.publications.wait(client.uri(path), version, None, mark)
        try:
            return await patiently(published, timeout, client)
        except TimeoutError as error:
            doing = f"publish diagnostics for {path!r} version {version}"
            raise ServerError(
                f"{client.spec.name} {unanswered(error, doing, timeout)} (a server that "
                "publishes without a version needs diagnostics='pull' or 'tsserver' in its "
                "ServerSpec)"
            ) from None


@dataclass(frozen=True)
class AutoDiagnostics(DiagnosticsMode):
    """Pull when the server offers it by the time it is asked, push otherwise."""

    name: ClassVar[str] = "auto"

    async def final(self, client: LanguageClient, path: RelPath) -> Diagnostics:
        mode = PullDiagnostics() if pull_identifiers(client) else PushDiagnostics()
        return await mode.final(client, path)


@dataclass(frozen=True)
class TsserverDiagnostics(DiagnosticsMode):
    """typescript-language-server: asks its tsserver synchronously (`executeCommand`), since
    its publishes carry no version."""

    name: ClassVar[str] = "tsserver"

    async def final(self, client: LanguageClient, path: RelPath) -> Diagnostics:
        async def ask(kind: str) -> Diagnostics:
            params = {"command": "typescript.tsserverRequest",
                      "arguments": [kind, {"file": client.uri(path)}]}  # fmt: skip
            raw = await client.request("workspace/executeCommand", params)
            body = raw.get("body", raw) if isinstance(raw, dict) else raw
            return [tsserver_diagnostic(d) for d in body or ()]

        # Both sent at once (tsserver answers in order): one round trip instead of two.
        syntactic, semantic = await asyncio.gather(
            ask("syntacticDiagnosticsSync"), ask("semanticDiagnosticsSync")
        )
        return syntactic + semantic


@dataclass(frozen=True)
class NoDiagnostics(DiagnosticsMode):
    """A server kept for navigation (definition, references, hover, symbols): lints never ask
    it. jedi-language-server's diagnostics are syntax errors only, which ruff reports too, and
    it publishes them a fixed second after each change: every lint waited that second."""

    name: ClassVar[str] = "none"
    lints: ClassVar[bool] = False

    async def final(self, client: LanguageClient, path: RelPath) -> Diagnostics:
        return []


_BUILT_IN = (AutoDiagnostics, PullDiagnostics, PushDiagnostics, TsserverDiagnostics, NoDiagnostics)
MODES: dict[str, type[DiagnosticsMode]] = {mode.name: mode for mode in _BUILT_IN}


def pull_identifiers(client: LanguageClient) -> list[str | None]:
    """One entry per diagnostic provider (static or registered) to pull from."""
    identifiers: list[str | None] = []
    static = client.capabilities.diagnostic_provider
    if static is not None:
        identifiers.append(getattr(static, "identifier", None))
    for options in client.registered(_PULL):
        identifiers.append(options.get("identifier") if isinstance(options, dict) else None)
    return list(dict.fromkeys(identifiers))


_TS_CATEGORY = {"error": 1, "warning": 2, "suggestion": 4, "message": 3}


def tsserver_diagnostic(raw: Mapping[str, Any]) -> lsp.Diagnostic:
    """A tsserver diagnostic (1-based line/offset in UTF-16 units) as an LSP Diagnostic."""
    start, end = raw["start"], raw["end"]
    return lsp.Diagnostic(
        range=lsp.Range(lsp.Position(start["line"] - 1, start["offset"] - 1),
                        lsp.Position(end["line"] - 1, end["offset"] - 1)),
        message=raw.get("text", ""),
        severity=lsp.DiagnosticSeverity(_TS_CATEGORY.get(raw.get("category", "error"), 1)),
        code=raw.get("code"),
        source=raw.get("source") or "typescript",
    )  # fmt: skip


class UnversionedPublish(Exception):
    """The server published for a document without a version after its text was sent."""


class Publications:
    """What the server published (`publishDiagnostics`) per URI, and who waits for a version.
    The client feeds it whatever the mode; `PushDiagnostics` reads it. Publishes without a
    version are counted per URI (`unversioned`), so a waiter can tell one came after a mark."""

    def __init__(self) -> None:
        self._latest: dict[str, tuple[int | None, Diagnostics]] = {}
        self._unversioned: dict[str, int] = {}
        # (uri, version, whether an unversioned publish fails it, future)
        self._waiters: list[tuple[str, int, bool, asyncio.Future[Diagnostics]]] = []

    def unversioned(self, uri: str) -> int:
        """How many publishes without a version `uri` had so far (a mark for `wait`)."""
        return self._unversioned.get(uri, 0)

    def record(self, params: lsp.PublishDiagnosticsParams) -> None:
        uri, version = params.uri, params.version
        if version is None:
            self._unversioned[uri] = self.unversioned(uri) + 1
        else:  # an unversioned publish says nothing about which text it is for
            self._latest[uri] = (version, list(params.diagnostics))
        still = []
        for waited, wanted, strict, future in self._waiters:
            if future.done():
                continue
            if waited == uri and version is not None and version >= wanted:
                future.set_result(list(params.diagnostics))
            elif waited == uri and version is None and strict:
                future.set_exception(UnversionedPublish(uri))
            else:
                still.append((waited, wanted, strict, future))
        self._waiters = still

    async def wait(
        self, uri: str, version: int, timeout: float | None, mark: int | None = None
    ) -> Diagnostics:
        """The diagnostics published for `version` of `uri` or later; TimeoutError if none
        within `timeout` (None: the caller bounds the wait).
        With a `mark` (`unversioned(uri)` when the text was sent), an unversioned publish
        after it raises UnversionedPublish; without one, unversioned publishes are ignored."""
        published = self._latest.get(uri)
        if published and published[0] is not None and published[0] >= version:
            return published[1]
        if mark is not None and self.unversioned(uri) > mark:
            raise UnversionedPublish(uri)
        future: asyncio.Future[Diagnostics] = asyncio.get_running_loop().create_future()
        self._waiters.append((uri, version, mark is not None, future))
        return await asyncio.wait_for(future, timeout)

    def forget(self, uri: str) -> None:
        """The document was closed: what was published for it says nothing about its next text."""
        self._latest.pop(uri, None)

    def fail(self, reason: str) -> None:
        """The server is gone: every waiter gets ServerCrashed(reason)."""
        for *_, future in self._waiters:
            if not future.done():
                future.set_exception(ServerCrashed(reason))
        self._waiters = []
