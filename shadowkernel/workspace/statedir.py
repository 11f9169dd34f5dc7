"""Where a folder's branches live on disk, and who may write there.

One state directory per folder, never inside it: by default
`$XDG_STATE_HOME/shadowkernel/NAME-KEY` (else `~/.local/state/...`), KEY a hash of the folder's
real path, so a moved folder starts afresh. `Workspace(..., state=DIR)` chooses DIR itself.

One process at a time: the first workspace to open a state directory holds an exclusive
`flock` on its `lock` file until it closes (or its process dies: the kernel drops the lock),
and a second one, in this process or another, gets a ConflictError naming the holder. Two
writers would each hold a different idea of the same branches in memory; the MCP server of a
kernel (`%shadow mcp`) shares the kernel's workspace instead.

A state directory outlives its folder: `kept` lists them and deletes those whose folder is gone.
"""

from __future__ import annotations

import contextlib
import enum
import fcntl
import hashlib
import os
from collections.abc import Iterator

from .. import userdirs
from ..errors import ConflictError, PathError
from ..paths import is_within


class Default(enum.Enum):
    STATE = "the folder's state directory under $XDG_STATE_HOME/shadowkernel"


DEFAULT = Default.STATE


def state_home() -> str:
    """$XDG_STATE_HOME/shadowkernel, or ~/.local/state/shadowkernel (the XDG default)."""
    return str(userdirs.state_home())


def directory(root: str, state: str | os.PathLike[str] | Default) -> str:
    """The state directory of the folder `root` (a real path): `state` itself, or the default."""
    if state is DEFAULT:
        key = hashlib.sha256(root.encode()).hexdigest()[:16]
        chosen = os.path.join(state_home(), f"{os.path.basename(root) or 'root'}-{key}")
    else:
        chosen = os.fspath(state)
    chosen = os.path.realpath(chosen)
    if is_within(chosen, root):
        raise PathError(f"state directory {chosen} is inside the folder {root}, which "
                        "only accept() writes; choose one outside it, or state=None")  # fmt: skip
    return chosen


def claim(path: str, root: str) -> int:
    """Make the state directory `path` of the folder `root`, take its lock; returns the lock's
    descriptor (closing it releases the lock)."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        fd = os.open(os.path.join(path, "lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as error:
        raise PathError(f"state directory {path}: {error.strerror}; choose another (state=DIR) "
                        "or keep branches in memory only (state=None)") from None  # fmt: skip
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        raise ConflictError(f"the branches of {root} (state directory {path}) are open in "
                            f"{holder}; close that workspace first, share it (%shadow mcp serves "
                            "a kernel's workspace), or open this one with state=None (memory "
                            "only) or another state=DIR") from None  # fmt: skip
    try:
        _own_folder(path, root)
    except BaseException:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def _own_folder(path: str, root: str) -> None:
    """A state directory holds one folder's branches: refuse another folder's."""
    owner = folder_of(path)
    if owner is None:
        with open(os.path.join(path, "folder"), "w", encoding="utf-8") as f:
            f.write(root)
        return
    if owner != root:
        raise PathError(f"state directory {path} holds the branches of {owner}, not of {root}; "
                        "choose another state=DIR")  # fmt: skip


def _holder(fd: int) -> str:
    """Who holds the lock, as its pid file says: 'process 1234 (python -m ...)'."""
    text = os.pread(fd, 64, 0).decode(errors="replace").strip()
    if not text.isdigit():
        return "another process"
    pid = int(text)
    if pid == os.getpid():
        return f"another Workspace of this process ({pid})"
    command = ""
    with contextlib.suppress(OSError), open(f"/proc/{pid}/cmdline", "rb") as f:
        command = " ".join(f.read().replace(b"\0", b" ").decode(errors="replace").split())[:120]
    return f"process {pid} ({command})" if command else f"process {pid}"


def restored_summary(count: int, directory: str | None) -> str:
    """What `%shadow open` and `shadowkernel mcp` say about the branches that came back."""
    if directory is None:
        return "branches: in memory only (state=None)"
    return f"branches: {count} {'branch' if count == 1 else 'branches'} restored from {directory}"


@contextlib.contextmanager
def locked(path: str) -> Iterator[str | None]:
    """Hold the state directory's lock for the block and yield None; or, when a workspace
    holds it, yield who does (its lock is never taken from it)."""
    try:
        fd = os.open(os.path.join(path, "lock"), os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:  # never opened by a workspace: nobody can hold it
        yield None
        return
    except OSError as error:  # not this user's to take: keep it
        yield f"nobody this user can tell ({error.strerror})"
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield _holder(fd)
            return
        yield None
    finally:
        os.close(fd)


def folder_of(path: str) -> str | None:
    """The folder whose branches the state directory `path` keeps (None: no marker)."""
    try:
        with open(os.path.join(path, "folder"), encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        return None
