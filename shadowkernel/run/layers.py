"""Throwaway copy-on-write layers over $HOME and other paths a run may write (`writable=`).

Each path gets a kernel overlayfs (lower: the real path, upper and work: in a 0700 directory
made for the run), bound over the path inside the run. The run reads the real files and
writes its own copies; when it ends, `written()` lists what it changed (the top-most new or
changed entry of each upper), and `close()` drops it all: nothing of it reaches the machine.

Writes vanish with the run rather than being kept per branch: a branch's later runs start
from the real home again, so what one run did to `~/.bashrc` cannot steer the next one, and
the result says what was tried.

bwrap 0.8 has no `--overlay`, so the layers are mounted before the sandbox starts, with the
uppers on one tmpfs of `size` bytes (a run that fills it gets ENOSPC, the machine nothing),
by the run's `Mounter` (`userns.py`): as root, here, in the host's mount namespace (a few
hundred microseconds each); for other users, in the user namespace their `Holder` keeps
(`userxattr`), which the run enters before bwrap.

A path whose overlay cannot be mounted stays read-only to the run, /tmp and /var/tmp an
empty tmpfs (the run's notes say why): for a normal user, that is any path with something
mounted below it (a FUSE shadow in /tmp, say), which overlayfs in a user namespace refuses.
Submounts below a layered path are not seen through its overlay (overlayfs does not cross
mounts).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from ..errors import RunError
from ..paths import is_within
from .sandbox import Bind, Overlay
from .userns import Mounter
from .views import clear_stale, destroy, owner_tag

RUNS = "shadowkernel-runs"  # in the scratch parent: one directory per live run, PID.START-XXXX


def check_writable(paths: Sequence[str], folder: str) -> tuple[str, ...]:
    """The `writable=` argument as absolute real paths, or a RunError naming the bad one."""
    checked = []
    for path in paths:
        real = os.path.realpath(os.fspath(path))
        if not os.path.isabs(os.fspath(path)) or not os.path.isdir(real):
            raise RunError(f"writable={path!r}: give absolute paths of existing directories")
        if real == "/" or any(c in real for c in ",:\\"):
            raise RunError(f"writable={path!r}: cannot be layered (the root, or a path "
                           "holding ',', ':' or '\\')")  # fmt: skip
        if is_within(real, folder):
            raise RunError(f"writable={path!r} lies inside the project, which runs write "
                           "anyway (into the branch's scratch)")  # fmt: skip
        checked.append(real)
    return tuple(dict.fromkeys(checked))


@dataclass(eq=False)
class Layers:
    """The layers of one run; use as a context manager."""

    paths: tuple[str, ...]  # real absolute paths, each a directory
    size: int  # bytes of the tmpfs holding every upper layer
    parent: str  # the scratch parent, where the run's directory is made
    mounter: Mounter  # HOST (root), or the user's Holder
    unlisted: frozenset[str] = frozenset()  # layered paths whose writes `written()` leaves out
    base: str = ""
    binds: list[Bind] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # path -> why it stays read-only

    @property
    def privileged(self) -> bool:
        return self.mounter.privileged

    def __enter__(self) -> Layers:
        if not self.paths:
            return self
        home = runs_home(self.parent, self.privileged)
        os.makedirs(home, mode=0o700, exist_ok=True)
        clear_stale(home)  # layers of a process killed before it could drop them
        self.base = tempfile.mkdtemp(prefix=f"{owner_tag(os.getpid())}-", dir=home)
        try:
            self.mounter.mount("tmpfs", self.base, f"size={self.size},mode=0700")
            for number, path in enumerate(self.paths):
                self._layer(number, path)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _layer(self, number: int, lower: str) -> None:
        layer = os.path.join(self.base, str(number))
        for part in ("upper", "work", "mnt"):
            os.makedirs(self.mounter.path(os.path.join(layer, part)))
        overlay = Overlay(lower, f"{layer}/upper", f"{layer}/work", f"{layer}/mnt")
        options = overlay.options + ("" if self.privileged else ",userxattr")
        if not self.privileged and (below := mounted_below(lower)):
            self.failed[lower] = (f"{below} is mounted below it, and overlayfs in a user "
                                  "namespace refuses a lower holding mounts")  # fmt: skip
            return
        try:
            self.mounter.mount("overlay", overlay.mnt, options)
        except RunError as error:  # e.g. a lower overlayfs cannot stack on
            self.failed[lower] = str(error)
            return
        self.binds.append(Bind(overlay.mnt, lower))

    def written(self) -> tuple[str, ...]:
        """Paths the run created, changed or deleted in its layers (top-most of each)."""
        opaque = self.mounter.xattrs.opaque
        found: list[str] = []
        for number, path in enumerate(self.paths):
            if path not in self.failed and path not in self.unlisted:
                upper = self.mounter.path(os.path.join(self.base, str(number), "upper"))
                found += _changes(upper, path, opaque)
        return tuple(sorted(found))

    def close(self) -> None:
        if self.base:
            for number in range(len(self.paths)):  # overlayfs leaves its work/work at 0000
                with contextlib.suppress(OSError):
                    work = os.path.join(self.base, str(number), "work", "work")
                    os.chmod(self.mounter.path(work), 0o700)
            destroy(self.base, self.mounter)  # detaches the overlays below the tmpfs with it
        self.base, self.binds = "", []


@contextlib.contextmanager
def private_tmp(needed: bool) -> Iterator[str | None]:
    """A fresh 0700 temporary directory for a run confined without namespaces (its TMPDIR:
    Landlock lets it write there, not in the machine's /tmp), removed after the run."""
    if not needed:
        yield None
        return
    folder = tempfile.mkdtemp(prefix="shadowkernel-run-tmp-")
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def with_tmp(env: dict[str, str], tmp: str | None) -> dict[str, str]:
    return env if tmp is None else {**env, "TMPDIR": tmp, "TMP": tmp, "TEMP": tmp}


def mounted_below(path: str) -> str | None:
    """A mount point strictly below `path`, if any (the kernel locks such mounts for a user
    namespace, and overlayfs there cannot clone a lower that holds locked mounts)."""
    with contextlib.suppress(OSError), open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4].replace("\\040", " ")
            if point != path and is_within(point, path):
                return point
    return None


def runs_home(parent: str, privileged: bool) -> str:
    """Where runs' layers go: one directory per uid, each only its owner can enter."""
    return os.path.join(parent, RUNS if privileged else f"{RUNS}-{os.geteuid()}")


def _changes(upper: str, lower: str, opaque: str) -> list[str]:
    """Entries of `upper` that are not just parents copied up for a change below them."""
    found = []
    with contextlib.suppress(OSError), os.scandir(upper) as entries:
        for entry in entries:
            below = os.path.join(lower, entry.name)
            if entry.is_dir(follow_symlinks=False) and _plain_copy_up(entry.path, below, opaque):
                found += _changes(entry.path, below, opaque)
            else:
                found.append(below)
    return found


def _plain_copy_up(upper_dir: str, lower_path: str, opaque: str) -> bool:
    try:
        lower_is_dir = stat.S_ISDIR(os.lstat(lower_path).st_mode)
    except OSError:
        return False
    with contextlib.suppress(OSError):
        if os.getxattr(upper_dir, opaque, follow_symlinks=False) == b"y":
            return False
    return lower_is_dir
