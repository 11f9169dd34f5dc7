"""A batch's child blocked for good (on a socket nobody writes to, a lock, a sleep) uses no CPU,
so no CPU budget stops it: the batch stops it once its process tree has slept
`BLOCKED_LIMIT` seconds in all. Time asleep is read from each thread's scheduler counters
(CPU and run-queue wait, /proc/<pid>/task/<tid>/schedstat), so the load does not stretch
it: a process waiting for a CPU, or waiting for its own busy child, is not asleep."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from overlay_helpers import needs_fuse

import shadowkernel as sk
from shadowkernel.evals._pytest_driver import BLOCKED_LIMIT, Sample, Sleep, asleep, sample

MS = 10**6  # nanoseconds


def test_time_asleep_from_recorded_samples():
    start = Sample(0.0, {1: (100 * MS, 5 * MS)}, False)
    assert asleep(start, Sample(2.0, {1: (100 * MS, 5 * MS)}, False)) == 2.0  # nothing gained
    # it ran 0.5 s and waited 0.3 s for a CPU in between: asleep the rest
    assert asleep(start, Sample(2.0, {1: (600 * MS, 305 * MS)}, False)) == pytest.approx(1.2)
    # runnable (or in I/O) at a sample: a wait for a CPU shows in the counters only later
    assert asleep(start, Sample(2.0, {1: (100 * MS, 5 * MS)}, True)) == 0.0
    assert asleep(Sample(0.0, {1: (0, 0)}, True), Sample(2.0, {1: (0, 0)}, False)) == 0.0
    # a parent asleep in wait() while its child ran or waited for a CPU the whole time
    family = Sample(0.0, {1: (0, 0), 2: (0, 0)}, False)
    assert asleep(family, Sample(2.0, {1: (0, 0), 2: (1500 * MS, 600 * MS)}, False)) == 0.0
    # a thread or process started or ended meanwhile: it did something
    assert asleep(start, Sample(2.0, {1: (100 * MS, 5 * MS), 3: (0, 0)}, False)) == 0.0
    assert asleep(family, Sample(2.0, {1: (0, 0)}, False)) == 0.0
    # time asleep adds up: a loop polling a dead socket every 0.1 s is asleep 99% of it
    watch = Sleep()
    for second in range(41):
        watch.update(Sample(float(second), {7: (second * 10 * MS, second * MS)}, False))
    assert watch.seconds == pytest.approx(40 * 0.989)


@contextlib.contextmanager
def busy_loops(k: int) -> Iterator[None]:
    """`k` processes spinning on the CPUs (load for the test's duration, killed after)."""
    spinning = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(k)]
    try:
        yield
    finally:
        for process in spinning:
            process.kill()
            process.wait()


def test_a_process_asleep_on_a_socket_is_told_from_busy_ones_under_load():
    spin = "while True: pass"
    commands = {"on a socket": "import socket; a, b = socket.socketpair(); b.recv(1)",
                "busy": spin,
                "waiting on a busy child": "import subprocess, sys; subprocess.run("
                                           f"[sys.executable, '-c', {spin!r}])"}  # fmt: skip
    with busy_loops(3):
        started = {k: subprocess.Popen([sys.executable, "-c", c], start_new_session=True)
                   for k, c in commands.items()}  # fmt: skip
        try:
            watches = {k: Sleep() for k in started}
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and watches["on a socket"].seconds < 3:
                for k, process in started.items():
                    watches[k].update(sample(process.pid))
                time.sleep(0.2)  # sampling, as a batch does (the bound is the deadline)
            seconds = {k: watch.seconds for k, watch in watches.items()}
        finally:
            for process in started.values():
                os.killpg(process.pid, signal.SIGKILL)  # the busy child's child too
                process.wait()
    assert seconds["on a socket"] >= 3, seconds
    assert seconds["busy"] == 0.0 and seconds["waiting on a busy child"] == 0.0, seconds


WIRE = """\
def read_exactly(sock, n):
    data = b""
    while len(data) < n:
        data += sock.recv(1)
    return data
"""
WIRE_TESTS = """\
import socket

from wire import read_exactly


def test_read_exactly():
    a, b = socket.socketpair()
    with a, b:
        a.sendall(b"abc")
        assert read_exactly(b, 3) == b"abc"
"""


@needs_fuse
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_mutant_blocked_on_a_socket_is_stopped_and_excluded_under_load(tmp_path):
    """`<` -> `<=` waits forever for a fourth byte. In a batch only its time asleep can stop
    it (the wall-clock limit there is 900 s, the test's own bound); a process per candidate
    is stopped by its wall-clock limit. Both exclude it ("timed out") and keep the same
    tasks: the runs on the original are not stopped. (No busy loops here: the test above
    holds the rule under load, and three of them for the 30 s this takes would cost the
    rest of the suite, running beside it, a minute of CPU.)"""
    (tmp_path / "wire.py").write_text(WIRE)
    (tmp_path / "test_wire.py").write_text(WIRE_TESTS)

    def suite(fork: bool) -> sk.evals.Suite:
        return sk.mutation_suite(tmp_path, "python -m pytest test_wire.py", n=20, seed=0,
                                 per_function=20, fork=fork,
                                 timeout=900 if fork else 20)  # fmt: skip

    batched = suite(fork=True)
    single = suite(fork=False)
    assert json.loads(batched.extra["rejected"]).get("timed out") == 1, batched.extra
    assert all("<=" not in task.start[0][1] for task in batched) and len(batched) >= 1
    assert batched.to_json() == single.to_json()
    assert float(batched.extra["seconds_asleep"]) < BLOCKED_LIMIT  # no original was stopped
