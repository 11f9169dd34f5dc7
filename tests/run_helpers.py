"""Shared pieces of the run tests: a run's processes found by a marker, a bounded wait, and a
gate that holds runs until the test opens it.

A run's processes are looked for in the host's /proc by a marker in their command line (their
PIDs inside the run's PID namespace mean nothing out here); the sandbox's own processes
(bwrap) carry the command in theirs, so `marked(marker)` finds the whole tree.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from waiting import wait_for as wait_for  # the one bounded wait, re-exported for run tests


def marked(marker: str, argv0: bool = False) -> dict[int, str]:
    """Host processes whose command line holds `marker` (or whose argv[0] starts with it)."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            hit = cmdline.startswith(marker) if argv0 else marker in cmdline
            if hit and "pytest" not in cmdline:
                found[int(entry)] = cmdline
    return found


def alive_with(pid: int, marker: str) -> bool:
    """Whether `pid` is still a live process of the run (a zombie has no command line)."""
    try:
        return marker in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False


class Gate:
    """A loopback server runs (with `network=True`) connect to and wait at: `arrived` names
    who is waiting, `open()` lets them all go. Proves runs overlap without timing them."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.arrived: list[str] = []
        self._waiting: list[socket.socket] = []
        self._open = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        # Accepting stops before the socket closes: a thread still in accept() when its fd
        # number is reused would take the next gate's connections (seen in the fallback child).
        self.server.settimeout(0.05)
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def code(self, name: str) -> str:
        """Python code for a run: arrive as `name`, wait for the gate, print `name`."""
        return (f"import socket; s = socket.create_connection(('127.0.0.1', {self.port})); "
                f"s.sendall(b'{name}\\n'); print('{name}' if s.recv(1) == b'g' else 'shut')")  # fmt: skip

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.server.accept()
            except TimeoutError:
                continue
            name = conn.makefile("rb").readline().decode().strip()
            with self._lock:
                self.arrived.append(name)
                self._waiting.append(conn)
                if self._open:
                    self._release()

    def wait(self, *names: str, runs: Sequence[Future[Any]] = (), bound: float = 60) -> None:
        """Until `names` are all at the gate; fails at once when one of `runs` ended first."""

        def arrived() -> bool:
            for run in runs:
                if run.done():
                    raise AssertionError(f"a run ended before the gate opened: {run.result()}")
            return set(names) <= set(self.arrived)

        wait_for(arrived, bound, f"{names} at the gate")

    def open(self) -> None:
        """Let every run waiting now, and every later one, go."""
        with self._lock:
            self._open = True
            self._release()

    def _release(self) -> None:
        for conn in self._waiting:
            with contextlib.suppress(OSError):  # a run cancelled meanwhile
                conn.sendall(b"g")
            conn.close()
        self._waiting.clear()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.open()
        self.server.close()


def add_user(name: str, *options: str) -> None:
    """`useradd` the user unless it exists. Two test files make users and may run at once
    (xdist): useradd fails rather than waits while another holds /etc/passwd's lock, so they
    take turns on a lock file of their own."""
    with open("/tmp/shadowkernel-tests-useradd.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if subprocess.run(["id", name], capture_output=True).returncode != 0:
            subprocess.run(["useradd", *options, name], check=True)


CHECKOUT = Path(__file__).resolve().parent.parent
VIEW = "checkout"  # in a child's temporary folder: where the readable view of the checkout goes


def readable_checkout(tmp: Path) -> list[str]:
    """A prefix mounting, in a private mount namespace the child inherits, a read-only
    overlayfs view of the checkout whose top folder others may enter: a checkout in a 0700
    folder (a `mktemp -d` clone) is otherwise out of the child's user's reach. Nothing is
    mounted on the machine, and the checkout is not changed."""
    top = tmp / "checkout-top"
    for folder in (top, tmp / VIEW):
        folder.mkdir(mode=0o755, exist_ok=True)
        folder.chmod(0o755)
    view = f"lowerdir={top}:{CHECKOUT}"
    script = 'mount -t overlay -o "$1" shadowkernel-checkout "$2" && shift 2 && exec "$@"'
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "sh",
            view, str(tmp / VIEW)]  # fmt: skip


NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def run_as(prefix: list[str], *argv: str) -> str:
    """This interpreter with `argv` behind `prefix` (another user, say); its last line."""
    done = subprocess.run([*prefix, sys.executable, *argv], capture_output=True, text=True,
                          timeout=120, cwd="/", env=dict(os.environ, HOME="/tmp"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def as_nobody(tmp: Path, *setpriv: str) -> list[str]:
    """A prefix running a command as `nobody`, the checkout shown at its own path through a
    view that user may read (a clone in a 0700 folder is otherwise out of its reach)."""
    over = 'mount --bind "$1" "$2" && shift 2 && exec "$@"'
    return [*readable_checkout(tmp), "sh", "-c", over, "sh", str(tmp / VIEW), str(CHECKOUT),
            *NOBODY, *setpriv]  # fmt: skip


@functools.cache
def other_users_problem() -> str | None:
    """Why tests cannot run commands as other users here (None: they can)."""
    if os.geteuid() != 0:
        return "becomes other users with setpriv: needs root"
    if shutil.which("setpriv") is None:
        return "setpriv missing (util-linux)"
    probe = subprocess.run(["unshare", "--mount", "true"], capture_output=True)
    if probe.returncode != 0:  # root without CAP_SYS_ADMIN, as in many containers
        return "shows the checkout to another user in a mount namespace: unshare --mount failed"
    return None


as_other_users = pytest.mark.skipif(
    other_users_problem() is not None, reason=other_users_problem() or ""
)
