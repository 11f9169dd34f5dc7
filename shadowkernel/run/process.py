"""Starting a run's process, pumping its output under a cap, and ending it at the deadline.

Output is drained to the end even past the cap (the program runs as it would natively, and
memory stays bounded by the cap); the run ends when its main process exits, and whatever it
left behind in its process group is killed then (inside a PID namespace the kernel already
did that).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

from .result import Capture

logger = logging.getLogger(__name__)
F_SETPIPE_SZ = 1031
PIPE_SIZE = 1 << 20
CHECK_EVERY = 0.05  # seconds between calls of `stop_when`
DRAIN_AFTER_EXIT = 5.0  # seconds to wait for leftovers' output once the run has ended
EXIT_AFTER_EOF = 1.0  # seconds a run that closed its output gets to exit before it is killed
OnOutput = Callable[[str, bytes], object]  # (stream, chunk): output as it arrives


@dataclass
class Outcome:
    exit_code: int | None
    stdout: Capture
    stderr: Capture
    timed_out: bool
    duration: float
    cancelled: bool = False
    limited: bool = False  # killed because `stop_when` said so


def run_process(
    argv: list[str], env: dict[str, str], timeout: float, cap: int,
    kill_leftovers: Callable[[], object] = lambda: None, cancel: threading.Event | None = None,
    stop_when: Callable[[], bool] = lambda: False, on_output: OnOutput | None = None,
) -> Outcome:  # fmt: skip
    """Run `argv` to its end, to its deadline, until `cancel` is set, or until `stop_when()`
    (checked every 50 ms at most) is true; killed in the last three cases. `on_output(stream,
    chunk)` ("stdout" or "stderr", the bytes just read, past the cap too) is called from the
    reading thread as output arrives; it must be quick (an error in it is logged, and it is
    not called again: the run goes on)."""
    start = time.monotonic()
    cancel = cancel or threading.Event()
    process = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=env, cwd="/", start_new_session=True, close_fds=True,
    )  # fmt: skip
    captures = {process.stdout: Capture(cap), process.stderr: Capture(cap)}
    names = {process.stdout: "stdout", process.stderr: "stderr"}
    hook = [on_output] if on_output else []
    limit, checked = threading.Event(), [start]

    def stop() -> bool:
        now = time.monotonic()
        if not limit.is_set() and now - checked[0] >= CHECK_EVERY:
            checked[0] = now
            if stop_when():
                limit.set()
        return cancel.is_set() or limit.is_set()

    def add(pipe: IO[bytes] | None, chunk: bytes) -> None:
        captures[pipe].add(chunk)
        for listener in hook:
            try:
                listener(names[pipe], chunk)
            except Exception:  # a bug in the caller's hook must not leave the run unkilled
                logger.exception("a run's on_output hook failed; not calling it again")
                hook.clear()

    stopped = _pump(process, captures, add, start + timeout, kill_leftovers, stop)
    code = process.wait()
    return Outcome(
        exit_code=None if stopped else code,
        stdout=captures[process.stdout],
        stderr=captures[process.stderr],
        timed_out=stopped and not (cancel.is_set() or limit.is_set()),
        duration=time.monotonic() - start,
        cancelled=stopped and cancel.is_set(),
        limited=stopped and limit.is_set() and not cancel.is_set(),
    )


def _pump(process: subprocess.Popen[bytes], captures: dict, add: Callable[[Any, bytes], None],
          deadline: float, kill_leftovers: Callable[[], object],
          stop: Callable[[], bool]) -> bool:  # fmt: skip
    """Read both pipes until they close; kill the run at `deadline` or when `stop()`.
    True if it was stopped that way."""
    selector = selectors.DefaultSelector()
    for pipe in captures:
        with contextlib.suppress(OSError):
            fcntl.fcntl(pipe.fileno(), F_SETPIPE_SZ, PIPE_SIZE)  # fewer, larger reads
        selector.register(pipe, selectors.EVENT_READ)
    timed_out, ended = False, None
    try:
        while selector.get_map():
            now = time.monotonic()
            if not timed_out and (now >= deadline or stop()):
                timed_out = True
                _kill(process, kill_leftovers)
            if ended is None and process.poll() is not None:
                ended = now
                _kill(process, kill_leftovers)  # the run is over: so are its leftovers
            if ended is not None and now - ended > DRAIN_AFTER_EXIT:
                break  # something we could not kill still holds the pipe
            wait = 0.05 if ended is not None or timed_out else min(0.05, deadline - now)
            for key, _ in selector.select(max(wait, 0)):
                chunk = os.read(key.fd, PIPE_SIZE)
                if chunk:
                    add(key.fileobj, chunk)
                else:
                    selector.unregister(key.fileobj)
    finally:
        selector.close()
        for pipe in captures:
            pipe.close()
    if not timed_out and process.poll() is None:
        # Both pipes can close a moment before the exit is seen: killing then gave -9.
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=EXIT_AFTER_EOF)
        _kill(process, kill_leftovers)
    return timed_out


def _kill(process: subprocess.Popen[bytes], kill_leftovers: Callable[[], object]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    kill_leftovers()
