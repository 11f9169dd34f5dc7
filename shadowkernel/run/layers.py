"""Throwaway copy-on-write layers over $HOME and other paths a run may write (`writable=`).

Each path gets a kernel overlayfs (lower: the real path, upper and work: on one size-limited
tmpfs made for the run, in a 0700 directory), bound over the path inside the run. The run
reads the real files and writes its own copies; when it ends, `written()` lists what it
changed (the top-most new or changed entry of each upper), and `close()` unmounts and drops
it all: nothing of it reaches the machine, and a run that fills the tmpfs gets ENOSPC.

Writes vanish with the run rather than being kept per branch: a branch's later runs start
from the real home again, so what one run did to `~/.bashrc` cannot steer the next one, and
the result says what was tried.

Root only: bwrap 0.8 has no `--overlay`, so the layers are mounted in the host's mount
namespace before the run (a few hundred microseconds each). Without root, these paths stay
read-only to the run (writes refused with EROFS), and the run's notes say so. Submounts below a
layered path are not seen through its overlay (overlayfs does not cross mounts).
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..errors import RunError
from .sandbox import Bind
from .views import clear_stale, destroy, mount, owner_tag

RUNS = "shadowkernel-runs"  # in the scratch parent: one tmpfs per live run, PID.START-XXXX
OPAQUE = "trusted.overlay.opaque"


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
        if (real + "/").startswith(folder.rstrip("/") + "/"):
            raise RunError(f"writable={path!r} lies inside the project, which runs write "
                           "anyway (into the branch's scratch)")  # fmt: skip
        checked.append(real)
    return tuple(dict.fromkeys(checked))


@dataclass(eq=False)
class Layers:
    """The layers of one run; use as a context manager."""

    paths: tuple[str, ...]  # real absolute paths, each a directory
    size: int  # bytes of the tmpfs holding every upper layer
    parent: str  # where the run's tmpfs is mounted (a 0700 directory below it)
    base: str = ""
    binds: list[Bind] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # path -> why it stays read-only

    def __enter__(self) -> Layers:
        if not self.paths:
            return self
        home = os.path.join(self.parent, RUNS)
        os.makedirs(home, mode=0o700, exist_ok=True)
        clear_stale(home)  # layers of a process killed before it could drop them
        self.base = tempfile.mkdtemp(prefix=f"{owner_tag(os.getpid())}-", dir=home)
        try:
            mount("tmpfs", self.base, f"size={self.size},mode=0700")
            for number, path in enumerate(self.paths):
                try:
                    self.binds.append(Bind(self._overlay(number, path), path))
                except RunError as error:  # e.g. a lower overlayfs cannot stack on
                    self.failed[path] = str(error)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _overlay(self, number: int, lower: str) -> str:
        layer = os.path.join(self.base, str(number))
        for part in ("upper", "work", "mnt"):
            os.makedirs(os.path.join(layer, part))
        options = f"lowerdir={lower},upperdir={layer}/upper,workdir={layer}/work"
        mount("overlay", f"{layer}/mnt", options)
        return f"{layer}/mnt"

    def written(self) -> tuple[str, ...]:
        """Paths the run created, changed or deleted in its layers (top-most of each)."""
        found: list[str] = []
        for number, path in enumerate(self.paths):
            if path not in self.failed:
                found += _changes(os.path.join(self.base, str(number), "upper"), path)
        return tuple(sorted(found))

    def close(self) -> None:
        if self.base:
            destroy(self.base)  # detaches the overlays below the tmpfs with it
        self.base, self.binds = "", []


def _changes(upper: str, lower: str) -> list[str]:
    """Entries of `upper` that are not just parents copied up for a change below them."""
    found = []
    with contextlib.suppress(OSError), os.scandir(upper) as entries:
        for entry in entries:
            below = os.path.join(lower, entry.name)
            if entry.is_dir(follow_symlinks=False) and _plain_copy_up(entry.path, below):
                found += _changes(entry.path, below)
            else:
                found.append(below)
    return found


def _plain_copy_up(upper_dir: str, lower_path: str) -> bool:
    try:
        lower_is_dir = stat.S_ISDIR(os.lstat(lower_path).st_mode)
    except OSError:
        return False
    with contextlib.suppress(OSError):
        if os.getxattr(upper_dir, OPAQUE, follow_symlinks=False) == b"y":
            return False
    return lower_is_dir
