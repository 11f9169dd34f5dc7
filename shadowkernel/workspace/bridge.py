"""The bridge between callers' threads and the workspace's event loop.

Shadow services (the scheduler, language-server clients) live on one asyncio loop in a daemon
thread (DESIGN: process model), so a long notebook cell never stalls an agent's request and an
agent thread can call the public API synchronously. `call` blocks a caller's thread on a
coroutine run there; `call_async` awaits it from any loop.

The loop makes a system call per message to a language server (and one per hand-off from a
caller's thread); each releases the GIL, and taking it back waits until the thread holding it
lets go: up to the interpreter's switch interval, 5 ms by default, whenever a caller's thread
computes meanwhile (an agent building its next edit, a lint table). Opening the loop lowers
the process's switch interval to SWITCH_INTERVAL (never raises it): with 20 agents linting a
5,644-line file with ruff, a lint's median serve time went from 27-28 ms to 21-24 ms.

A caller's wait wakes every INTERRUPT_POLL seconds (`wait`, `as_completed`). Python runs
signal handlers in the main thread only, and Linux gives a process's SIGINT to any thread not
blocking it: when another thread took it, a wait without timeout slept on until the call
ended. A SIGINT sent to another thread of a script waiting on a run, or of the kernel, did
nothing until the run ended (`tests/test_bridge.py` and both lifecycle tests send it so).

`RunningLoop` is the other bridge: the services on the event loop of the thread that opened
the workspace (`Workspace(loop="running")`), for an async host whose agents await the
`*_async` methods on that loop. Each request then costs no hand-off between threads and no
contention for the GIL between the agents' thread and the services': 5 and 20 agents linting
more-itertools' more.py with ruff spent about 0.3 ms less of this process's CPU per answer
and answered 0.90x and 1.02x as fast as a worktree and server each, against 0.81x and 0.94x
(`benchmarks/worktrees.py`, its default against `--loop own`). The synchronous API still
works from other threads; from the loop's own thread it is refused, as it would block it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import queue
import sys
import threading
from collections.abc import Coroutine, Iterable, Iterator
from typing import Any, TypeVar

from ..errors import ArgumentError, ClosedError, ShadowError

T = TypeVar("T")

SWITCH_INTERVAL = 0.0005  # seconds a thread may hold the GIL while the loop waits for it
INTERRUPT_POLL = 0.1  # seconds a waiting caller may take to see an interrupt


def wait(future: concurrent.futures.Future[T]) -> T:
    """`future.result()`, which an interrupt ends even when another thread received it."""
    return next(as_completed([future])).result()


def as_completed(
    futures: Iterable[concurrent.futures.Future[T]],
) -> Iterator[concurrent.futures.Future[T]]:
    """`concurrent.futures.as_completed`, in the order they complete (a caller stops at the
    first that failed and keeps those before it), which an interrupt ends as `wait` does."""
    finished: queue.SimpleQueue[concurrent.futures.Future[T]] = queue.SimpleQueue()
    unique = set(futures)
    for future in unique:
        future.add_done_callback(finished.put)
    for _ in unique:
        yield _next(finished)


def _next(finished: queue.SimpleQueue[T]) -> T:
    while True:
        try:
            return finished.get(timeout=INTERRUPT_POLL)
        except queue.Empty:
            pass


class Bridge:
    """Where the workspace's services run: `loop`, served by `thread`."""

    loop: asyncio.AbstractEventLoop
    thread: threading.Thread

    def __init__(self) -> None:
        # Set when the workspace closes: a call its closing cancelled ends in ClosedError
        # saying so, not in a bare CancelledError from deep inside
        self.closing: str | None = None

    def call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Block this thread until `coroutine`, run on the loop, ends."""
        if not self.serving():  # the host's loop ended: nothing would ever run it
            coroutine.close()
            raise ClosedError(self.closing or "the event loop the workspace served on has "
                              "stopped; open a new workspace")  # fmt: skip
        if threading.current_thread() is self.thread:
            coroutine.close()
            raise ShadowError("called the synchronous API from the workspace's own loop; "
                              "use the *_async methods there")  # fmt: skip
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        try:
            return wait(future)
        except concurrent.futures.CancelledError:
            if self.closing is None:
                raise
            raise ClosedError(self.closing) from None
        except BaseException:
            future.cancel()  # e.g. KeyboardInterrupt in the caller: stop waiting on our side too
            raise

    async def call_async(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Await `coroutine` run on this loop from the caller's loop. One hand-off each way,
        without the thread-safe Future between two loops that `run_coroutine_threadsafe` and
        `wrap_future` chain (a hop's CPU 0.12-0.15 ms against 0.18-0.23 here, once per lint,
        navigation or run an agent awaits), and none from the loop itself (`RunningLoop`).
        Cancelling the caller cancels the task here."""
        caller = asyncio.get_running_loop()
        if caller is self.loop:
            return await coroutine
        answer: asyncio.Future[T] = caller.create_future()
        started: list[asyncio.Task[T]] = []

        def start() -> None:
            task = self.loop.create_task(coroutine)
            task.add_done_callback(lambda done: _hand_back(caller, answer, done, self))
            started.append(task)

        self.loop.call_soon_threadsafe(start)
        try:
            return await answer
        except asyncio.CancelledError:
            # Queued after `start`, so it runs after it: the task exists by then.
            with contextlib.suppress(RuntimeError):  # our loop closed: nothing runs there
                self.loop.call_soon_threadsafe(lambda: started[0].cancel())
            raise

    def on_loop(self) -> bool:
        """Whether the caller runs on the services' loop (a blocking wait there never ends)."""
        return threading.current_thread() is self.thread and self.loop.is_running()

    def serving(self) -> bool:
        """Whether the loop runs, or will: what is handed to it gets done."""
        return not self.loop.is_closed()

    def stop(self) -> None:
        """End what this bridge started (nothing, for a loop it was given)."""


class LoopThread(Bridge):
    """One asyncio loop in a daemon thread of its own."""

    def __init__(self) -> None:
        super().__init__()
        sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_INTERVAL))
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(
            target=self.loop.run_forever, name="shadowkernel-loop", daemon=True
        )
        self.thread.start()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        if not self.thread.is_alive():
            self.loop.close()


class RunningLoop(Bridge):
    """The event loop running in the calling thread (an async host's), which the host keeps
    running and closes: the services are tasks on it beside the host's own."""

    def __init__(self) -> None:
        super().__init__()
        try:
            self.loop = asyncio.get_running_loop()
        except RuntimeError:
            raise ArgumentError("loop='running' serves on the event loop running in this "
                                "thread, and none runs here: open the workspace inside a "
                                "coroutine (or with loop='own')") from None  # fmt: skip
        self.thread = threading.current_thread()

    def serving(self) -> bool:
        return self.loop.is_running()  # the host may stop it (asyncio.run returned) any time


def _hand_back(caller: asyncio.AbstractEventLoop, answer: asyncio.Future[T],
               done: asyncio.Future[T], bridge: Bridge) -> None:  # fmt: skip
    """Give `done`'s outcome to `answer` on the caller's loop (unless it has closed)."""

    def settle() -> None:
        if answer.done():  # the caller was cancelled meanwhile
            return
        if done.cancelled() and bridge.closing is not None:
            answer.set_exception(ClosedError(bridge.closing))
        elif done.cancelled():
            answer.cancel()
        elif (error := done.exception()) is not None:
            answer.set_exception(error)
        else:
            answer.set_result(done.result())

    if not caller.is_closed():
        with contextlib.suppress(RuntimeError):  # it closed just now: nobody waits any more
            caller.call_soon_threadsafe(settle)
