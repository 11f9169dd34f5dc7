"""Attribute synthesis: the `Stat` a program sees for a lower entry or an override.

Pure code: a lower entry's attributes are its `lstat`, passed through; an override's are
made from what it records: its type and mode, its owner (or, where it records none, the
owner of the user's folder), its times (atime and ctime default to the mtime) and its
link count (the caller counts its names). Only a `File` that borrows a lower file's bytes
needs that file's size, which the caller supplies.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, replace

from ..paths import RelPath
from .store import Dir, File, Meta, Override, Special, Symlink, Whiteout


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


def of_override(
    override: Override, owner: tuple[int, int], lower_size: Callable[[RelPath], int | None],
    nlink: int | None = None,
) -> Stat | None:  # fmt: skip
    """What `override` shows, or None where it shows nothing (a whiteout, a file whose lower
    origin is gone). `owner` stands in where the override records none; `lower_size`
    answers the size of a lower file (None if it is missing); `nlink` counts its names
    (None: 2 for a directory, 1 for anything else)."""
    if isinstance(override, Whiteout):
        return None
    if isinstance(override, Dir):
        return _made(override, stat.S_IFDIR | override.mode, 4096, owner, nlink or 2)
    names = nlink or 1
    if isinstance(override, Symlink):
        return _made(override, stat.S_IFLNK | 0o777, len(override.target), owner, names)
    if isinstance(override, Special):
        return replace(_made(override, override.mode, 0, owner, names), rdev=override.rdev)
    size = file_size(override, lower_size)
    if size is None:
        return None
    return _made(override, stat.S_IFREG | override.mode, size, owner, names)


def _made(override: File | Dir | Symlink | Special, mode: int, size: int,
          owner: tuple[int, int], nlink: int) -> Stat:  # fmt: skip
    uid, gid = owner_of(override, owner)
    mtime_ns = override.mtime_ns
    atime_ns = mtime_ns if override.atime_ns is None else override.atime_ns
    ctime_ns = mtime_ns if override.ctime_ns is None else override.ctime_ns
    return Stat(mode=mode, size=size, mtime_ns=mtime_ns, nlink=nlink, uid=uid, gid=gid,
                atime_ns=atime_ns, ctime_ns=ctime_ns)  # fmt: skip


def owner_of(override: Meta, default: tuple[int, int]) -> tuple[int, int]:
    """The (uid, gid) an entry shows: its own, or `default` where it records none."""
    uid = default[0] if override.uid is None else override.uid
    return uid, default[1] if override.gid is None else override.gid


def file_size(override: File, lower_size: Callable[[RelPath], int | None]) -> int | None:
    if override.blob is not None:
        return override.blob.size
    return None if override.origin is None else lower_size(override.origin)
