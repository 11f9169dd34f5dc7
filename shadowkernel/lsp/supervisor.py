"""Server supervision: one running server per spec, started on first use, restarted after a
crash, stopped when idle, counted.

`run(spec, call)` runs `call` on the spec's server; if the server dies under it, the call is
retried once on a fresh server, and a second crash in a row becomes a ServerError. A server
unused for `idle_timeout` seconds is shut down in the background; the next use starts it
again and `on_start` brings it back to the pool's state (the staged documents).

Caveat: a server that keeps crashing on start is started again on every use; the pool's
callers see each attempt's ServerError.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ..errors import ServerError
from .client import LanguageClient
from .jsonrpc import ServerCrashed
from .specs import ServerSpec

T = TypeVar("T")


@dataclass(frozen=True)
class ServerStatistics:
    name: str
    state: str  # "not started", "running", "crashed", "stopped"
    pid: int | None
    rss: int
    starts: int
    restarts: int
    open_documents: int


class Supervisor:
    def __init__(
        self,
        specs: Sequence[ServerSpec],
        root: Path,
        idle_timeout: float,
        on_start: Callable[[LanguageClient], Awaitable[None]],
        project: Path | None = None,
    ) -> None:
        self.specs = specs
        self.root = root
        self.project = project or root  # the user's folder (what `spec.prepare` translates)
        self.idle_timeout = idle_timeout
        self._on_start = on_start
        self._clients: dict[str, LanguageClient] = {}
        self._start_locks: dict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._starts: dict[str, int] = defaultdict(int)
        self._restarts: dict[str, int] = defaultdict(int)
        self._idle: dict[str, asyncio.TimerHandle] = {}
        self._busy: dict[str, int] = defaultdict(int)
        self._stopping: set[asyncio.Task[Any]] = set()
        self._closed = False

    async def run(self, spec: ServerSpec, call: Callable[[LanguageClient], Awaitable[T]]) -> T:
        """Run `call` on the server, restarting it and retrying once if it crashes."""
        for attempt in (1, 2):
            client = await self.client(spec)
            self._busy[spec.name] += 1
            try:
                return await call(client)
            except ServerCrashed as error:
                client.abandon()
                if attempt == 2:
                    raise ServerError(f"{spec.name} crashed twice in a row: {error}. "
                                      "See pool.statistics(); check the server's "
                                      "installation and settings") from error  # fmt: skip
            finally:
                self._busy[spec.name] -= 1
                self._arm_idle(spec.name)
        raise AssertionError("unreachable")

    async def start(self, spec: ServerSpec) -> None:
        """Start the spec's server ahead of its first use (it stops when idle, as if used)."""
        await self.client(spec)
        self._arm_idle(spec.name)

    async def client(self, spec: ServerSpec) -> LanguageClient:
        """The spec's running server, started (or restarted) if it is not alive."""
        async with self._start_locks[spec.name]:
            client = self._clients.get(spec.name)
            if client is not None and client.alive:
                return client
            if client is not None:
                self._restarts[spec.name] += client.state == "crashed"
                client.kill()
            client = await LanguageClient.start(spec, self.root, self.project)
            self._starts[spec.name] += 1
            self._clients[spec.name] = client
            await self._on_start(client)
            return client

    def running(self) -> list[LanguageClient]:
        return [c for c in self._clients.values() if c.alive]

    def get(self, name: str) -> LanguageClient | None:
        """The latest client of server `name`, alive or not (None before its first start)."""
        return self._clients.get(name)

    def _arm_idle(self, name: str) -> None:
        if handle := self._idle.pop(name, None):
            handle.cancel()
        if not self._closed:
            loop = asyncio.get_running_loop()
            self._idle[name] = loop.call_later(self.idle_timeout, self._on_idle, name)

    def _on_idle(self, name: str) -> None:
        client = self._clients.get(name)
        if client is None or not client.alive:
            return
        if self._busy[name]:
            self._arm_idle(name)
            return
        self.stop(name)

    def stop(self, name: str) -> None:
        """Shut the server down in the background; its next use starts it afresh."""
        client = self._clients.get(name)
        if client is None or not client.alive:
            return
        task = client.retire()
        self._stopping.add(task)  # held until done: the loop keeps only weak references
        task.add_done_callback(self._stopping.discard)

    def statistics(self) -> dict[str, ServerStatistics]:
        """Per server: state, pid, resident memory (with children), starts and restarts."""
        return {spec.name: self._statistics(spec.name) for spec in self.specs}

    def _statistics(self, name: str) -> ServerStatistics:
        client = self._clients.get(name)
        running = client if client is not None and client.alive else None
        return ServerStatistics(
            name=name,
            state=client.state if client else "not started",
            pid=running.process.pid if running else None,
            rss=running.rss() if running else 0,
            starts=self._starts[name],
            restarts=self._restarts[name],
            open_documents=len(running.documents) if running else 0,
        )

    def kill(self) -> None:
        """Kill every server's processes now, touching nothing of the loop (it has ended)."""
        self._closed = True
        for client in self._clients.values():
            client.kill_processes()

    async def close(self) -> None:
        self._closed = True
        for handle in self._idle.values():
            handle.cancel()
        clients, self._clients = list(self._clients.values()), {}
        await asyncio.gather(*(c.shutdown(timeout=3) for c in clients), return_exceptions=True)
