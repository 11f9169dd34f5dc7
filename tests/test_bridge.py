"""A caller's wait on the workspace ends at Ctrl-C whichever thread Linux gave the signal to.

Python runs signal handlers in the main thread only; a SIGINT that another thread received
reaches the main thread's handler only once that thread runs Python again. Each case runs in a
child of its own, with SIGINT raising KeyboardInterrupt as in a terminal or a kernel (a test
worker may have it ignored), the signal sent to a helper thread that then waits to be
released: the main thread must see the interrupt while the helper still waits.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading

import pytest

from shadowkernel.workspace.bridge import LoopThread

CHILD = """
import concurrent.futures, signal, sys, threading, time
from shadowkernel.workspace.bridge import as_completed, wait

signal.signal(signal.SIGINT, signal.default_int_handler)
waiting, released, future = threading.Event(), threading.Event(), concurrent.futures.Future()

def main_state():
    with open(f"/proc/self/task/{threading.main_thread().native_id}/stat") as f:
        return f.read().rsplit(") ", 1)[1][0]

def helper():
    waiting.wait()
    while main_state() != "S":  # until the main thread sleeps in the wait
        time.sleep(0.01)
    signal.pthread_kill(threading.get_ident(), signal.SIGINT)  # this thread receives it
    released.wait(60)
    future.set_result("the helper gave up waiting")

threading.Thread(target=helper, daemon=True).start()
try:
    waiting.set()
    if sys.argv[1] == "wait":
        wait(future)
    else:
        list(as_completed([future]))
except KeyboardInterrupt:
    print("interrupted while the helper waited:", not future.done())
released.set()
"""


@pytest.mark.parametrize("waiting", ["wait", "as_completed"])
def test_an_interrupt_another_thread_received_ends_the_wait(waiting: str) -> None:
    done = subprocess.run([sys.executable, "-c", CHILD, waiting], capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == "interrupted while the helper waited: True\n", done.stdout


def test_call_async_hands_back_the_answer_the_error_and_a_cancel() -> None:
    """From another loop: the coroutine's result, its exception as raised, and cancelling the
    caller cancels the coroutine on the workspace's loop (an MCP cancel ends a run so)."""
    bridge = LoopThread()
    seen: list[str] = []

    async def answer() -> tuple[str, bool]:
        return "answered", threading.current_thread() is bridge.thread

    async def fail() -> None:
        raise ValueError("bad input, named")

    async def long() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            seen.append("cancelled on the workspace's loop")
            raise

    async def caller() -> None:
        assert await bridge.call_async(answer()) == ("answered", True)
        with pytest.raises(ValueError, match="bad input, named"):
            await bridge.call_async(fail())
        waiting = asyncio.ensure_future(bridge.call_async(long()))
        await asyncio.sleep(0.2)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        for _ in range(100):
            if seen:
                break
            await asyncio.sleep(0.05)

    try:
        asyncio.run(caller())
    finally:
        bridge.stop()
    assert seen == ["cancelled on the workspace's loop"]
