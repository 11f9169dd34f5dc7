"""Patience (shadowkernel/lsp/patience.py): a server's request timeout is a window, extended
while the server works and ended when it sits idle.

The rule is pure and tested here with a scripted server (the readings a real one would give:
its CPU seconds, whether a thread of it waits for a core or the disk); what a real server's
processes report is tested on real processes below, and on a real basedpyright over sympy in
tests/test_scale_sympy.py.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from shadowkernel.lsp.client import tree_waiting
from shadowkernel.lsp.patience import WINDOWS, Idle, StillWorking, patiently

WINDOW = 0.05


class Scripted:
    """A server whose CPU grows by `cpu_per_read` at each reading and whose threads wait
    for the machine (`waiting`) as told."""

    def __init__(self, cpu_per_read: float = 0.0, waiting: bool = False) -> None:
        self.cpu, self.cpu_per_read, self.waits = 0.0, cpu_per_read, waiting

    def cpu_seconds(self) -> float:
        self.cpu += self.cpu_per_read
        return self.cpu

    def waiting(self) -> bool:
        return self.waits


async def answer_after(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "answer"


def wait(seconds: float, server: Scripted | None) -> str:
    return asyncio.run(patiently(answer_after(seconds), WINDOW, server))


def test_an_answer_within_the_window_is_returned() -> None:
    assert wait(0.0, Scripted()) == "answer"


def test_an_idle_server_ends_the_wait_after_one_window() -> None:
    """At the first window our loop kept on time (a loaded machine may run one late, which
    then does not count): never after waiting out the answer."""
    with pytest.raises(Idle, match="idle after"):
        wait(1000 * WINDOW, Scripted())


def test_a_working_server_gets_windows_until_it_answers() -> None:
    assert wait(4 * WINDOW, Scripted(cpu_per_read=1.0)) == "answer"


def test_a_server_waiting_for_a_core_or_the_disk_is_not_idle() -> None:
    """No CPU used, but a thread of it runnable or in an uninterruptible wait: a loaded
    machine, or a read its lane's FUSE overlay (another process) has not served yet."""
    assert wait(4 * WINDOW, Scripted(waiting=True)) == "answer"


def test_a_window_our_own_loop_overran_does_not_count() -> None:
    """The loop was held up past the window (here: a blocking call on it): what the server
    sent may still be unread, so that window says nothing about the server."""

    async def held_up_then_answered() -> str:
        async def hold() -> None:
            await asyncio.sleep(0)
            time.sleep(3 * WINDOW)  # holds the loop, as a long callback would

        holding = asyncio.ensure_future(hold())
        answer = await patiently(answer_after(3.5 * WINDOW), WINDOW, Scripted())
        await holding
        return answer

    assert asyncio.run(held_up_then_answered()) == "answer"


def test_patience_ends_after_its_windows() -> None:
    with pytest.raises(StillWorking, match=f"still working after {WINDOW * WINDOWS:g} s"):
        wait(10.0, Scripted(cpu_per_read=1.0))


def test_without_a_server_the_window_is_a_deadline() -> None:
    with pytest.raises(TimeoutError, match="no answer within"):
        wait(10 * WINDOW, None)


@pytest.fixture
def busy() -> Iterator[subprocess.Popen[bytes]]:
    child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield child
    finally:
        child.kill()
        child.wait()


def test_a_real_busy_process_is_waiting_and_a_stopped_or_sleeping_one_is_not(
    busy: subprocess.Popen[bytes],
) -> None:
    """On real processes: a busy loop is runnable (it uses or waits for a core); a process
    stopped by SIGSTOP (as tests/test_scale_sympy.py stops a server) or asleep is not."""
    deadline = time.monotonic() + 10
    while not tree_waiting(busy.pid):  # the child may not have started running yet
        assert time.monotonic() < deadline, "a busy loop never showed as runnable"
        time.sleep(0.01)
    os.kill(busy.pid, signal.SIGSTOP)
    try:
        while tree_waiting(busy.pid):  # the stop lands after kill() returns
            assert time.monotonic() < deadline, "a stopped process still shows as runnable"
            time.sleep(0.01)
    finally:
        os.kill(busy.pid, signal.SIGCONT)
    with subprocess.Popen(["sleep", "30"]) as sleeping:
        while tree_waiting(sleeping.pid):  # until it has started and gone to sleep
            assert time.monotonic() < deadline, "a sleeping process shows as runnable"
            time.sleep(0.01)
        sleeping.kill()
