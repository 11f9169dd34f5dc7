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
    """The intervals to sleep between polls; raises once `bound` seconds have passed."""
    deadline, interval = time.monotonic() + bound, min(FIRST_POLL, longest)
    while time.monotonic() <= deadline:
        yield interval
        interval = min(interval * 2, longest)
    raise AssertionError(f"timed out after {bound} s waiting for {what}")


def wait_for(
    condition: Callable[[], Any], bound: float, what: str, *, longest: float = LAST_POLL
) -> Any:
    """Poll `condition` until it is truthy and return its value; fail naming `what` after
    `bound` seconds. `longest` caps the interval, for a state that lasts only briefly."""
    if value := condition():
        return value
    for interval in _polls(bound, what, longest):
        time.sleep(interval)  # the poll interval of a bounded wait
        if value := condition():
            return value
    raise AssertionError("unreachable")  # _polls raises when the bound has passed


async def wait_until(
    condition: Callable[[], Any], bound: float, what: str, *, longest: float = LAST_POLL
) -> Any:
    """`wait_for` for async tests (asyncio or trio): the loop keeps running between polls."""
    if value := condition():
        return value
    for interval in _polls(bound, what, longest):
        await anyio.sleep(interval)  # the poll interval of a bounded wait
        if value := condition():
            return value
    raise AssertionError("unreachable")
