"""Attribute synthesis: the `Stat` a program sees for a lower entry or an override.

Pure code: a lower entry's attributes are its `lstat`, passed through; an override's are
made from what it records, with the owner the shadow gives entries it made (the owner of
the user's folder). Only a `File` that borrows a lower file's bytes needs that file's size,
which the caller supplies.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass

from ..paths import RelPath
from .store import Dir, File, Override, Symlink, Whiteout


@dataclass(frozen=True, slots=True)
class Stat:
    mode: int
    size: int
    mtime_ns: int
    nlink: int = 1
    uid: int = 0
    gid: int = 0
    rdev: int = 0
    atime_ns: int = 0
    ctime_ns: int = 0


def from_lstat(st: os.stat_result) -> Stat:
    return Stat(
        mode=st.st_mode, size=st.st_size, mtime_ns=st.st_mtime_ns, nlink=st.st_nlink,
        uid=st.st_uid, gid=st.st_gid, rdev=st.st_rdev, atime_ns=st.st_atime_ns,
        ctime_ns=st.st_ctime_ns,
    )  # fmt: skip


def synthetic(mode: int, size: int, mtime_ns: int, owner: tuple[int, int], nlink: int = 1) -> Stat:
    uid, gid = owner
    return Stat(mode=mode, size=size, mtime_ns=mtime_ns, nlink=nlink, uid=uid, gid=gid,
                atime_ns=mtime_ns, ctime_ns=mtime_ns)  # fmt: skip


def of_override(
    override: Override, owner: tuple[int, int], lower_size: Callable[[RelPath], int | None]
) -> Stat | None:
    """What `override` shows, or None where it shows nothing (a whiteout, a file whose lower
    origin is gone). `lower_size` answers the size of a lower file, None if it is missing."""
    if isinstance(override, Whiteout):
        return None
    if isinstance(override, Symlink):
        return synthetic(stat.S_IFLNK | 0o777, len(override.target), override.mtime_ns, owner)
    if isinstance(override, Dir):
        return synthetic(stat.S_IFDIR | override.mode, 4096, override.mtime_ns, owner, nlink=2)
    size = file_size(override, lower_size)
    if size is None:
        return None
    return synthetic(stat.S_IFREG | override.mode, size, override.mtime_ns, owner)


def file_size(override: File, lower_size: Callable[[RelPath], int | None]) -> int | None:
    if override.blob is not None:
        return override.blob.size
    return None if override.origin is None else lower_size(override.origin)
