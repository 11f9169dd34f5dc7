"""The run queue: runs of different branches at once, one at a time per branch, all cancellable.

A run in a view of its own (an overlayfs view or a private copy) holds no lane, so lints and
navigation are served meanwhile. It waits only for a slot (`limit` runs at once, by default
one per core: a test suite or a build keeps a core busy) and for the earlier runs of its own
branch, in the order they were asked: they share the branch's scratch layer, and a later run
must see what an earlier one wrote. That wait is the run's queue time.

A run's `cancel` event (a `threading.Event`, set from any thread) ends its wait, or kills its
processes once it runs (`run/process.py` checks it every 50 ms). A caller that stops awaiting
(an interrupt, an MCP client's cancel: asyncio cancellation) sets it too, and `close()` sets
every run's and waits for them to end, so a closed workspace leaves no run behind. A
`threading.Event` cannot wake the loop, so a queued run looks at it every `POLL` seconds.

Everything here runs on the workspace's event loop; the run itself goes to a daemon thread of
its own (not the loop's default executor, which lane switches share and which a few long runs
would fill; daemon, so a run still going cannot hold up the interpreter's exit).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable
from typing import Any, TypeVar

from ..errors import WORKSPACE_CLOSED, ClosedError

T = TypeVar("T")

POLL = 0.05  # seconds between looks at a queued run's cancel event


class RunQueue:
    """Up to `limit` runs at once; one at a time per key (a branch), first come first served."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._slots = asyncio.Semaphore(limit)
        self._order: dict[Hashable, tuple[asyncio.Lock, int]] = {}  # key -> (lock, users)
        # Waiting or running: the key and cancel event of each (read by `cancel` from any
        # thread, so changed under a lock).
        self._turns: dict[asyncio.Task[object], tuple[Hashable, threading.Event]] = {}
        self._guard = threading.Lock()
        self._callers: set[asyncio.Task[object]] = set()
        self._closed = False

    def __len__(self) -> int:
        """Runs waiting or running."""
        return len(self._turns)

    async def run(self, key: Hashable, cancel: threading.Event,
                  work: Callable[[], Awaitable[T]]) -> T | None:  # fmt: skip
        """`await work()` once it is `key`'s turn and a slot is free; None if `cancel` was set
        first. A caller that stops awaiting cancels the run (and returns at once: the run
        still holds its turn until its processes are gone)."""
        if self._closed:
            raise ClosedError(WORKSPACE_CLOSED)
        turn = asyncio.ensure_future(self._turn(key, cancel, work))
        with self._guard:
            self._turns[turn] = (key, cancel)
        turn.add_done_callback(self._forget)
        caller = asyncio.current_task()
        if caller is not None:
            self._callers.add(caller)
        try:
            return await asyncio.shield(turn)
        except asyncio.CancelledError:
            cancel.set()
            raise
        finally:
            self._callers.discard(caller)

    async def _turn(self, key: Hashable, cancel: threading.Event,
                    work: Callable[[], Awaitable[T]]) -> T | None:  # fmt: skip
        order = self._enter(key)
        try:
            async with _held(order, cancel) as ours, _held(self._slots, cancel) as slot:
                return await work() if ours and slot and not cancel.is_set() else None
        finally:
            self._leave(key)

    def _forget(self, turn: asyncio.Task[object]) -> None:
        with self._guard:
            del self._turns[turn]

    def cancel(self, key: Hashable) -> int:
        """Cancel every run of `key`, queued or running (from any thread); how many."""
        with self._guard:
            events = [cancel for k, cancel in self._turns.values() if k == key]
        for cancel in events:
            cancel.set()
        return len(events)

    def _enter(self, key: Hashable) -> asyncio.Lock:
        lock, users = self._order.get(key) or (asyncio.Lock(), 0)
        self._order[key] = (lock, users + 1)
        return lock

    def _leave(self, key: Hashable) -> None:
        lock, users = self._order[key]
        if users == 1:
            del self._order[key]  # a thousand branches keep no lock each
        else:
            self._order[key] = (lock, users - 1)

    async def close(self, bound: float) -> None:
        """Cancel every run, queued or running, and wait up to `bound` seconds for them (and
        their callers) to end."""
        self._closed = True
        for _, cancel in self._turns.values():
            cancel.set()
        pending = {*self._turns, *self._callers} - {asyncio.current_task()}
        if pending:
            await asyncio.wait(pending, timeout=bound)


@contextlib.asynccontextmanager
async def _held(lock: asyncio.Lock | asyncio.Semaphore, cancel: threading.Event
                ) -> AsyncIterator[bool]:  # fmt: skip
    """Hold `lock` for the block, unless `cancel` is set first (then yields False)."""
    got = await _acquire(lock, cancel)
    try:
        yield got
    finally:
        if got:
            lock.release()


async def _acquire(lock: asyncio.Lock | asyncio.Semaphore, cancel: threading.Event) -> bool:
    if cancel.is_set():
        return False
    waiter = asyncio.ensure_future(lock.acquire())
    while not waiter.done():
        if cancel.is_set():
            waiter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                if await waiter:  # it took the lock meanwhile: give it back
                    lock.release()
            return False
        await asyncio.wait({waiter}, timeout=POLL)
    return True


def in_thread(function: Callable[[], T]) -> asyncio.Future[T]:
    """`function()` in a daemon thread of its own; its result (or error) as a future."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def main() -> None:
        outcome: tuple[Callable[[Any], None], Any]
        try:
            outcome = (future.set_result, function())
        except BaseException as error:  # handed to the awaiting coroutine
            outcome = (future.set_exception, error)
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody awaits
            loop.call_soon_threadsafe(_settle, future, *outcome)

    threading.Thread(target=main, name="shadowkernel-run", daemon=True).start()
    return future


def _settle(future: asyncio.Future[Any], method: Callable[[Any], None], value: Any) -> None:
    if not future.done():
        method(value)
