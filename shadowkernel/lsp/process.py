"""A server's process with its pipes as asyncio streams, started so that no cancel hangs it.

`asyncio.create_subprocess_exec` connects the pipes in a task of its own; on Python 3.11 a
loop that cancels every task as it ends (`asyncio.run` returning, as an async host's does
around a workspace opened with `loop="running"`) cancels that task while a server starts, and
the start then waits for ever for an exit it is never told of (CPython issues 125502 and
133536: `asyncio.run` never returns; `tests/test_running_loop.py` hung so). Here the
process is a `Popen`, its pipes are connected in the caller's task (a cancel there kills the
process and ends), and a thread waits for its exit, as asyncio's own child watcher does.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO


class ServerProcess:
    """What a client uses of `asyncio.subprocess.Process`: `pid`, `returncode`, `wait()`,
    and the `stdin` writer, `stdout` and `stderr` readers."""

    def __init__(self, popen: subprocess.Popen[bytes], stdin: asyncio.StreamWriter,
                 stdout: asyncio.StreamReader, stderr: asyncio.StreamReader) -> None:  # fmt: skip
        self.pid = popen.pid
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self._popen = popen
        self._exited: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        threading.Thread(target=self._wait_for_exit, name=f"server-{self.pid}-exit",
                         daemon=True).start()  # fmt: skip

    @property
    def returncode(self) -> int | None:
        return self._popen.returncode

    async def wait(self) -> int:
        return await asyncio.shield(self._exited)  # one waiter cancelled, the others still wait

    def _wait_for_exit(self) -> None:
        code = self._popen.wait()
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody awaits it any more
            self._exited.get_loop().call_soon_threadsafe(_settle, self._exited, code)


async def spawn(command: Sequence[str], cwd: Path, env: Mapping[str, str] | None,
                limit: int) -> ServerProcess:  # fmt: skip
    """Start `command` in a session of its own (killing the group ends its helpers too)."""
    popen = subprocess.Popen(list(command), cwd=cwd, env=env, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             start_new_session=True)  # fmt: skip
    try:
        assert popen.stdin and popen.stdout and popen.stderr
        stdout = await _reader(popen.stdout, limit)
        stderr = await _reader(popen.stderr, limit)
        stdin = await _writer(popen.stdin)
    except BaseException:
        # Killed, it ends at once; its pipes close with their transports (at its EOF) or,
        # those not yet connected, with their file objects.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(popen.pid, signal.SIGKILL)
        popen.wait()
        raise
    return ServerProcess(popen, stdin, stdout, stderr)


async def _reader(pipe: IO[bytes], limit: int) -> asyncio.StreamReader:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit, loop=loop)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader, loop=loop), pipe)
    return reader


async def _writer(pipe: IO[bytes]) -> asyncio.StreamWriter:
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.connect_write_pipe(
        lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader(loop=loop), loop=loop), pipe
    )
    return asyncio.StreamWriter(transport, protocol, None, loop)


def _settle(future: asyncio.Future[int], code: int) -> None:
    if not future.done():
        future.set_result(code)
