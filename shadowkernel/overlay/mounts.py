"""Finding and detaching shadow mounts, including dead ones left by a crashed run."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess

from ..paths import is_within

FSNAME = "shadowkernel"


def shadow_mounts() -> list[str]:
    """Mount points of every shadowkernel FUSE mount visible to this process."""
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            dash = fields.index("-")
            fstype, source = fields[dash + 1], fields[dash + 2]
            if fstype == f"fuse.{FSNAME}" or (fstype.startswith("fuse") and source == FSNAME):
                found.append(_unescape(fields[4]))
    return found


def filesystem_type(path: str) -> str:
    """The type of the file system that holds `path` ("ext4", "tmpfs", ...): the innermost
    mount of /proc/self/mountinfo at or above it, the last one mounted there winning; "" when
    /proc cannot tell."""
    target, found, depth = os.path.realpath(path), "", -1
    try:
        with open("/proc/self/mountinfo") as f:
            lines = f.read().splitlines()
    except OSError:
        return ""
    for fields in map(str.split, lines):
        point = _unescape(fields[4])
        if is_within(target, point) and len(point) >= depth:
            found, depth = fields[fields.index("-") + 1], len(point)
    return found


def is_stale(mountpoint: str) -> bool:
    """A mount whose overlay process is gone answers ENOTCONN ("transport endpoint")."""
    try:
        os.stat(mountpoint)
    except OSError as exc:
        return exc.errno in (errno.ENOTCONN, errno.ECONNABORTED)
    return False


def clear_stale() -> list[str]:
    """Detach dead shadow mounts of earlier runs; returns their mount points."""
    stale = [m for m in shadow_mounts() if is_stale(m)]
    for mountpoint in stale:
        detach(mountpoint)
    return stale


def detach(mountpoint: str) -> None:
    """Lazily unmount `mountpoint` if it is still mounted (no error if it is not)."""
    if mountpoint not in shadow_mounts():
        return
    tool = shutil.which("fusermount3") or shutil.which("fusermount")
    command = [tool, "-u", "-z", mountpoint] if tool else ["umount", "-l", mountpoint]
    subprocess.run(command, check=False, capture_output=True)


def _unescape(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as octal.
    return field.encode().decode("unicode_escape").encode("latin-1").decode()
