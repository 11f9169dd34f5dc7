"""The interleaver: many branches' requests, served by a few shadows (lanes), one at a time each.

A request is a `job(lane)` coroutine function plus who asked (branch, version, op). Each lane
(one shadow, its own language-server pool) runs a worker task that asks the pure
`RequestQueue` what to serve next, runs the job and records an `Event`. A job brings the lane
to the state it needs with `await lane.show(snapshot)`: the shadow activates the snapshot's
manifest and the pool is synced to its documents; a lane already showing it does nothing, which
is why consecutive requests of one branch cost no switch. A job that asks only servers reading
nothing but their open documents (`show(snapshot, servers)`) leaves the mount as it is when
the documents carry every change; the next job that needs the mount switches it. A lane of
single-file linters only serves such jobs from a pool rooted at the user's folder and mounts
its shadow at the first job that needs it (`Lane.documents`).

Everything here runs on the workspace's one event loop; callers on other threads go through
`asyncio.run_coroutine_threadsafe` (see workspace.py).

Lanes may grow while serving: given `open_lane` (the workspace's adapter that starts a shadow
and its servers) and `grow_to`, the scheduler asks the pure `LaneGrowth` at every dispatch
how many more to open; they open one after another in a task of their own, and each joins
(gets a worker) once its servers are ready, so the lanes serving meanwhile are never held by
their start.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import logging
import os
import time
from collections.abc import Awaitable, Callable, Collection, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from ..lsp import LspPool
from ..lsp.documents import matches
from ..overlay.shadow import Shadow
from ..overlay.store import Manifest, changed_paths
from ..paths import RelPath
from .policy import LaneGrowth, Policy, RequestQueue, single_file_only
from .timeline import OUTSIDE, Answer, Event, Kind

T = TypeVar("T")

log = logging.getLogger(__name__)

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
    """One shadow and its pool; remembers which snapshot it shows and what switching cost.

    `documents`, where given: a pool of single-file servers rooted at the user's folder. It
    serves a job whose servers all read nothing but their open documents when every path the
    snapshot changes is one of those documents and a file of the folder: the folder then reads
    as the mount would, so the job needs no switch, nor the mount at all (a lazy shadow mounts
    at the first job that does). `pool` is the pool serving the current job: `show` sets it."""

    def __init__(self, index: int, shadow: Shadow, pool: LspPool, threaded: bool,
                 documents: LspPool | None = None) -> None:  # fmt: skip
        self.index = index
        self.shadow = shadow
        self.mounted = pool  # its servers are rooted at the shadow's mount
        self.documents = documents
        self.pool = documents or pool
        self._documents_key: Hashable = None  # the snapshot `documents` was last synced to
        self.key: Hashable = None
        self.switch_seconds = 0.0  # spent in show() during the current request
        self._written: set[RelPath] = set()  # paths written behind the manifest's back (runs)
        # With several lanes (or some to come) the blocking activate call goes to a thread, so
        # one lane's switch does not stall another lane's language-server traffic.
        self._threaded = threaded
        self._mount_behind = False  # the mount shows an older state than `key`'s
        self.mount_switches = 0  # how many shows activated a manifest (the rest synced only)

    async def show(self, snapshot: Snapshot, servers: Collection[str] | None = None) -> None:
        """Bring the lane to `snapshot` for a job that asks `servers` (None: every server of
        the pool, and whatever reads the mount). Where those all read only their open
        documents (single-file linters) and the documents carry every change, the user's
        folder serves (`documents`), or the mount keeps what it shows: a lint by ruff beside
        jedi-language-server costs no switch."""
        asked = self._asked(servers)
        documents_only = single_file_only([s.name for s in asked])
        if (
            documents_only
            and self.documents is not None
            and _documents_suffice(snapshot.manifest, snapshot, asked, self.documents.root)
        ):  # the folder reads as the mount would: no switch, no mount
            await self._show_documents(snapshot)
            return
        self.pool = self.mounted
        mounted = documents_only or not self._mount_behind
        if snapshot.key == self.key and not self._written and mounted:
            return
        began = time.perf_counter()
        self.key = None  # unknown until both steps succeeded
        changed = set(changed_paths(self.shadow.manifest, snapshot.manifest)) | self._written
        # A lazy shadow not yet started shows nothing: the first job here mounts it.
        keep = self.shadow.started and documents_only and not self._written
        mount = not (keep and _documents_suffice(changed, snapshot, asked, self.mounted.root))
        if not mount:
            self._mount_behind = bool(changed)
            changed = set()  # the mount keeps its old bytes; the servers read the documents
        elif self._threaded or not self.shadow.started:  # a lazy shadow's first mount: 0.2 s
            await asyncio.to_thread(self._activate, snapshot.manifest, changed)
        else:
            self._activate(snapshot.manifest, changed)
        await self.pool.sync(snapshot.documents, sorted(changed))
        if mount:
            self._written.clear()
            self._mount_behind = False
            self.mount_switches += 1
        self.key = snapshot.key
        self.switch_seconds += time.perf_counter() - began

    @property
    def pools(self) -> list[LspPool]:
        return [pool for pool in (self.documents, self.mounted) if pool is not None]

    async def _show_documents(self, snapshot: Snapshot) -> None:
        assert self.documents is not None
        self.pool = self.documents
        if snapshot.key == self._documents_key:
            return
        began = time.perf_counter()
        self._documents_key = None  # unknown until the sync succeeded
        await self.documents.sync(snapshot.documents)
        self._documents_key = snapshot.key
        self.switch_seconds += time.perf_counter() - began

    def _asked(self, servers: Collection[str] | None) -> list[Any]:
        specs = getattr(self.mounted, "specs", None) or []
        return list(specs) if servers is None else [s for s in specs if s.name in servers]

    def _activate(self, manifest: Manifest, changed: set[RelPath]) -> None:
        # What the servers saw before is what the mount shows now (a run's writes aside).
        self.pool.saw(changed - self._written)
        self.shadow.activate(manifest)

    def run_wrote(self, paths: set[RelPath]) -> None:
        """Something (a run) changed these paths on the mount: re-sync them on the next show."""
        self._written |= paths
        self.key = None


def _documents_suffice(changed: Collection[RelPath], snapshot: Snapshot, asked: list[Any],
                       disk: os.PathLike[str]) -> bool:  # fmt: skip
    """Servers reading only their open documents, rooted at `disk`, answer about `snapshot`
    though `disk` shows other bytes at the `changed` paths: each is an open document of every
    asked server and a file on `disk` (a new module only a document would be missing where a
    linter looks at the disk: ruff's package detection of a branch's new `__init__.py`)."""
    return all(p in snapshot.documents and all(matches(p, s.patterns) for s in asked)
               and os.path.isfile(os.path.join(disk, p)) for p in changed)  # fmt: skip


def _nobodys(future: asyncio.Future[Any]) -> None:
    """Retrieve the outcome of a serve whose caller gave up: its error is nobody's to raise,
    and asyncio would log it as never retrieved (a server that crashed meanwhile)."""
    if not future.cancelled():
        future.exception()


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
    """Queue requests for `lanes`; `submit` returns the job's result (or raises its error).

    `open_lane(index)`: a new ready lane with that index (cleaning up after itself if it fails
    or is cancelled); with it the lanes grow up to `grow_to` as `LaneGrowth` decides."""

    def __init__(
        self,
        lanes: list[Lane],
        policy: Policy = "round-robin",
        batch: int = 8,
        origin: float | None = None,
        open_lane: Callable[[int], Awaitable[Lane]] | None = None,
        grow_to: int | None = None,
    ) -> None:
        self.lanes = lanes
        self.queue: RequestQueue[_Request[Any]] = RequestQueue(policy, batch)
        self.events: list[Event] = []
        self.origin = time.perf_counter() if origin is None else origin
        self._wake: list[asyncio.Event] = []
        self._idle: set[int] = set()  # lanes whose worker waits for a request
        self._workers: list[asyncio.Task[None]] = []
        self._open_lane = open_lane
        limit = len(lanes) if open_lane is None or grow_to is None else grow_to
        self.growth = LaneGrowth(limit)
        self._opening: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start one worker per lane (call on the event loop)."""
        for lane in self.lanes:
            self._join(lane)

    def _join(self, lane: Lane) -> None:
        self._wake.append(asyncio.Event())
        self._workers.append(asyncio.create_task(self._work(lane)))

    def _grow(self, lanes: int) -> None:
        """Open `lanes` more beside the serving ones, one after another (each joins once its
        servers are ready, and serves while the next opens)."""

        async def open_and_join() -> None:
            assert self._open_lane is not None
            for _ in range(lanes):
                try:
                    lane = await self._open_lane(len(self.lanes))
                except Exception:
                    log.warning("could not open lane %d; serving on %d", len(self.lanes),
                                len(self.lanes), exc_info=True)  # fmt: skip
                    self.growth.failed()
                    return
                self.lanes.append(lane)
                self._join(lane)
                self.growth.opened()

        self._opening = asyncio.create_task(open_and_join())

    def now(self) -> float:
        return time.perf_counter() - self.origin

    async def submit(self, branch: str, version: int, kind: Kind, op: str, job: Job[T]) -> T:
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        request = _Request(branch, version, kind, op, job, future, self.now(), _CLIENT.get())
        self.queue.push(branch, request)
        self._kick()
        try:
            return await asyncio.shield(future)  # a caller giving up does not abort the serve
        except asyncio.CancelledError:
            future.add_done_callback(_nobodys)
            raise

    def _kick(self) -> None:
        """Wake as many idle lanes as branches wait: first those whose last branch is one of
        them (the policy serves a lane's last branch first, and its servers hold that branch's
        documents: a small change to send, not another branch's edits undone), then the
        lowest. Any idle lane serves any waiting branch, and one woken with nothing to take
        costs a task step for nothing (on 4 lanes, each request and each answer woke every
        idle one)."""
        waiting = self.queue.waiting_branches()
        idle = sorted(self._idle, key=lambda lane: (not self.queue.last_waits(lane), lane))
        for index in idle[:waiting]:
            self._wake[index].set()

    async def _work(self, lane: Lane) -> None:
        wake = self._wake[lane.index]
        while True:
            ticket = self.queue.pop(lane.index, leave_to=self._idle)  # woken by _kick
            if ticket is None:
                wake.clear()  # no await since pop(): no wakeup can be lost in between
                self._idle.add(lane.index)
                try:
                    await wake.wait()
                finally:
                    self._idle.discard(lane.index)
                continue
            waiting, served = self.queue.waiting_branches(), self.queue.serving()
            if grow := self.growth.dispatched(ticket.branch, waiting, served, len(self.lanes)):
                self._grow(grow)
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
        """Stop the workers and a lane still opening (its `open_lane` closes what it began);
        the lanes' pools and shadows are their owner's to close."""
        tasks = [*self._workers, *([self._opening] if self._opening else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        while (ticket := self.queue.pop(0)) is not None:
            self.queue.done(0)
            ticket.payload.future.cancel()
