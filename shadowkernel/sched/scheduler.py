"""The interleaver: many branches' requests, served by a few shadows (lanes), one at a time each.

A request is a `job(lane)` coroutine function plus who asked (branch, version, op). Each lane
(one shadow, its own language-server pool) runs a worker task that asks the pure
`RequestQueue` what to serve next, runs the job and records an `Event`. A job brings the lane
to the state it needs with `await lane.show(snapshot)`: the shadow activates the snapshot's
manifest and the pool is synced to its documents; a lane already showing it does nothing, which
is why consecutive requests of one branch cost no switch.

Everything here runs on the workspace's one event loop; callers on other threads go through
`asyncio.run_coroutine_threadsafe` (see workspace.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import time
from collections.abc import Awaitable, Callable, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from ..lsp import LspPool
from ..lsp.documents import matches
from ..overlay.shadow import Shadow
from ..overlay.store import Manifest, changed_paths
from ..paths import RelPath
from .policy import SINGLE_FILE_SERVERS, Policy, RequestQueue
from .timeline import OUTSIDE, Answer, Event, Kind

T = TypeVar("T")

# Who is asking: set by a face serving an outside client (the MCP server) around its API
# calls; the context travels with the call into the loop thread, and the event records it.
_CLIENT: contextvars.ContextVar[str] = contextvars.ContextVar("shadowkernel_client", default="")


@contextlib.contextmanager
def acting_for(client: str) -> Iterator[None]:
    """Requests made inside this block are recorded on the timeline as `client`'s."""
    token = _CLIENT.set(client)
    try:
        yield
    finally:
        _CLIENT.reset(token)


@dataclass(frozen=True)
class Snapshot:
    """One exact state to show: equal keys promise equal manifests and documents."""

    key: Hashable
    manifest: Manifest
    documents: Mapping[RelPath, str] = field(default_factory=dict)


class Lane:
    """One shadow and its pool; remembers which snapshot it shows and what switching cost."""

    def __init__(self, index: int, shadow: Shadow, pool: LspPool, threaded: bool) -> None:
        self.index = index
        self.shadow = shadow
        self.pool = pool
        self.key: Hashable = None
        self.switch_seconds = 0.0  # spent in show() during the current request
        self._written: set[RelPath] = set()  # paths written behind the manifest's back (runs)
        # With several lanes the blocking activate call goes to a thread, so one lane's
        # switch does not stall another lane's language-server traffic.
        self._threaded = threaded
        # Servers that read nothing but their open documents (single-file linters): a switch
        # that changes only such documents needs no new manifest on the mount.
        specs = getattr(pool, "specs", None) or ()
        self._documents_only = bool(specs) and all(s.name in SINGLE_FILE_SERVERS for s in specs)
        self.mount_switches = 0  # how many shows activated a manifest (the rest synced only)

    async def show(self, snapshot: Snapshot) -> None:
        if snapshot.key == self.key and not self._written:
            return
        began = time.perf_counter()
        self.key = None  # unknown until both steps succeeded
        changed = set(changed_paths(self.shadow.manifest, snapshot.manifest)) | self._written
        mount = not self._documents_suffice(changed, snapshot)
        if not mount:
            changed = set()  # the mount keeps its old bytes; the servers read the documents
        elif self._threaded:
            await asyncio.to_thread(self.shadow.activate, snapshot.manifest)
        else:
            self.shadow.activate(snapshot.manifest)
        await self.pool.sync(snapshot.documents, sorted(changed))
        if mount:
            self._written.clear()
            self.mount_switches += 1
        self.key = snapshot.key
        self.switch_seconds += time.perf_counter() - began

    def _documents_suffice(self, changed: set[RelPath], snapshot: Snapshot) -> bool:
        """Every path the mount shows differently is an open document of every server, and
        the servers read nothing else: the mount may keep showing what it shows."""
        if not self._documents_only or self._written:
            return False
        return all(p in snapshot.documents and all(matches(p, s.patterns) for s in self.pool.specs)
                   for p in changed)  # fmt: skip

    def run_wrote(self, paths: set[RelPath]) -> None:
        """Something (a run) changed these paths on the mount: re-sync them on the next show."""
        self._written |= paths
        self.key = None


# A job brings its lane to the state it needs and returns an Answer.
Job = Callable[[Lane], Awaitable[Answer[T]]]


@dataclass
class _Request(Generic[T]):
    branch: str
    version: int
    kind: Kind
    op: str
    job: Job[T]
    future: asyncio.Future[T]
    queued: float
    client: str = ""


class Scheduler:
    """Queue requests for `lanes`; `submit` returns the job's result (or raises its error)."""

    def __init__(
        self,
        lanes: list[Lane],
        policy: Policy = "round-robin",
        batch: int = 8,
        origin: float | None = None,
    ) -> None:
        self.lanes = lanes
        self.queue: RequestQueue[_Request[Any]] = RequestQueue(policy, batch)
        self.events: list[Event] = []
        self.origin = time.perf_counter() if origin is None else origin
        self._wake = [asyncio.Event() for _ in lanes]
        self._workers: list[asyncio.Task[None]] = []

    def start(self) -> None:
        """Start one worker per lane (call on the event loop)."""
        self._workers = [asyncio.create_task(self._work(lane)) for lane in self.lanes]

    def now(self) -> float:
        return time.perf_counter() - self.origin

    async def submit(self, branch: str, version: int, kind: Kind, op: str, job: Job[T]) -> T:
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        request = _Request(branch, version, kind, op, job, future, self.now(), _CLIENT.get())
        self.queue.push(branch, request)
        self._kick()
        return await asyncio.shield(future)  # a caller giving up does not abort the serve

    def _kick(self) -> None:
        for event in self._wake:
            event.set()

    async def _work(self, lane: Lane) -> None:
        wake = self._wake[lane.index]
        while True:
            ticket = self.queue.pop(lane.index)
            if ticket is None:
                wake.clear()  # no await since pop(): no wakeup can be lost in between
                await wake.wait()
                continue
            try:
                await self._serve(lane, ticket.id, ticket.payload)
            finally:
                self.queue.done(lane.index)
                self._kick()  # the branch is free again: another lane may take its requests

    async def _serve(self, lane: Lane, id: int, request: _Request[Any]) -> None:
        started = self.now()
        lane.switch_seconds = 0.0
        answer: Answer[Any] | None = None
        try:
            answer = await request.job(lane)
            ok, outcome = True, answer.outcome
        except asyncio.CancelledError:
            request.future.cancel()
            raise
        except Exception as error:  # the caller gets it; the timeline records it
            ok, outcome = False, f"{type(error).__name__}: {error}"[:200]
            if not request.future.done():
                request.future.set_exception(error)
        else:
            if not request.future.done():
                request.future.set_result(answer.value)
        counts = (answer.lints, answer.new_lints, answer.exit_code) if answer else (None,) * 3
        self.events.append(
            Event(id, request.branch, request.version, request.op, request.kind, lane.index,
                  request.queued, started, lane.switch_seconds, self.now(), ok, outcome,
                  request.client, *counts)
        )  # fmt: skip

    def record(self, branch: str, version: int, kind: Kind, op: str, queued: float,
               started: float, *, switch: float = 0.0, ok: bool = True, outcome: str = "",
               exit_code: int | None = None) -> Event:  # fmt: skip
        """Put work served outside the lanes on the timeline, ending now: a run in a view of
        its own (lane -1), which waited `started - queued` for its turn."""
        event = Event(self.queue.take_id(), branch, version, op, kind, OUTSIDE, queued, started,
                      switch, self.now(), ok, outcome, _CLIENT.get(),
                      exit_code=exit_code)  # fmt: skip
        self.events.append(event)
        return event

    def adopt(self, events: Iterable[Event], shift: float) -> list[Event]:
        """Put requests another process served (an MCP server's own workspace) on this
        timeline: fresh ids, their times moved onto this clock by `shift` seconds; their
        lane numbers are that process's."""
        adopted = [dataclasses.replace(e, id=self.queue.take_id(), queued=e.queued + shift,
                                       started=e.started + shift, finished=e.finished + shift)
                   for e in sorted(events, key=lambda e: (e.finished, e.id))]  # fmt: skip
        self.events.extend(adopted)
        return adopted

    async def close(self) -> None:
        for task in self._workers:
            task.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)
        while (ticket := self.queue.pop(0)) is not None:
            self.queue.done(0)
            ticket.payload.future.cancel()
