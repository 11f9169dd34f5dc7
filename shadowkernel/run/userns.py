"""Where a run's layers and views are mounted: here (root), or in a normal user's namespace.

Root mounts tmpfs and overlayfs in the machine's mount namespace (`HOST`). A normal user can
mount them only inside a user namespace of their own (overlayfs with `userxattr`, kernels
>= 5.11; its upper on a tmpfs, which holds user xattrs since 6.6), and such mounts live only
as long as that namespace. So each process keeps one for its user: the `Holder`, a child
process (`unshare --user --map-root-user --mount --propagation slave`) running a tiny mount
server on the standard library, which

- mounts and detaches on request (one JSON line each way): kept overlayfs views of the
  project, and each run's tmpfs of layers (bounded: a run that fills it gets ENOSPC);
- is entered by every run of the user (`nsenter`, `Plan.enter`) just before bwrap, so the
  run sees those mounts; bwrap's own user namespace below it drops every capability, and
  from there no process can act on the holder's namespaces;
- is reached from this process through /proc/PID/root (this mount namespace does not see
  its mounts), to write upper layers and read back what runs wrote.

Mounts of the machine keep reaching the holder (slave propagation): a FUSE mount made later,
say. When this process dies, the holder reads the end of its stdin and exits, and the kernel
drops its mounts (runs still inside keep theirs until they end).

Caveats: inside the holder only the user's uid and gid are mapped, so files of other users
show as `nobody` to runs and cannot be copied up (written) through a layer; a holder that
died (killed by hand) is started again by the next run, and the views it held are rebuilt.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import platform
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..errors import RunError
from ..overlay.upper import TRUSTED, USER, Xattrs

MNT_DETACH = 2
USERNS_OVERLAY_KERNEL = (6, 6)  # userxattr overlayfs (5.11) with its upper on tmpfs (6.6)

_libc = ctypes.CDLL(None, use_errno=True)

# The holder's program: standard library only, so any Python 3 runs it (the project's venv
# may not be readable by the user). Values arrive as JSON, never as shell or code.
SERVER = r"""
import ctypes, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
print("ready", flush=True)
for line in sys.stdin:
    ask = json.loads(line)
    if ask["op"] == "mount":
        code = libc.mount(ask["fstype"].encode(), os.fsencode(ask["target"]),
                          ask["fstype"].encode(), 0, ask["options"].encode())
    else:
        code = libc.umount2(os.fsencode(ask["target"]), 2)
    error = ctypes.get_errno() if code else 0
    print(json.dumps(os.strerror(error) if error else None), flush=True)
"""


def mount(fstype: str, target: str, options: str) -> None:
    """Mount in this process's own mount namespace (root)."""
    if _libc.mount(fstype.encode(), os.fsencode(target), fstype.encode(), 0,
                   options.encode()) != 0:  # fmt: skip
        code = ctypes.get_errno()
        raise RunError(f"mounting {fstype} at {target} failed: {os.strerror(code)}")


def detach(target: str) -> None:
    """Lazily unmount `target` here (EINVAL, not mounted, is fine)."""
    _libc.umount2(os.fsencode(target), MNT_DETACH)


@dataclass(frozen=True)
class HostMounter:
    """Root: mounts in the machine's mount namespace, with trusted xattrs and redirects."""

    privileged = True
    xattrs: Xattrs = TRUSTED
    redirects = True

    def mount(self, fstype: str, target: str, options: str) -> None:
        mount(fstype, target, options)

    def detach(self, target: str) -> None:
        detach(target)

    def path(self, target: str) -> str:
        return target

    @property
    def enter(self) -> int | None:
        return None


HOST = HostMounter()


@dataclass(eq=False)
class Holder:
    """A normal user's mount namespace, kept by a child process (see the module docstring)."""

    process: subprocess.Popen[str]
    lock: threading.Lock = field(default_factory=threading.Lock)
    privileged = False
    xattrs: Xattrs = USER
    redirects = False  # the kernel refuses redirect_dir and metacopy with userxattr

    @classmethod
    def start(cls, python: str = sys.executable, prefix: Sequence[str] = ()) -> Holder:
        """`prefix` runs the holder as someone else (tests: `setpriv` to a normal user)."""
        line = [*prefix, "unshare", "--user", "--map-root-user", "--mount", "--propagation",
                "slave", python, "-I", "-c", SERVER]  # fmt: skip
        process = subprocess.Popen(line, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, cwd="/")  # fmt: skip
        assert process.stdout is not None
        if process.stdout.readline() != "ready\n":
            process.kill()
            why = process.communicate()[1].strip() or f"exit code {process.wait()}"
            raise RunError(f"no user namespace for this user's mounts: {why}")
        return cls(process)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def enter(self) -> int | None:
        return self.pid

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def path(self, target: str) -> str:
        """`target` in the holder's mount namespace, as this process reaches it."""
        return f"/proc/{self.pid}/root{target}"

    def mount(self, fstype: str, target: str, options: str) -> None:
        error = self._ask(op="mount", fstype=fstype, target=target, options=options)
        if error is not None:
            raise RunError(f"mounting {fstype} at {target} in the user namespace failed: {error}")

    def detach(self, target: str) -> None:
        self._ask(op="umount", target=target)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.process.stdin.close()  # type: ignore[union-attr]
        self.process.wait()
        for pipe in (self.process.stdout, self.process.stderr):
            pipe.close()  # type: ignore[union-attr]

    def _ask(self, **request: str) -> str | None:
        with self.lock:
            try:
                self.process.stdin.write(json.dumps(request) + "\n")  # type: ignore[union-attr]
                self.process.stdin.flush()  # type: ignore[union-attr]
                answer = self.process.stdout.readline()  # type: ignore[union-attr]
            except (OSError, ValueError):
                answer = ""
        if not answer:
            raise RunError("the user namespace holding this user's mounts is gone")
        return json.loads(answer)


Mounter = HostMounter | Holder

_holders: dict[tuple[int, int], Holder] = {}  # (pid, euid): a forked child starts its own
_holders_lock = threading.Lock()


def mounter() -> Mounter:
    """HOST for root; else this process's Holder for its user (started on first use, again
    if it died)."""
    if os.geteuid() == 0:
        return HOST
    key = (os.getpid(), os.geteuid())
    with _holders_lock:
        holder = _holders.get(key)
        if holder is None or not holder.alive:
            holder = _holders[key] = Holder.start()
        return holder


def userns_overlay_problem() -> str | None:
    """Why a normal user's runs cannot get overlayfs here (None: they can)."""
    if kernel_version() < USERNS_OVERLAY_KERNEL:
        return (f"overlayfs in a user namespace with its upper on tmpfs needs Linux >= 6.6 "
                f"(this is {platform.release()})")  # fmt: skip
    try:
        mounter()
    except RunError as error:
        return str(error)
    return None


def kernel_version() -> tuple[int, int]:
    parts = platform.release().split(".")
    try:
        return int(parts[0]), int("".join(c for c in parts[1] if c.isdigit()) or 0)
    except (IndexError, ValueError):
        return (0, 0)
