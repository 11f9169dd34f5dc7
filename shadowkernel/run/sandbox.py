"""The command line that starts a run inside its sandbox (pure), and what the machine allows.

A run is started by bubblewrap (`bwrap`, the tool Flatpak and the Codex CLI use): a user
namespace (uid 0 inside for root, the invoking uid otherwise; all capabilities dropped, and
none ever held in the machine's initial user namespace), its own PID, IPC and, offline, network
namespace (bwrap brings loopback up in it; one namespace per run, so offline runs cannot reach
each other's servers; a new one costs about 1 ms here, so no pool is kept), and a mount
namespace built in this order, later entries over earlier ones:

1. the whole root filesystem read-only (`--ro-bind / /`, submounts included), so compilers,
   venvs, caches and config read as they are, at their own paths;
2. a minimal /dev (null, zero, full, random, urandom, tty, pts, shm; no disks, no device nodes
   can be made in a user namespace), /proc of the run's PID namespace with /proc/sys,
   /proc/sysrq-trigger, /proc/irq and /proc/bus read-only, /sys read-only; its own hostname
   (UTS namespace);
3. `tmpfs`: empty, size-limited tmpfs (a run that fills one gets ENOSPC, the machine
   nothing): /dev/shm always, /tmp and /var/tmp where they are not layered (below);
4. `binds`: copy-on-write layers prepared outside (`layers.py`: /tmp and /var/tmp for root,
   $HOME, `writable=` paths), then the branch's view of the project at the user's own path;
5. `hide`: empty tmpfs over directories the run must not reach (kept overlay views of other
   branches, when they lie outside /dev and /tmp, which are private already; what the
   workspace keeps of every branch: spill folders, durable branches; the session buses'
   sockets in /run/user and /run/dbus).

Where cgroups bound the run, a tiny `sh` prefix joins them (so every process of the run is
counted from the first fork), then `exec`s bwrap (about 1 ms; Python would cost 15-40); where
none does, `prlimit` sets rlimits instead. Every value reaches the script as an argument,
never spliced into it, so no path can inject shell code.

bwrap's own PID 1 reaps the command: when the command exits, the namespace's remaining
processes are killed by the kernel; killing bwrap (`--die-with-parent`, or its process group)
kills the whole run, daemons included.

bwrap 0.8 (Debian 12) has no `--overlay`, so copy-on-write layers and views are mounted
before it: by root in Python (`layers.py`, `views.py`), or, for other users, in the user and
mount namespace their `Holder` keeps (`userns.py`, `userxattr`), which the run enters with
`nsenter` just before bwrap (`enter`).

Inside, a seccomp filter (`seccomp.py`, read by bwrap from a descriptor the prefix opens)
refuses system calls a run never needs (keyrings, bpf, io_uring, new user namespaces, ...);
with `network=True`, where the run shares the machine's network namespace, a Landlock helper
(`landlock.py`, ABI >= 6) scopes abstract unix sockets and signals to the run before the
command starts. Where bwrap cannot start at all, `confined` gives the run Landlock alone
(`Plan.namespaces` False: writes only beneath its own folders, TCP refused offline).

Caveats: with one uid mapped, files owned by other uids show as
`nobody` inside and cannot be written through a copy-on-write layer. Unix sockets with a path
elsewhere on the read-only filesystem stay connectable with the run's uid (a read-only mount
does not stop `connect`). bwrap remounts every submount of `--ro-bind / /`
read-only; one unmounted meanwhile (views and FUSE mounts come and go on a shared machine)
fails its setup before the command starts, so the runner starts it again (`runner._start`).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace

from . import landlock

DEFAULT_TMP_SIZE = 2 * 2**30  # bytes of each private tmpfs; a size, not a reservation
PRIVATE_TMPFS = ("/tmp", "/var/tmp", "/dev/shm")
# bwrap 0.8 means to cover these itself but, in a user namespace, leaves /proc/sys writable
# here: a uid 0 mapped to the machine's root passes the sysctls' permission checks (mode
# bits only), so without this a run could set the machine's hostname or drop its caches.
PROC_COVERS = ["--ro-bind", "/proc/sys", "/proc/sys",
               "--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger"]  # fmt: skip


@dataclass(frozen=True)
class Bind:
    """A host path shown writable at `target` inside the run."""

    source: str
    target: str


@dataclass(frozen=True)
class Overlay:
    """A copy-on-write layer: a lower path, its upper and work directories, its mount point."""

    lower: str
    upper: str
    work: str
    mnt: str

    @property
    def options(self) -> str:
        return f"lowerdir={self.lower},upperdir={self.upper},workdir={self.work}"


@dataclass(frozen=True)
class Plan:
    argv: tuple[str, ...]
    cwd: str  # absolute, as the run sees it
    namespaces: bool  # False: no sandbox on this machine, the command runs as it is
    network: bool
    privileged: bool  # root: uid 0 inside its user namespace; else the invoking uid
    binds: tuple[Bind, ...] = ()  # in order: copy-on-write layers, then the project's view
    hide: tuple[str, ...] = ()  # covered by an empty tmpfs once the binds are in place
    cgroup_procs: tuple[str, ...] = ()  # cgroup.procs files to join before anything forks
    tmpfs: tuple[str, ...] = PRIVATE_TMPFS  # each given an empty tmpfs of `tmp_size` bytes
    tmp_size: int = DEFAULT_TMP_SIZE
    max_processes: int | None = None  # RLIMIT_NPROC, where no pids cgroup bounds the run
    max_memory: int | None = None  # RLIMIT_AS, where no memory cgroup bounds the run
    enter: int | None = None  # pid of the Holder whose namespaces the run enters before bwrap
    ids: tuple[int, int] | None = None  # uid, gid inside (None: root's 0, else the caller's)
    keep: tuple[str, ...] = ()  # shown read-only again over the empty tmpfs that covers them
    seccomp: str | None = None  # a file holding the filter bwrap loads (`seccomp.py`)
    confine: tuple[str, ...] = ()  # argv prefix confining the command (`landlock.helper`)


def command_line(plan: Plan) -> list[str]:
    """argv that starts the run described by `plan`."""
    sandbox = [*SNAPSHOT, *sandbox_flags(plan)] if plan.namespaces else []
    confine = list(plan.confine)
    return prefix(plan) + rlimits(plan) + entering(plan) + sandbox + confine + list(plan.argv)


# bwrap binds `/` with every mount below it, then remounts each read-only; a mount that goes
# meanwhile (another shadow's view, a FUSE mount ending) would fail its setup. In a private
# copy of the mount table, made first, nothing the machine mounts or unmounts reaches it.
SNAPSHOT = ("unshare", "--mount", "--propagation", "private", "--")


def sandbox_flags(plan: Plan) -> list[str]:
    flags = ["bwrap", "--die-with-parent", "--unshare-user", "--unshare-pid", "--unshare-ipc",
             "--unshare-uts"]  # fmt: skip
    uid, gid = plan.ids or ((0, 0) if plan.privileged else (None, None))
    if uid is not None:
        flags += ["--uid", str(uid), "--gid", str(gid)]
    if not plan.network:
        flags.append("--unshare-net")
    flags += ["--cap-drop", "ALL", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    flags += PROC_COVERS
    for path in plan.tmpfs:
        flags += ["--size", str(plan.tmp_size), "--tmpfs", path]
    for path in plan.keep:
        flags += ["--ro-bind", path, path]
    for bind in plan.binds:
        flags += ["--bind", bind.source, bind.target]
    for path in plan.hide:
        flags += ["--size", "4096", "--tmpfs", path, "--remount-ro", path]
    if plan.seccomp:
        flags += ["--seccomp", str(SECCOMP_FD)]  # opened by the prefix
    return flags + ["--chdir", plan.cwd, "--"]


SECCOMP_FD = 3  # the descriptor the prefix opens the filter's file on, for bwrap to read


def confined(plan: Plan, layer: str, landlock_abi: int, writable: Sequence[str],
             python: str, seccomp: str | None) -> Plan:  # fmt: skip
    """`plan` with its confinement: in bwrap, the seccomp filter `seccomp` and, where the run
    shares the machine's network, Landlock scoping of abstract unix sockets and signals; with
    Landlock alone, writes only beneath `writable`, TCP refused offline, and the same scoping;
    unconfined ("none"), as it is."""
    if layer == "bwrap":
        scope = plan.network and landlock_abi >= 6  # offline: abstract sockets are the run's own
        helper = landlock.helper(python, [], fs=False, offline=False) if scope else []
        return replace(plan, seccomp=seccomp, confine=tuple(helper))
    if layer == "landlock":
        helper = landlock.helper(python, list(writable), fs=True, offline=not plan.network)
        return replace(plan, confine=tuple(helper))
    return plan


def prefix(plan: Plan) -> list[str]:
    """`sh -c SCRIPT sh VALUES...` joining the cgroups (changing directory where no sandbox
    does it; opening the seccomp filter's file for bwrap), then exec'ing the rest; or nothing
    when there is nothing to do."""
    cd = [] if plan.namespaces else [plan.cwd]
    seccomp = [plan.seccomp] if plan.seccomp and plan.namespaces else []
    values = [*plan.cgroup_procs, *cd, *seccomp]
    if not values:
        return []
    lines = [f'echo 0 > "${i}"' for i in range(1, len(plan.cgroup_procs) + 1)]
    if cd:
        lines.append(f'cd "${len(plan.cgroup_procs) + 1}"')
    if seccomp:
        lines.append(f'exec {SECCOMP_FD}< "${len(values)}"')
    script = "set -e\n" + "\n".join(lines) + f'\nshift {len(values)}\nexec "$@"'
    return ["sh", "-c", script, "sh", *values]


def entering(plan: Plan) -> list[str]:
    """`nsenter` into the user and mount namespace of a normal user's Holder, where their
    layers and views are mounted, then exec bwrap there; or nothing."""
    if plan.enter is None or not plan.namespaces:
        return []
    return ["nsenter", f"--target={plan.enter}", "--user", "--mount", "--preserve-credentials",
            "--"]  # fmt: skip


def rlimits(plan: Plan) -> list[str]:
    """`prlimit` for the bounds no cgroup gives (RLIMIT_NPROC per uid, RLIMIT_AS per process)."""
    limits = []
    if plan.max_processes is not None:
        limits.append(f"--nproc={plan.max_processes}")
    if plan.max_memory is not None:
        limits.append(f"--as={plan.max_memory}")
    return ["prlimit", *limits, "--"] if limits else []


# -- what the machine allows (probed once) ------------------------------------------------------


@dataclass(frozen=True)
class Machine:
    root: bool
    overlayfs: bool


@functools.cache
def machine() -> Machine:
    """Facts read without starting anything; whether the sandbox itself starts is
    `capabilities.probe().namespaces` (bwrap really tried)."""
    return Machine(root=os.geteuid() == 0, overlayfs=_has_filesystem("overlay"))


def _has_filesystem(name: str) -> bool:
    try:
        with open("/proc/filesystems") as f:
            return any(line.split()[-1] == name for line in f if line.strip())
    except OSError:
        return False
