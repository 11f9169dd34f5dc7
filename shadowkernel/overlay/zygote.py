"""Overlay processes forked from one that has already imported what they run.

An overlay process spends about 0.25 s of CPU importing trio and pyfuse3 before it can mount,
and a workspace starts one per lane: at open, and again each time a workspace of ruff lanes
opens more under load, while its agents wait for answers. The zygote is one process that
imported `overlay.server` once; each overlay is a fork of it (a few ms), its mount and control
channel its own as before. One zygote serves every workspace of the kernel's process (a fork
of that process starts its own); it exits when that process closes its end or dies, and its
overlays with it (their parent-death signal, besides their own control channels closing).

The overlays are the zygote's children, not ours, so the zygote tells how each ended: for
every fork it keeps the write end of a status pipe and writes the exit code there as it reaps
the child (`Forked` reads it, as `Popen` reads a child's status). Where a zygote cannot start,
or `SHADOWKERNEL_OVERLAY_FORK=0`, `spawn` returns None and `Shadow` starts the process itself.

    python -m shadowkernel.overlay.zygote FD   (FD: its end of a SOCK_SEQPACKET pair)

Both the zygote and a process started without it run by `python_command`: the kernel's working
directory is not on their sys.path (`-P`), so a user's `outcome.py` beside the notebook cannot
shadow one of trio's dependencies; PYTHONPATH is kept, and this package is found where the
kernel found it.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pickle
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
from typing import Any

STATUS = struct.Struct("<i")  # an exit code, negative for the signal that ended the process
UNKNOWN = 256  # the code of a fork whose zygote ended first (no exit code is this large)
START_TIMEOUT = 30.0  # seconds for the zygote's imports, or one fork, to answer
MESSAGE = 1 << 20  # bytes: a request is an argv, an environment and a folder


# -- the kernel's side ------------------------------------------------------------------------

# The folder this package was imported from (site-packages, or a checkout).
HOME = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def python_command(module: str, *arguments: str) -> list[str]:
    """`python -m MODULE *arguments` without the working directory on sys.path (`-P`: a
    user's module in the kernel's folder named like one of trio's dependencies would break
    the mount), this package found where the kernel found it (appended when no default
    path has it, as for a kernel started in a checkout)."""
    code = (f"import runpy, sys; h = {HOME!r}; h in sys.path or sys.path.append(h); "
            f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)")  # fmt: skip
    return [sys.executable, "-P", "-c", code, *arguments]


class Forked:
    """An overlay forked by the zygote, seen through `subprocess.Popen`'s poll, wait, kill
    and pid: its status comes through its status pipe, its kill through a pidfd."""

    def __init__(self, pid: int, status_fd: int, pidfd: int | None) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._status_fd, self._pidfd = status_fd, pidfd
        self._ended = False

    def poll(self) -> int | None:
        self._read(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        if not self._read(timeout):
            raise subprocess.TimeoutExpired(f"overlay {self.pid}", timeout or 0.0)
        return self.returncode

    def kill(self) -> None:
        if self._ended:
            return
        with contextlib.suppress(ProcessLookupError):
            if self._pidfd is not None:
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
            else:
                os.kill(self.pid, signal.SIGKILL)

    def _read(self, timeout: float | None) -> bool:
        """True once the process ended (its code read, or the zygote gone: code unknown)."""
        if self._ended:
            return True
        if not select.select([self._status_fd], [], [], timeout)[0]:
            return False
        data = os.read(self._status_fd, STATUS.size)
        self.returncode = STATUS.unpack(data)[0] if len(data) == STATUS.size else UNKNOWN
        self._release()
        return True

    def _release(self) -> None:
        """Close the status pipe and the pidfd, once."""
        if not self._ended:
            self._ended = True
            os.close(self._status_fd)
            if self._pidfd is not None:
                os.close(self._pidfd)

    def __del__(self) -> None:
        with contextlib.suppress(OSError):
            self._release()


class _Zygote:
    """The kernel's handle on the zygote process: one request at a time."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.process = subprocess.Popen(
            python_command("shadowkernel.overlay.zygote", str(theirs.fileno())),
            pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        theirs.close()
        self.sock = ours
        self.sock.settimeout(START_TIMEOUT)

    def fork(self, argv: list[str], control_fd: int, log_fd: int) -> Forked:
        read_end, write_end = os.pipe()
        try:
            request = pickle.dumps((argv, dict(os.environ), os.getcwd(), current_umask()))
            socket.send_fds(self.sock, [request], [control_fd, log_fd, write_end])
            reply, fds, _, _ = socket.recv_fds(self.sock, MESSAGE, 1)
            if not reply:
                raise EOFError("the zygote closed its channel")
            pid = pickle.loads(reply)
            if isinstance(pid, str):  # the zygote could not fork: it says why
                raise OSError(pid)
        except BaseException:
            os.close(read_end)
            raise
        finally:
            os.close(write_end)
        return Forked(pid, read_end, fds[0] if fds else None)

    def close(self) -> None:
        self.sock.close()  # the zygote exits at the end of its channel
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def current_umask() -> int | None:
    """This process's umask, read without setting it (`os.umask` sets it for every thread,
    for a moment another thread may create files in); None before Linux 4.7."""
    try:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1], 8) for line in status if line.startswith("Umask:"))
    except (OSError, StopIteration, ValueError):
        return None


_lock = threading.Lock()
_zygote: _Zygote | None = None


def spawn(argv: list[str], control_fd: int, log_fd: int) -> Forked | None:
    """`python -m shadowkernel.overlay.server *argv --control FD` as a fork of the zygote,
    with `control_fd` as FD and `log_fd` as its stdout and stderr, in this process's current
    environment, folder and umask; None where no zygote serves (then start the process yourself)."""
    global _zygote
    if os.environ.get("SHADOWKERNEL_OVERLAY_FORK") == "0":
        return None
    with _lock:
        for _ in range(2):  # a zygote that died meanwhile is started again, once
            try:
                if _zygote is None:
                    _zygote = _Zygote()
                return _zygote.fork(argv, control_fd, log_fd)
            except (OSError, EOFError, pickle.PickleError):
                if _zygote is not None:
                    _zygote.close()
                _zygote = None
    return None


def prestart() -> None:
    """Start the zygote without waiting for its imports, where none serves yet: the first
    `spawn` then waits only for what is left of them (a workspace calls this before its other
    opening steps, which run beside the zygote's 0.2 s of imports). A zygote that cannot
    start is left to `spawn`, which says so or starts the process itself."""
    global _zygote
    if os.environ.get("SHADOWKERNEL_OVERLAY_FORK") == "0":
        return
    with _lock:
        if _zygote is None:
            with contextlib.suppress(OSError):
                _zygote = _Zygote()


def _forget_in_a_fork() -> None:
    """A fork of this process (multiprocessing's default start) starts a zygote of its own:
    the channel it inherited is its parent's, and so may be the lock's state."""
    global _lock, _zygote
    _lock = threading.Lock()
    if _zygote is not None:
        _zygote.sock.close()  # this process's copy: the parent's channel stays open
        _zygote.process.returncode = 0  # not ours to wait for
        _zygote = None


os.register_at_fork(after_in_child=_forget_in_a_fork)


@atexit.register
def _close() -> None:
    global _zygote
    with _lock:
        if _zygote is not None:
            _zygote.close()
            _zygote = None


# -- the zygote's side ------------------------------------------------------------------------


def main(fd: int) -> None:
    from . import server  # the imports every overlay needs, paid once here

    sock = socket.socket(fileno=fd)
    statuses: dict[int, int] = {}  # child pid -> the write end of its status pipe

    def reap(*_: Any) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if (status_fd := statuses.pop(pid, None)) is not None:
                with contextlib.suppress(OSError):
                    os.write(status_fd, STATUS.pack(os.waitstatus_to_exitcode(status)))
                os.close(status_fd)

    signal.signal(signal.SIGCHLD, reap)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C of the kernel's terminal is not ours
    while True:
        try:
            request, fds, _, _ = socket.recv_fds(sock, MESSAGE, 3)
        except OSError:
            break
        if not request:
            break  # the kernel's process closed its end, or died
        control_fd, log_fd, status_fd = fds
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})  # no reap before its pidfd
        try:
            pid = os.fork()
        except OSError as error:
            pid, pidfd = -1, None
            reply = pickle.dumps(f"could not fork an overlay process: {error}")
            os.close(status_fd)
        else:
            if pid == 0:
                sock.close()
                inherited = [status_fd, *statuses.values()]
                _child(server, pickle.loads(request), control_fd, log_fd, inherited)
            statuses[pid], pidfd, reply = status_fd, _pidfd(pid), pickle.dumps(pid)
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
            os.close(control_fd)
            os.close(log_fd)
        socket.send_fds(sock, [reply], [] if pidfd is None else [pidfd])
        if pidfd is not None:
            os.close(pidfd)


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):  # before Linux 5.3: the kernel signals by pid
        return None


def _child(server: Any, request: tuple[list[str], dict[str, str], str, int | None],
           control_fd: int, log_fd: int, inherited: list[int]) -> None:  # fmt: skip
    """Become the overlay process (never returns)."""
    code = 1
    try:
        for fd in inherited:  # other children's status pipes: theirs to end
            os.close(fd)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # libfuse waits for fusermount3
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        os.setsid()
        argv, env, folder, umask = request
        if umask is not None:  # the overlay creates its spill files as a started process would
            os.umask(umask)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        os.close(null)
        os.close(log_fd)
        os.environ.clear()
        os.environ.update(env)
        with contextlib.suppress(OSError):  # a folder removed since: the overlay needs none
            os.chdir(folder)
        sys.argv = ["shadowkernel.overlay.server", *argv]
        server.main([*argv, "--control", str(control_fd)])
        code = 0
    except SystemExit as exit:
        code = exit.code if isinstance(exit.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


if __name__ == "__main__":
    main(int(sys.argv[1]))
