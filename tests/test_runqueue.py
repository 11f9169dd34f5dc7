"""The run queue on its own (no processes): a slot each up to the limit, one key's runs in turn
in the order asked, cancellation while queued, by the caller going away, and by close().

Work here is a coroutine that waits for the test to release it, so each state is awaited as a
condition, never timed.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import pytest

from shadowkernel.errors import ClosedError
from shadowkernel.workspace.runqueue import RunQueue, in_thread

pytestmark = pytest.mark.timeout(60)


async def until(condition: Callable[[], bool], bound: float = 10) -> None:
    async with asyncio.timeout(bound):
        while not condition():
            await asyncio.sleep(0.001)


class Works:
    """Work items that record when they start and end only when released."""

    def __init__(self) -> None:
        self.running: list[str] = []
        self.started: list[str] = []
        self.release: dict[str, asyncio.Event] = {}

    def __call__(self, name: str) -> Callable[[], asyncio.Future[str]]:
        self.release[name] = asyncio.Event()

        async def work() -> str:
            self.started.append(name)
            self.running.append(name)
            try:
                await self.release[name].wait()
            finally:
                self.running.remove(name)
            return name

        return work  # type: ignore[return-value]


def test_a_slot_each_up_to_the_limit_and_one_keys_runs_in_turn() -> None:
    async def main() -> None:
        queue, works = RunQueue(2), Works()
        asked = [("a", "a1"), ("a", "a2"), ("b", "b1"), ("c", "c1")]
        tasks = [asyncio.create_task(queue.run(key, threading.Event(), works(name)))
                 for key, name in asked]  # fmt: skip
        await until(lambda: works.running == ["a1", "b1"])  # a2 waits for a1, c1 for a slot
        assert len(queue) == 4
        works.release["a1"].set()  # its slot goes to c1: a2 waited for a1, not for a slot
        await until(lambda: sorted(works.running) == ["b1", "c1"])
        works.release["b1"].set()
        await until(lambda: sorted(works.running) == ["a2", "c1"])
        works.release["a2"].set()
        works.release["c1"].set()
        assert await asyncio.gather(*tasks) == ["a1", "a2", "b1", "c1"]
        assert works.started.index("a1") < works.started.index("a2") and len(queue) == 0

    asyncio.run(main())


def test_a_queued_run_cancelled_never_starts_and_gives_its_place_up() -> None:
    async def main() -> None:
        queue, works = RunQueue(1), Works()
        holder = asyncio.create_task(queue.run("a", threading.Event(), works("held")))
        await until(lambda: works.running == ["held"])
        cancel = threading.Event()
        queued = asyncio.create_task(queue.run("b", cancel, works("queued")))
        after = asyncio.create_task(queue.run("c", threading.Event(), works("after")))
        await until(lambda: len(queue) == 3)
        threading.Thread(target=cancel.set).start()  # from another thread, as callers do
        assert await queued is None
        works.release["held"].set()
        await until(lambda: works.running == ["after"])
        works.release["after"].set()
        assert (await holder, await after) == ("held", "after")
        assert "queued" not in works.started

    asyncio.run(main())


def test_a_caller_going_away_cancels_its_run_which_keeps_its_turn_until_it_ends() -> None:
    async def main() -> None:
        queue, works, cancel = RunQueue(1), Works(), threading.Event()
        gone = asyncio.create_task(queue.run("a", cancel, works("gone")))
        await until(lambda: works.running == ["gone"])
        gone.cancel()
        with pytest.raises(asyncio.CancelledError):
            await gone
        assert cancel.is_set()  # what kills a real run's processes
        nxt = asyncio.create_task(queue.run("a", threading.Event(), works("next")))
        await until(lambda: len(queue) == 2)
        assert works.running == ["gone"]  # its processes may still be dying: no overlap
        works.release["gone"].set()
        await until(lambda: works.running == ["next"])
        works.release["next"].set()
        assert await nxt == "next"

    asyncio.run(main())


def test_close_cancels_every_run_and_waits_for_them() -> None:
    async def main() -> None:
        queue, works = RunQueue(1), Works()
        cancels = [threading.Event(), threading.Event()]

        async def until_cancelled() -> str:  # a run that ends when killed
            works.started.append("running")
            await until(cancels[0].is_set)
            return "killed"

        running = asyncio.create_task(queue.run("a", cancels[0], until_cancelled))
        queued = asyncio.create_task(queue.run("b", cancels[1], works("never")))
        await until(lambda: len(queue) == 2 and works.started == ["running"])
        await queue.close(bound=10)
        assert running.done() and queued.done() and all(c.is_set() for c in cancels)
        assert (running.result(), queued.result()) == ("killed", None)
        with pytest.raises(ClosedError):
            await queue.run("c", threading.Event(), works("late"))

    asyncio.run(main())


def test_in_thread_gives_back_the_result_or_the_error() -> None:
    async def main() -> None:
        assert await in_thread(lambda: threading.current_thread().name) == "shadowkernel-run"
        with pytest.raises(ZeroDivisionError):
            await in_thread(lambda: 1 / 0)

    asyncio.run(main())
