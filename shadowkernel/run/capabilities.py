"""What this machine allows a workspace to do, probed once, and which mode follows (pure).

Two modes:

- "fuse": the folder proxy is a FUSE mount (the design's normal case). Needs `/dev/fuse`
  present and openable, and either root or a setuid `fusermount3`.
- "documents": no mount. Language servers are rooted at the user's folder and get the
  branch's staged files as open documents; runs happen in a private copy of the project
  (see `overlay/detached.py` and `run/copy.py`). Plain Docker containers, most JupyterHub
  pods, many clusters and macOS end up here.

Runs also depend on the sandbox (bwrap in its own user, PID and network namespaces: offline
runs, a read-only machine), on Landlock (which confines runs where bwrap cannot start: an
unprivileged container) and on overlayfs; the probes record those too, so the reason a
workspace gives names all of them. `confinement` picks the layer for one run.

`decide` is a pure function over probed `Facts` (tested directly); `probe()` does the I/O,
once per process. Caveat: the probes show what should work; a FUSE mount can still fail
(a container with the device but without CAP_SYS_ADMIN), which is why mode="auto" also falls
back when the mount itself fails (workspace.py).
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import socket
import stat
import subprocess
import tempfile
from dataclasses import dataclass

from ..errors import ArgumentError, OverlayError, RunError
from . import landlock
from .sandbox import _has_filesystem

MODES = ("auto", "fuse", "documents")
FUSE_DEVICE = "/dev/fuse"


@dataclass(frozen=True)
class Facts:
    """One problem per capability (None: available)."""

    fuse_device: str | None  # /dev/fuse missing or not openable
    fusermount: str | None  # no usable fusermount3 (needed unless root)
    namespaces: str | None  # no sandbox: bwrap missing or its namespaces refused
    overlayfs: str | None  # the kernel has no overlayfs
    landlock: int = 0  # the Landlock ABI offered to this process (0: none)

    @property
    def fuse(self) -> str | None:
        return self.fuse_device or self.fusermount


@dataclass(frozen=True)
class Mode:
    name: str  # "fuse" | "documents"
    reason: str


def decide(requested: str, facts: Facts) -> Mode:
    """The mode a workspace runs in, and why, given what the machine allows."""
    if requested not in MODES:
        raise ArgumentError(f"mode={requested!r}: give one of {', '.join(map(repr, MODES))}")
    runs = _runs(facts)
    if requested == "documents":
        return Mode("documents", f"mode='documents' was asked for; {runs}")
    if facts.fuse is None:
        return Mode("fuse", f"FUSE mount possible ({FUSE_DEVICE} opens, mounting allowed)")
    if requested == "fuse":
        raise OverlayError(f"mode='fuse': no FUSE mount here ({facts.fuse}); pass "
                           "mode='auto' or mode='documents' to use the fallback")  # fmt: skip
    return Mode("documents", f"no FUSE mount ({facts.fuse}); {runs}")


def mount_failed(error: Exception, facts: Facts) -> Mode:
    """The fallback when the probes allowed a mount but mounting it failed."""
    first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return Mode("documents", f"the FUSE mount failed ({first[:300]}); {_runs(facts)}")


def _runs(facts: Facts) -> str:
    if facts.namespaces is None:
        return "lints from open documents, runs in a private copy in the sandbox"
    if facts.landlock:
        return (f"lints from open documents, runs in a private copy confined by Landlock "
                f"(ABI {facts.landlock}; no sandbox: {facts.namespaces}), paths not "
                "transparent")  # fmt: skip
    return (f"lints from open documents, runs refused unless sandbox=False: neither bwrap "
            f"({facts.namespaces}) nor Landlock can confine them here")  # fmt: skip


# -- which layer confines a run -------------------------------------------------------------


@dataclass(frozen=True)
class Confinement:
    layer: str  # "bwrap" (namespaces and a seccomp filter), "landlock", "none" (sandbox=False)
    abi: int  # the Landlock ABI, used alone or for scoping inside bwrap
    why: str | None = None  # why bwrap cannot start here

    def note(self, network: bool) -> str:
        """Which layer confined the run, for its notes."""
        if self.layer == "bwrap":
            scope = f", Landlock ABI {self.abi} scoped abstract unix sockets and signals"
            scoped = scope if network and self.abi >= 6 else ""
            return f"confined by bubblewrap (namespaces) and a seccomp filter{scoped}"
        if self.layer == "landlock":
            return (f"confined by {landlock.describe(self.abi, True, not network)} (bwrap "
                    f"cannot start here: {self.why}); limits by rlimits where no cgroup is "
                    "writable")  # fmt: skip
        return ("not confined (sandbox=False): the machine was writable and reachable as for "
                "any process of this user")  # fmt: skip


def confinement(sandbox: bool, network: bool, facts: Facts | None = None) -> Confinement:
    """The layer a run gets: bwrap where it starts, else Landlock; none only when asked
    (`sandbox=False`); where neither can confine it, a RunError saying what to pass. An
    offline run needs a Landlock that refuses TCP (ABI >= 4) to stay offline."""
    facts = facts or probe()
    if not sandbox:
        return Confinement("none", facts.landlock, facts.namespaces)
    if facts.namespaces is None:
        return Confinement("bwrap", facts.landlock)
    if facts.landlock >= 4 or (facts.landlock >= 1 and network):
        return Confinement("landlock", facts.landlock, facts.namespaces)
    if facts.landlock >= 1:
        raise RunError(f"this machine cannot keep a run offline: no sandbox "
                       f"({facts.namespaces}), and its Landlock (ABI {facts.landlock}) cannot "
                       "refuse TCP before Linux 6.7; pass network=True to run with the "
                       "network (still confined)")  # fmt: skip
    raise RunError(f"this machine cannot confine runs: no sandbox ({facts.namespaces}) and "
                   "no Landlock (Linux >= 5.13 with landlock among its security modules); "
                   "pass sandbox=False to run unconfined anyway")  # fmt: skip


# -- probes (I/O, once per process) ---------------------------------------------------------


@functools.cache
def probe() -> Facts:
    return Facts(
        fuse_device=_fuse_device(),
        fusermount=_fusermount(),
        namespaces=_namespaces(),
        overlayfs=None if _has_filesystem("overlay") else "the kernel lists no overlay filesystem",
        landlock=landlock.abi(),
    )


def fuse_problem() -> str | None:
    """Why this process cannot mount FUSE (None: it can, as far as probes tell): the cheap
    part of `probe` (no bwrap started), asked before starting what a mount needs; `probe`
    reuses what it found."""
    return _fuse_device() or _fusermount()


@functools.cache
def fuse_mounts() -> bool:
    """Whether a FUSE mount succeeds here, tried once per process (about 4 ms): fusermount3
    mounts a folder nobody serves and hands over its /dev/fuse descriptor, which is closed,
    then unmounts it. Lanes mount on demand only then (workspace.py): a mount that fails later
    has no open to fall back from, and this one fails where those would (no right to mount,
    root without CAP_SYS_ADMIN, a refusing security module)."""
    program = shutil.which("fusermount3")
    if program is None or fuse_problem() is not None:
        return False
    ours, theirs = socket.socketpair()
    target, mounted = "", False
    unmount = [program, "-u", "-z", "--"]
    try:
        target = tempfile.mkdtemp(prefix="shadowkernel-probe-")
        ours.settimeout(10)
        env = dict(os.environ, _FUSE_COMMFD=str(theirs.fileno()))  # where the fd is sent
        mount = [program, "-o", "nosuid,nodev,fsname=shadowkernel-probe", "--", target]
        mounted = _quietly(mount, env, theirs.fileno()) == 0
        if not mounted:
            return False
        for fd in socket.recv_fds(ours, 1, 1)[1]:
            os.close(fd)
        mounted = _quietly([*unmount, target], env) != 0
        return not mounted
    except (OSError, subprocess.SubprocessError):
        return False
    finally:
        ours.close()
        theirs.close()
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            if mounted:  # a step after the mount failed: it goes all the same
                _quietly([*unmount, target], dict(os.environ))
            os.rmdir(target)


def _quietly(argv: list[str], env: dict[str, str], *keep: int) -> int:
    done = subprocess.run(argv, env=env, pass_fds=keep, capture_output=True, timeout=10)
    return done.returncode


@functools.cache
def _fuse_device() -> str | None:
    try:
        fd = os.open(FUSE_DEVICE, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return f"{FUSE_DEVICE} is missing"
    except OSError as error:
        return f"{FUSE_DEVICE} cannot be opened: {error.strerror}"
    os.close(fd)
    return None


@functools.cache
def _fusermount() -> str | None:
    if os.geteuid() == 0:
        return None  # root mounts directly
    program = shutil.which("fusermount3")
    if program is None:
        return "fusermount3 is not installed (apt-get install fuse3)"
    st = os.stat(program)
    if not (st.st_mode & stat.S_ISUID and st.st_uid == 0):
        return f"{program} is not setuid root, and this process is not root"
    return None


def _namespaces() -> str | None:
    program = shutil.which("bwrap")
    if program is None:
        return "bwrap is not installed (apt-get install bubblewrap)"
    if os.geteuid() == 0 and not _has_sys_admin():
        return "root without CAP_SYS_ADMIN (root's runs mount their layers themselves)"
    # What a run's sandbox needs (run/sandbox.py): a masked /proc (Docker) refuses --proc.
    argv = [program, "--die-with-parent", "--unshare-user", "--unshare-pid", "--unshare-net",
            "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "true"]  # fmt: skip
    try:
        done = subprocess.run(argv, capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bwrap failed: {error}"
    if done.returncode != 0:
        return f"bwrap refused: {done.stderr.decode(errors='replace').strip()[:200]}"
    return None


def _has_sys_admin() -> bool:
    with open("/proc/self/status") as f:
        effective = next(line for line in f if line.startswith("CapEff:")).split()[1]
    return bool(int(effective, 16) >> 21 & 1)  # CAP_SYS_ADMIN is capability 21
