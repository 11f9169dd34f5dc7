"""A cgroup per run: hard bounds on its processes and memory, and the list of what is alive.

A fork storm inside a PID namespace still takes PIDs from the whole machine, and a memory
bomb takes the machine's memory, so the bounds come from the pids and memory controllers:
`pids.max`, and `memory.max` (v2) or `memory.limit_in_bytes` (v1, with the swap limit where
the kernel has one). Over its memory cap the kernel's OOM killer kills inside the run only
(v2 kills the whole run: `memory.oom.group`); the result says so.

Each controller is looked for where this process already is: cgroup v2 (the unified
hierarchy, when its controllers are delegated: enabled in `cgroup.subtree_control` of this
process's cgroup), else cgroup v1 (a hierarchy per controller). Where neither is writable
(an unprivileged user without delegation), the run gets rlimits instead (RLIMIT_NPROC for its
uid, RLIMIT_AS per process: weaker, and the result says so).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import signal
import time
from dataclasses import dataclass, field

_names = itertools.count(1)
CONTROLLERS = ("pids", "memory")


@dataclass(frozen=True)
class Hierarchy:
    controller: str
    path: str  # this process's cgroup in it, where the run's cgroup is made
    v2: bool


def hierarchies() -> dict[str, Hierarchy]:
    """controller -> where a run's cgroup for it can be made (writable ones only)."""
    return {c: p for c, p in _places().items() if os.access(p.path, os.W_OK)}


@functools.cache
def _places() -> dict[str, Hierarchy]:
    """Where this process sits in each controller's hierarchy: read once (0.4 ms of reading
    /proc per run otherwise), since a process that moves between cgroups is rare; one moved
    makes its runs' cgroups below its old place (still bounded), until it restarts."""
    places = {c: _v2(c) or _v1(c) for c in CONTROLLERS}
    return {c: p for c, p in places.items() if p is not None}


def _v2(controller: str) -> Hierarchy | None:
    mount, own = _mount("cgroup2", None), _own_path(None)
    if mount is None or own is None:
        return None
    path = os.path.join(mount, own.lstrip("/"))
    try:
        with open(os.path.join(path, "cgroup.subtree_control")) as f:
            enabled = f.read().split()
    except OSError:
        return None
    return Hierarchy(controller, path, True) if controller in enabled else None


def _v1(controller: str) -> Hierarchy | None:
    mount, own = _mount("cgroup", controller), _own_path(controller)
    if mount is None or own is None:
        return None
    return Hierarchy(controller, os.path.join(mount, own.lstrip("/")), False)


def _mount(fstype: str, controller: str | None) -> str | None:
    with contextlib.suppress(OSError), open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            dash = fields.index("-")
            if fields[dash + 1] != fstype:
                continue
            if controller is None or controller in fields[-1].split(","):
                return fields[4]
    return None


def _own_path(controller: str | None) -> str | None:
    """This process's cgroup for `controller` in v1, or in the unified hierarchy (None)."""
    with open("/proc/self/cgroup") as f:
        for line in f:
            number, controllers, path = line.rstrip("\n").split(":", 2)
            if controller is None and number == "0" and not controllers:
                return path
            if controller is not None and controller in controllers.split(","):
                return path
    return None


@dataclass
class RunCgroup:
    """Fresh child cgroups (one per hierarchy) bounding one run; `close()` kills and removes."""

    places: dict[str, Hierarchy]
    max_processes: int
    max_memory: int
    paths: dict[str, str] = field(default_factory=dict)  # controller -> the run's cgroup

    def __post_init__(self) -> None:
        name = f"shadowkernel-run-{os.getpid()}-{next(_names)}"
        try:
            for controller, place in self.places.items():
                path = os.path.join(place.path, name)
                if path not in self.paths.values():  # v2: one cgroup for both controllers
                    os.mkdir(path)
                self.paths[controller] = path
                self._limit(controller, place.v2)
        except BaseException:
            self.close()
            raise

    def _limit(self, controller: str, v2: bool) -> None:
        if controller == "pids":
            self._write("pids", "pids.max", str(self.max_processes))
        elif v2:
            self._write("memory", "memory.max", str(self.max_memory))
            self._write("memory", "memory.swap.max", "0", optional=True)
            self._write("memory", "memory.oom.group", "1", optional=True)
        else:
            self._write("memory", "memory.limit_in_bytes", str(self.max_memory))
            self._write("memory", "memory.memsw.limit_in_bytes", str(self.max_memory),
                        optional=True)  # fmt: skip

    @property
    def procs_files(self) -> tuple[str, ...]:
        return tuple(os.path.join(p, "cgroup.procs") for p in dict.fromkeys(self.paths.values()))

    def pids(self) -> list[int]:
        found: set[int] = set()
        for procs in self.procs_files:
            with contextlib.suppress(OSError), open(procs) as f:
                found.update(int(line) for line in f if line.strip())
        return sorted(found)

    def limit_hit(self) -> int:
        """How many forks the pids limit refused."""
        return self._count("pids", "pids.events", "max")

    def oom_kills(self) -> int:
        """How many processes of the run the kernel killed for the memory cap."""
        name = "memory.events" if self.places.get("memory", _V1).v2 else "memory.oom_control"
        return self._count("memory", name, "oom_kill")

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
        for path in dict.fromkeys(self.paths.values()):
            with contextlib.suppress(OSError):
                os.rmdir(path)
        return emptied

    def _count(self, controller: str, name: str, key: str) -> int:
        if controller not in self.paths:
            return 0
        with contextlib.suppress(OSError), open(os.path.join(self.paths[controller], name)) as f:
            return sum(int(line.split()[1]) for line in f if line.split()[:1] == [key])
        return 0

    def _write(self, controller: str, name: str, value: str, optional: bool = False) -> None:
        try:
            with open(os.path.join(self.paths[controller], name), "w") as f:
                f.write(value)
        except OSError:
            if not optional:
                raise


_V1 = Hierarchy("memory", "", False)
