"""Owners, modes and times of entries, as the kernel's local filesystems keep them.

Pure functions over overrides. The permission checks themselves (who may chown, chmod or
set times) are the kernel's: the mount has `default_permissions`, so a request that
reaches the overlay was allowed, and only its effect is recorded here:

- an entry a program creates is owned by the caller's uid, and by its gid unless the
  directory is set-group-ID (then the directory's gid; a new directory inherits the bit);
- a change of attributes sets the ctime; a write sets mtime and ctime; atime and mtime
  change independently (an override whose atime was its mtime keeps that value apart);
- an owner equal to the folder's owner is recorded as None, which is what it shows
  without one, so manifests made by the folder's owner stay as they were.
"""

from __future__ import annotations

import errno
import stat
from dataclasses import replace
from typing import Any

from .attributes import Stat
from .inodes import fail
from .store import Dir, File, Special, Symlink

Owned = File | Dir | Symlink | Special


def new_owner(
    caller: tuple[int, int] | None, directory: Stat, default: tuple[int, int]
) -> tuple[int | None, int | None]:
    """The (uid, gid) to record for an entry `caller` makes in `directory`."""
    uid, gid = caller or default
    if directory.mode & stat.S_ISGID:
        gid = directory.gid
    return _recorded(uid, default[0]), _recorded(gid, default[1])


def new_dir_mode(mode: int, directory: Stat) -> int:
    """A new directory's mode: what was asked, plus the parent's set-group-ID bit."""
    return stat.S_IMODE(mode) | (directory.mode & stat.S_ISGID)


def special_mode(mode: int, rdev: int) -> int:
    """The mode of a special file mknod(2) asks for; OSError for what cannot be one."""
    if stat.S_ISCHR(mode) and rdev == 0:
        raise fail(errno.EPERM)  # the whiteout's own form, refused as overlayfs does
    if not any(test(mode) for test in (stat.S_ISFIFO, stat.S_ISSOCK, stat.S_ISCHR, stat.S_ISBLK)):
        raise fail(errno.EINVAL)
    return stat.S_IFMT(mode) | stat.S_IMODE(mode)


def changed(
    override: Owned, now_ns: int, default: tuple[int, int], *, mode: int | None = None,
    mtime_ns: int | None = None, atime_ns: int | None = None, uid: int | None = None,
    gid: int | None = None,
) -> Owned:  # fmt: skip
    """`override` after a setattr of the given fields (None: left as it is)."""
    changes: dict[str, Any] = {"ctime_ns": now_ns}
    if mode is not None and not isinstance(override, Symlink):  # a link has no mode
        kind = stat.S_IFMT(override.mode) if isinstance(override, Special) else 0
        changes["mode"] = kind | stat.S_IMODE(mode)
    if mtime_ns is not None:
        changes["mtime_ns"] = mtime_ns
        changes["atime_ns"] = _atime(override)
    if atime_ns is not None:
        changes["atime_ns"] = atime_ns
    if uid is not None:
        changes["uid"] = _recorded(uid, default[0])
    if gid is not None:
        changes["gid"] = _recorded(gid, default[1])
    return replace(override, **changes)


def written(override: File, now_ns: int) -> File:
    """`override` after a write or a truncation: new mtime and ctime, the same atime."""
    return replace(override, mtime_ns=now_ns, ctime_ns=now_ns, atime_ns=_atime(override))


def relinked(override: Owned, now_ns: int) -> Owned:
    """`override` after it gained or lost a name (link, unlink, rename): a new ctime."""
    return replace(override, ctime_ns=now_ns)


def _atime(override: Owned) -> int:
    return override.mtime_ns if override.atime_ns is None else override.atime_ns


def _recorded(value: int, default: int) -> int | None:
    return None if value == default else value
