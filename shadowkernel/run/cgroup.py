"""A pids cgroup per run: a hard bound on its processes, and the list of what is still alive.

A fork storm inside a PID namespace still takes PIDs from the whole machine (RLIMIT_NPROC
does not bind root), so the bound has to come from the pids controller. Where no writable
pids hierarchy exists (cgroup v2 without delegation, unprivileged), runs go without one and
the result says so.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import time

_names = itertools.count(1)


def pids_hierarchy() -> str | None:
    """This process's own cgroup in a writable v1 pids hierarchy, if there is one."""
    mount = _v1_mount("pids")
    own = _own_path("pids")
    if mount is None or own is None:
        return None
    path = os.path.join(mount, own.lstrip("/"))
    return path if os.access(path, os.W_OK) else None


def _v1_mount(controller: str) -> str | None:
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                fields = line.split()
                dash = fields.index("-")
                if fields[dash + 1] == "cgroup" and controller in fields[-1].split(","):
                    return fields[4]
    except OSError:
        pass
    return None


def _own_path(controller: str) -> str | None:
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            if controller in controllers.split(","):
                return path
    return None


class PidsCgroup:
    """A fresh child cgroup limited to `limit` processes; `close()` kills and removes it."""

    def __init__(self, parent: str, limit: int) -> None:
        self.path = os.path.join(parent, f"shadowkernel-run-{os.getpid()}-{next(_names)}")
        os.mkdir(self.path)
        self._write("pids.max", str(limit))

    @property
    def procs_file(self) -> str:
        return os.path.join(self.path, "cgroup.procs")

    def pids(self) -> list[int]:
        with open(self.procs_file) as f:
            return [int(line) for line in f if line.strip()]

    def limit_hit(self) -> int:
        """How many forks the limit refused."""
        with open(os.path.join(self.path, "pids.events")) as f:
            return sum(int(line.split()[1]) for line in f if line.startswith("max "))

    def kill_all(self, bound: float = 10.0) -> bool:
        """SIGKILL every member until none is left; False if some outlived `bound` seconds."""
        deadline = time.monotonic() + bound
        while pids := self.pids():
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            if time.monotonic() > deadline:
                return False
            time.sleep(0.002)  # dying processes leave the list within microseconds
        return True

    def close(self) -> bool:
        emptied = self.kill_all()
        with contextlib.suppress(OSError):
            os.rmdir(self.path)
        return emptied

    def _write(self, name: str, value: str) -> None:
        with open(os.path.join(self.path, name), "w") as f:
            f.write(value)
