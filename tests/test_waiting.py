"""The tests' bounded wait: the condition's value on success, a failure naming it on timeout."""

from __future__ import annotations

import itertools

import anyio
import pytest
from waiting import wait_for, wait_until


def test_returns_the_first_truthy_value() -> None:
    polls = itertools.count()
    assert wait_for(lambda: next(polls) >= 3 and "ready", 30, "the third poll") == "ready"


def test_fails_naming_what_and_the_bound() -> None:
    with pytest.raises(AssertionError, match=r"after 0.05 s waiting for the impossible"):
        wait_for(lambda: None, 0.05, "the impossible")


def test_the_async_twin_waits_while_the_loop_runs() -> None:
    async def main() -> int:
        seen: list[int] = []
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(anyio.to_thread.run_sync, seen.append, 7)
            value = await wait_until(lambda: seen and seen[0], 30, "the other task")
        with pytest.raises(AssertionError, match="after 0.05 s waiting for nothing"):
            await wait_until(lambda: False, 0.05, "nothing")
        return value

    assert anyio.run(main) == 7
