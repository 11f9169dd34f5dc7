"""One language server process and the LSP conversation with it.

The client keeps the server's open documents (with versions that only grow, also across a
close and reopen, so a late publish for an old text can never pass for a new one; a change is
sent as one ranged edit to servers that sync incrementally, the full text to others), answers
every request the server sends, and offers `diagnostics(path)` that returns only when the
diagnostics are final for the text just sent: how, its spec's `DiagnosticsMode` decides
(diagnostics.py). It knows no server by name.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import signal
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp

from ..errors import ServerError
from ..paths import RelPath
from .codec import structure, structure_params, unstructure
from .diagnostics import Publications
from .documents import Encoding, TextIndex, changes_after, path_to_uri
from .jsonrpc import Endpoint
from .languages import language_id
from .patience import patiently
from .process import ServerProcess, spawn
from .specs import ServerSpec

# Requests a server may send that need nothing but an empty success (an error answer makes
# some servers exit: pyright 1.1.414 does on workspace/diagnostic/refresh).
_NULL_REQUESTS = {
    "window/workDoneProgress/create", "workspace/diagnostic/refresh",
    "workspace/semanticTokens/refresh", "workspace/inlayHint/refresh",
    "workspace/inlineValue/refresh", "workspace/codeLens/refresh",
    "workspace/foldingRange/refresh", "window/showMessageRequest",
}  # fmt: skip


# What servers commonly answer to `initialize` (unions are built when a value first needs them).
_TYPICAL_CAPABILITIES = {
    "positionEncoding": "utf-16", "textDocumentSync": {"openClose": True, "change": 2},
    "diagnosticProvider": {"identifier": "x", "interFileDependencies": False,
                           "workspaceDiagnostics": False},
    "codeActionProvider": {"codeActionKinds": ["quickfix"], "resolveProvider": True},
    "completionProvider": {"triggerCharacters": ["."]}, "hoverProvider": True,
    "definitionProvider": True, "referencesProvider": True, "documentSymbolProvider": True,
    "renameProvider": {"prepareProvider": True}, "executeCommandProvider": {"commands": ["x"]},
    "workspace": {"workspaceFolders": {"supported": True, "changeNotifications": True}},
}  # fmt: skip


def warm_codec() -> None:
    """Build lsprotocol's converter hooks for what every server's start and lints exchange.
    Their first use generates code for the whole capabilities tree (about 0.1 s of CPU; later
    uses take microseconds): a workspace calls this in a thread while its shadows mount, so
    the servers' start on the services loop does not pay it before the first answer."""
    root = "file:///"
    unstructure(lsp.InitializeParams(
        capabilities=client_capabilities(), process_id=os.getpid(), root_uri=root,
        workspace_folders=[lsp.WorkspaceFolder(uri=root, name="root")],
        client_info=lsp.ClientInfo(name="shadowkernel"),
    ))  # fmt: skip
    structure("initialize", {"capabilities": _TYPICAL_CAPABILITIES, "serverInfo": {"name": "x"}})
    structure("textDocument/diagnostic", {"kind": "full", "items": []})
    structure_params("textDocument/publishDiagnostics", {"uri": root, "diagnostics": []})


def client_capabilities() -> lsp.ClientCapabilities:
    markup = [lsp.MarkupKind.Markdown, lsp.MarkupKind.PlainText]
    return lsp.ClientCapabilities(
        general=lsp.GeneralClientCapabilities(position_encodings=[lsp.PositionEncodingKind.Utf16]),
        workspace=lsp.WorkspaceClientCapabilities(
            apply_edit=False,  # server edits are never applied: nothing reaches the disk
            configuration=True,
            workspace_folders=True,
            did_change_watched_files=lsp.DidChangeWatchedFilesClientCapabilities(
                dynamic_registration=True, relative_pattern_support=True),
            diagnostics=lsp.DiagnosticWorkspaceClientCapabilities(refresh_support=True),
        ),
        text_document=lsp.TextDocumentClientCapabilities(
            synchronization=lsp.TextDocumentSyncClientCapabilities(did_save=False),
            publish_diagnostics=lsp.PublishDiagnosticsClientCapabilities(
                version_support=True, related_information=True, code_description_support=True),
            # dynamic registration: pyright offers pull diagnostics only this way
            diagnostic=lsp.DiagnosticClientCapabilities(dynamic_registration=True),
            code_action=lsp.CodeActionClientCapabilities(
                code_action_literal_support=lsp.ClientCodeActionLiteralOptions(
                    code_action_kind=lsp.ClientCodeActionKindOptions(
                        value_set=[lsp.CodeActionKind.QuickFix])),
                is_preferred_support=True),
            definition=lsp.DefinitionClientCapabilities(link_support=True),
            references=lsp.ReferenceClientCapabilities(),
            hover=lsp.HoverClientCapabilities(content_format=markup),
            document_symbol=lsp.DocumentSymbolClientCapabilities(
                hierarchical_document_symbol_support=True),
        ),
        window=lsp.WindowClientCapabilities(work_done_progress=False),
    )  # fmt: skip


def lookup_section(settings: Mapping[str, Any], section: str | None) -> Any:
    """`settings` at a dotted section ('python.analysis'), None when absent."""
    node: Any = settings
    for part in (section or "").split("."):
        if not part:
            continue
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


class OpenDocument:
    __slots__ = ("text", "version", "encoding", "unversioned", "_index")

    def __init__(self, text: str, version: int, encoding: Encoding, unversioned: int,
                 index: TextIndex | None = None) -> None:  # fmt: skip
        self.text = text
        self.version = version
        self.encoding = encoding
        self.unversioned = unversioned  # the server's unversioned publishes when it was sent
        self._index = index

    @property
    def index(self) -> TextIndex:
        """The text's line index, on first use (a document synced on a switch but not asked
        about is never scanned), or carried forward from the version before."""
        if self._index is None:
            self._index = TextIndex(self.text, self.encoding)
        return self._index


class LanguageClient:
    """A started server: `await LanguageClient.start(spec, root)`."""

    def __init__(self, spec: ServerSpec, root: Path, process: ServerProcess) -> None:
        self.spec = spec
        self.root = root
        self.process = process
        self.state = "starting"
        self.encoding: Encoding = "utf-16"
        self.capabilities = lsp.ServerCapabilities()
        self.documents: dict[RelPath, OpenDocument] = {}
        self.stderr: collections.deque[str] = collections.deque(maxlen=50)
        self._versions: dict[RelPath, int] = {}
        self._uris: dict[RelPath, str] = {}  # path -> its file URI under root
        self.publications = Publications()
        self._registrations: dict[str, lsp.Registration] = {}
        self._registered = asyncio.Event()
        self._stopping = False
        self._cpu_read = (-CPU_READ_EVERY, 0.0)  # (when, CPU seconds) of the last walk
        self._tasks: list[asyncio.Task[Any]] = []
        assert process.stdout is not None and process.stdin is not None
        self.endpoint = Endpoint(spec.name, process.stdout, process.stdin, self._on_request,
                                 self._on_notification, self)  # fmt: skip

    # -- life cycle ---------------------------------------------------------------------

    @classmethod
    async def start(
        cls, spec: ServerSpec, root: Path, project: Path | None = None
    ) -> LanguageClient:
        command = spec.command(root, project)
        env = {**os.environ, **spec.env} if spec.env else None
        process = await spawn(command, root, env, limit=1 << 24)
        client = cls(spec, root, process)
        client._tasks = [asyncio.create_task(client._drain_stderr()),
                         asyncio.create_task(client._watch_exit())]  # fmt: skip
        try:
            await client._initialize()
        except BaseException:
            client.kill()
            raise
        background_helpers(process.pid)  # V8 made its helper threads as the server started
        return client

    async def _initialize(self) -> None:
        uri = self.root.as_uri()
        params = lsp.InitializeParams(
            capabilities=client_capabilities(),
            process_id=os.getpid(),
            root_uri=uri,
            root_path=str(self.root),
            workspace_folders=[lsp.WorkspaceFolder(uri=uri, name=self.root.name or "root")],
            initialization_options=self.spec.initialization_options,
            client_info=lsp.ClientInfo(name="shadowkernel"),
        )
        raw = await self.request("initialize", unstructure(params))
        result: lsp.InitializeResult = structure("initialize", raw)
        self.capabilities = result.capabilities
        self.encoding = str(result.capabilities.position_encoding or "utf-16")  # type: ignore[assignment]
        await self.endpoint.notify("initialized", {})
        if self.spec.settings and not self.spec.pulls_settings:
            await self.endpoint.notify("workspace/didChangeConfiguration",
                                       {"settings": dict(self.spec.settings)})  # fmt: skip
        self.state = "running"

    async def shutdown(self, timeout: float = 5.0) -> None:
        """Polite shutdown (shutdown request, exit), then kill if it does not end in time."""
        self._stopping = True
        if self.process.returncode is None:
            with contextlib.suppress(ServerError, OSError):
                await self.endpoint.request("shutdown", None, timeout, patient=False)
                await self.endpoint.notify("exit", None)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.process.wait(), timeout)
        self.kill()
        # Reap it and let the pipes close, so no transport outlives the loop.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.process.wait(), timeout)
            await asyncio.wait_for(asyncio.gather(*self._tasks, return_exceptions=True), timeout)
        self.state = "stopped"

    def kill(self) -> None:
        self.kill_processes()
        self.endpoint.close("the server was stopped")

    def kill_processes(self) -> None:
        """SIGKILL the server's process group; touches nothing of the loop (it may have ended)."""
        self._stopping = True
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)

    def abandon(self) -> None:
        """A request saw the server die: kill what is left; it counts as a crash."""
        self.state = "crashed"
        self.kill()

    def retire(self) -> asyncio.Task[None]:
        """Shut down in the background; not alive from now on, so a next use starts afresh."""
        self.state = "stopping"
        return asyncio.ensure_future(self.shutdown())

    @property
    def alive(self) -> bool:
        return self.state == "running" and self.process.returncode is None

    async def _drain_stderr(self) -> None:
        # A chatty server blocks on a full pipe unless someone reads it.
        assert self.process.stderr is not None
        while line := await self.process.stderr.readline():
            self.stderr.append(line.decode(errors="replace").rstrip())

    async def _watch_exit(self) -> None:
        code = await self.process.wait()
        if not self._stopping:
            self.state = "crashed"
            tail = " | ".join(list(self.stderr)[-5:])
            reason = f"the server exited with code {code}" + (f" (stderr: {tail})" if tail else "")
            self.endpoint.close(reason)
            self.publications.fail(f"{self.spec.name}: {reason}")

    # -- requests -------------------------------------------------------------------------

    async def request(self, method: str, params: Any, timeout: float | None = None) -> Any:
        return await self.endpoint.request(method, params, timeout or self.spec.request_timeout)

    async def _on_request(self, method: str, params: Any) -> Any:
        if method == "workspace/configuration":
            items = (params or {}).get("items", [])
            return [lookup_section(self.spec.settings, item.get("section")) for item in items]
        if method == "client/registerCapability":
            for registration in structure_params(method, params).registrations:
                self._registrations[registration.id] = registration
            self._registered.set()
            return None
        if method == "client/unregisterCapability":
            for item in (params or {}).get("unregisterations", []):
                self._registrations.pop(item.get("id"), None)
            return None
        if method == "workspace/workspaceFolders":
            return [{"uri": self.root.as_uri(), "name": self.root.name or "root"}]
        if method == "workspace/applyEdit":
            return {"applied": False, "failureReason": "shadowkernel never applies server edits"}
        if method == "window/showDocument":
            return {"success": False}
        # Unknown requests get an empty success too, never an error (see _NULL_REQUESTS).
        return None

    def _on_notification(self, method: str, params: Any) -> None:
        if method == "textDocument/publishDiagnostics":
            self.publications.record(structure_params(method, params))
        elif method == "window/logMessage":
            self.stderr.append(str((params or {}).get("message", ""))[:500])

    # -- documents --------------------------------------------------------------------------

    def uri(self, path: RelPath) -> str:
        uri = self._uris.get(path)
        if uri is None:  # pathlib's as_uri costs ~0.1 ms: several per lint of a file
            uri = self._uris[path] = path_to_uri(self.root, path)
        return uri

    def _next_version(self, path: RelPath) -> int:
        self._versions[path] = self._versions.get(path, 0) + 1
        return self._versions[path]

    async def put(self, path: RelPath, text: str) -> None:
        """Make `path` open with exactly `text` (didOpen, or didChange when it differs)."""
        current = self.documents.get(path)
        if current is not None and current.text == text:
            return
        await self._send(path, text, opened=current is not None)

    async def resend(self, path: RelPath) -> None:
        """Send the open text of `path` again as a new version (didChange): the server checks
        it afresh against what it reads from disk, and its next publish carries the version."""
        await self._send(path, self.documents[path].text, opened=True)

    async def _send(self, path: RelPath, text: str, opened: bool) -> None:
        version = self._next_version(path)
        mark = self.publications.unversioned(self.uri(path))
        previous = self.documents.get(path)
        changes, index = None, None
        if opened and previous is not None and self._incremental:
            changes, index = changes_after(previous.index, text)
        self.documents[path] = OpenDocument(text, version, self.encoding, mark, index)
        if not opened:
            languages = self.spec.language_ids
            item = {"uri": self.uri(path), "languageId": language_id(path, languages),
                    "version": version, "text": text}  # fmt: skip
            await self.endpoint.notify("textDocument/didOpen", {"textDocument": item})
            return
        await self.endpoint.notify("textDocument/didChange", {
            "textDocument": {"uri": self.uri(path), "version": version},
            "contentChanges": changes or [{"text": text}], **self.spec.did_change,
        })  # fmt: skip

    @property
    def _incremental(self) -> bool:
        """The server takes ranged changes; else every change carries the full text (valid
        whatever sync kind the server asked for)."""
        sync = self.capabilities.text_document_sync
        kind = sync.change if isinstance(sync, lsp.TextDocumentSyncOptions) else sync
        return kind == lsp.TextDocumentSyncKind.Incremental

    async def close(self, path: RelPath) -> None:
        if self.documents.pop(path, None) is not None:
            self.publications.forget(self.uri(path))
            await self.endpoint.notify("textDocument/didClose",
                                       {"textDocument": {"uri": self.uri(path)}})  # fmt: skip

    async def files_changed(self, changes: list[tuple[RelPath, lsp.FileChangeType]]) -> None:
        if changes:
            events = [{"uri": self.uri(p), "type": int(kind)} for p, kind in changes]
            await self.endpoint.notify("workspace/didChangeWatchedFiles", {"changes": events})

    # -- diagnostics ------------------------------------------------------------------------

    def registered(self, method: str) -> list[Any]:
        """The options of each dynamic registration of `method` the server holds now."""
        return [r.register_options for r in self._registrations.values() if r.method == method]

    async def wait_for_registration(self, method: str, timeout: float) -> None:
        """Until the server registers `method` (dynamically), for at most `timeout` seconds."""
        with contextlib.suppress(TimeoutError):  # a server starting up works: patiently
            await patiently(self._registration(method), timeout, self)

    async def _registration(self, method: str) -> None:
        while not self.registered(method):
            self._registered.clear()
            await self._registered.wait()

    async def diagnostics(self, path: RelPath) -> list[lsp.Diagnostic]:
        """Diagnostics final for the text of `path` last sent (it must be open)."""
        if path not in self.documents:
            raise ServerError(f"{self.spec.name}: {path!r} is not open; call put() first")
        return await self.spec.diagnostics.final(self, path)

    async def code_actions(
        self, path: RelPath, diagnostics: Sequence[lsp.Diagnostic]
    ) -> list[lsp.CodeAction]:
        """Quick fixes for `diagnostics`, asked over the range that spans them all."""
        if not self.capabilities.code_action_provider or not diagnostics:
            return []
        start = min((d.range.start for d in diagnostics), key=lambda p: (p.line, p.character))
        end = max((d.range.end for d in diagnostics), key=lambda p: (p.line, p.character))
        params = lsp.CodeActionParams(
            text_document=lsp.TextDocumentIdentifier(self.uri(path)),
            range=lsp.Range(start, end),
            context=lsp.CodeActionContext(diagnostics=list(diagnostics),
                                          only=[lsp.CodeActionKind.QuickFix]),
        )  # fmt: skip
        raw = await self.request("textDocument/codeAction", unstructure(params))
        actions = structure("textDocument/codeAction", raw) or []
        return [a for a in actions if isinstance(a, lsp.CodeAction) and _is_quick_fix(a)]

    # -- navigation ---------------------------------------------------------------------------

    def supports(self, provider: str) -> bool:
        return bool(getattr(self.capabilities, provider, None))

    async def position_request(
        self, method: str, path: RelPath, position: lsp.Position, **extra: Any
    ) -> Any:
        params = {"textDocument": {"uri": self.uri(path)}, "position": unstructure(position),
                  **extra}  # fmt: skip
        return structure(method, await self.request(method, params))

    async def document_symbols(self, path: RelPath) -> Any:
        raw = await self.request("textDocument/documentSymbol",
                                 {"textDocument": {"uri": self.uri(path)}})  # fmt: skip
        return structure("textDocument/documentSymbol", raw)

    # -- statistics -----------------------------------------------------------------------------

    def rss(self) -> int:
        """Resident memory of the server and its child processes, in bytes."""
        return sum(_rss(pid) for pid in _process_tree(self.process.pid))

    def cpu_seconds(self) -> float:
        """CPU time the server and its child processes (running or ended) used so far:
        growing while it works.
        Walked at most every CPU_READ_EVERY seconds: each request reads it (patience.py), and
        a walk of /proc cost ruff's answers 0.13 ms each."""
        now = time.monotonic()
        if now - self._cpu_read[0] >= CPU_READ_EVERY:
            self._cpu_read = (now, sum(_cpu_seconds(p) for p in _process_tree(self.process.pid)))
        return self._cpu_read[1]

    def waiting(self) -> bool:
        """A thread of the server or of a child process is runnable (waits for a core) or
        in an uninterruptible wait (the disk, a FUSE read the lane's overlay serves)."""
        return tree_waiting(self.process.pid)


def tree_waiting(pid: int) -> bool:
    """A thread of `pid` or of its descendants is runnable or in an uninterruptible wait."""
    tasks = [task for process in _process_tree(pid) for task in _tasks(process)]
    return any(_stat(task)[:1] in ([b"R"], [b"D"]) for task in tasks)


# Chromium's background priority on Linux, what it runs V8's helper threads at: below the
# thread that answers, far above an idle one (nice 19).
HELPER_NICE = 10


def background_helpers(pid: int) -> None:
    """Run every thread but the main one of each Node process in `pid`'s tree (V8's JIT
    compilers and concurrent garbage collector, libuv's pool) HELPER_NICE below its main
    thread, as Chromium runs V8's helpers. Node runs them at the main thread's priority, so on
    a busy machine the thread that answers waits for a core behind them: pyright warming up,
    serving 20 branches on 2 cores, spent 1.0-1.1 s in the run queue before their first
    answers, 0.2-0.3 s with this. Other servers' threads do their real work (ruff's, clangd's)
    and keep theirs."""
    for process in _process_tree(pid):
        if not _is_node(process):
            continue
        for task in _tasks(process):
            thread = int(task.rpartition("/")[2])
            if thread == process:  # the main thread: the one that answers
                continue
            with contextlib.suppress(OSError):  # ended meanwhile
                nice = os.getpriority(os.PRIO_PROCESS, thread)  # relative: never raised
                os.setpriority(os.PRIO_PROCESS, thread, min(19, nice + HELPER_NICE))


def _is_node(pid: int) -> bool:
    try:
        return os.path.basename(os.readlink(f"/proc/{pid}/exe")) in ("node", "nodejs")
    except OSError:  # ended, or not ours to read
        return False


def _process_tree(pid: int) -> list[int]:
    pids, todo = [], [pid]
    while todo:
        current = todo.pop()
        pids.append(current)
        for task in _tasks(current):
            todo += [int(child) for child in _read(task, "children").split()]
    return pids


def _tasks(pid: int) -> list[str]:
    """The /proc folders of `pid`'s threads (os.listdir: a third of what Path.glob costs,
    and requests read the tree often)."""
    folder = f"/proc/{pid}/task"
    try:
        return [f"{folder}/{task}" for task in os.listdir(folder)]
    except OSError:  # the process ended
        return []


def _read(folder: str, name: str) -> bytes:
    try:
        with open(f"{folder}/{name}", "rb") as f:
            return f.read()
    except OSError:  # the thread or process ended
        return b""


def _stat(folder: str) -> list[bytes]:
    """The fields of a process's or thread's `stat` after its name (state first; the name
    may hold spaces and parentheses); empty once it ended."""
    return _read(folder, "stat").rpartition(b")")[2].split()


_TICKS = os.sysconf("SC_CLK_TCK")
# Seconds a reading of a server's CPU is reused: far below any window (patience.py compares
# readings a window apart, so each window's end reads afresh), far above a request's gap.
CPU_READ_EVERY = 0.1


def _cpu_seconds(pid: int) -> float:
    # utime, stime, and cutime, cstime: of the children it waited for (a probe it ran)
    return sum(int(field) for field in _stat(f"/proc/{pid}")[11:15]) / _TICKS


def _rss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _is_quick_fix(action: lsp.CodeAction) -> bool:
    # Asked with only=[quickfix]; some servers (ruff) add source actions regardless.
    kind = str(action.kind or lsp.CodeActionKind.QuickFix)
    return kind == lsp.CodeActionKind.QuickFix or kind.startswith(f"{lsp.CodeActionKind.QuickFix}.")
