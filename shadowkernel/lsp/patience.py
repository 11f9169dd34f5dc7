"""Timeouts that tell a server at work from a server that is stuck.

A type checker's first answer in a big project (basedpyright on sympy: 5-20 s of CPU per
module, minutes on a loaded machine) outlasts any fixed timeout short enough to catch a
hang. So a server's `request_timeout` is a window, not a deadline: a server whose processes
used CPU during a window is working on it and gets another one, up to `WINDOWS` of them; a
window in which it used (next to) none means it is not working on anything (a lost request,
a deadlock, a stopped process), and the wait ends there, as a fixed timeout would. Two waits
are not the server's idleness and get another window too: a server whose thread waits for a
core or the disk when the window ends (a loaded machine; a file read through a lane's FUSE
overlay, which another process serves), and a window our own event loop overran (what the
server sent may still be unread).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from typing import Protocol, TypeVar

T = TypeVar("T")

# The share of one core a server must use over a window to count as working (idle servers
# use none: basedpyright and ruff 0.00 s in 10 s), and at least one clock tick of it.
WORKING_SHARE, TICK = 0.02, 0.01
WINDOWS = 20  # windows a working server is given at most: 10 minutes at the default 30 s


LATE = 1.5  # a window that took this many windows of wall time: our loop was held up


class Worker(Protocol):
    """What patience watches of a server."""

    def cpu_seconds(self) -> float:
        """CPU seconds the server's processes used so far."""
        ...

    def waiting(self) -> bool:
        """A thread of the server is runnable or in an uninterruptible wait (the disk, FUSE)."""
        ...


class Idle(TimeoutError):
    """A window passed in which the server neither answered nor used the CPU."""

    def __init__(self, waited: float) -> None:
        super().__init__(f"idle after {waited:g} s")
        self.waited = waited


class StillWorking(TimeoutError):
    """The server kept working for `WINDOWS` windows without answering."""

    def __init__(self, waited: float) -> None:
        super().__init__(f"still working after {waited:g} s")
        self.waited = waited


async def patiently(awaitable: Awaitable[T], window: float, server: Worker | None) -> T:
    """`awaitable`'s result, waited for window by window while `server` works (see the
    module's docstring); Idle or StillWorking otherwise. Without `server`, one window. The
    awaitable is cancelled when the wait ends."""
    future = asyncio.ensure_future(awaitable)
    try:
        used = server.cpu_seconds() if server else 0.0
        for windows in range(1, WINDOWS + 1):
            began = time.monotonic()
            done, _ = await asyncio.wait([future], timeout=window)
            if done:
                return future.result()
            if server is None:
                raise TimeoutError(f"no answer within {window:g} s")
            worked = server.cpu_seconds() - used >= max(TICK, WORKING_SHARE * window)
            late = time.monotonic() - began > LATE * window
            if not (worked or late or server.waiting()):
                raise Idle(window * windows)
            used = server.cpu_seconds()
        raise StillWorking(window * WINDOWS)
    finally:
        future.cancel()
