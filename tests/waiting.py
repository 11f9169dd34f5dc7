"""The tests' one bounded wait: poll a condition until it holds, fail naming it after a bound.

Tests wait for conditions, never for time to pass: the poll starts at a millisecond (so fast
conditions are seen at once) and backs off to a twentieth of a second (so slow ones cost little).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import anyio

FIRST_POLL = 0.001  # seconds
LAST_POLL = 0.05


def _polls(bound: float, what: str, longest: float) -> Iterator[float]:
    """The intervals to sleep between polls; raises once `bound` seconds (from now) have passed."""
    deadline = time.monotonic() + bound  # now, not at the first poll: a generator starts late

    def intervals() -> Iterator[float]:
        interval = min(FIRST_POLL, longest)
        while time.monotonic() <= deadline:
            yield interval
            interval = min(interval * 2, longest)
        raise AssertionError(f"timed out after {bound} s waiting for {what}")

    return intervals()


def wait_for(
    condition: Callable[[], Any], bound: float, what: str, *, longest: float = LAST_POLL
) -> Any:
    """Poll `condition` until it is truthy and return its value; fail naming `what` after
    `bound` seconds. `longest` caps the interval, for a state that lasts only briefly."""
    polls = _polls(bound, what, longest)
    while not (value := condition()):
        time.sleep(next(polls))  # the poll interval of a bounded wait
    return value


async def wait_until(
    condition: Callable[[], Any], bound: float, what: str, *, longest: float = LAST_POLL
) -> Any:
    """`wait_for` for async tests (asyncio or trio): the loop keeps running between polls."""
    polls = _polls(bound, what, longest)
    while not (value := condition()):
        await anyio.sleep(next(polls))  # the poll interval of a bounded wait
    return value
