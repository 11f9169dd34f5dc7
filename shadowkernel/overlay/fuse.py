"""The pyfuse3 adapter: every handler decodes, calls `Tree`, encodes.

One error contract, as in pyfuse3's examples: handlers raise only `FUSEError(errno)`.
Anything else would take the whole mount down ("Transport endpoint is not connected"),
so an unexpected exception is logged and answered with EIO instead.

File handles are inode numbers. With the patched pyfuse3 (`NO_OPEN_SUPPORT`, built by
`shadowkernel setup-fuse`, see fastpath.py) `open` and `opendir` answer ENOSYS: the kernel
then opens files and directories without asking us, keeps their pages and listings cached
(FOPEN_KEEP_CACHE, FOPEN_CACHE_DIR) and sends fh 0, for which the patch passes the inode. A
warm read then costs no round trip (about 150 us each here): measured full-tree read 15x ->
1.2x native, find 30x -> 0.9x. Truncation by O_TRUNC then arrives as a setattr (atomic
O_TRUNC is turned off, since no open reaches us). Stock pyfuse3 works too, one open and one
release per file slower.

Permission checks are the kernel's (`default_permissions`): chown, chmod, utimensat and
every access arrive here only when allowed, and entries a process makes belong to its
uid and gid (`ctx`). The mount stays nosuid and nodev (libfuse's defaults): device nodes
can be made and listed, not opened.
"""

from __future__ import annotations

import errno
import functools
import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import pyfuse3

from ..errors import ShadowError
from .tree import Stat, Tree

log = logging.getLogger(__name__)

# Long timeouts make cached lookups nearly free; a switch invalidates exactly what differs.
CACHE_SECONDS = 300.0
NEGATIVE_SECONDS = 30.0

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


def _errors_as_fuse(handler: F) -> F:
    @functools.wraps(handler)
    async def wrapper(*args: Any) -> Any:
        try:
            return await handler(*args)
        except pyfuse3.FUSEError:
            raise
        except OSError as exc:
            raise pyfuse3.FUSEError(exc.errno or errno.EIO) from None
        except ShadowError as exc:  # the family's errno: a PathError is EINVAL, NotFound ENOENT
            raise pyfuse3.FUSEError(exc.errno) from None
        except Exception:
            log.exception("overlay: %s failed", handler.__name__)
            raise pyfuse3.FUSEError(errno.EIO) from None

    return wrapper  # type: ignore[return-value]


def _entry(ino: int, st: Stat) -> pyfuse3.EntryAttributes:
    attr = pyfuse3.EntryAttributes()
    attr.st_ino = ino
    attr.st_mode = st.mode
    attr.st_nlink = st.nlink
    attr.st_uid = st.uid
    attr.st_gid = st.gid
    attr.st_rdev = st.rdev
    attr.st_size = st.size
    attr.st_blksize = 4096
    attr.st_blocks = (st.size + 511) // 512
    attr.st_atime_ns = st.atime_ns
    attr.st_mtime_ns = st.mtime_ns
    attr.st_ctime_ns = st.ctime_ns
    attr.entry_timeout = CACHE_SECONDS
    attr.attr_timeout = CACHE_SECONDS
    return attr


def _missing() -> pyfuse3.EntryAttributes:
    """A negative entry: the kernel remembers the miss (imports probe many absent names).
    Shorter than CACHE_SECONDS so a file the user creates meanwhile shows up soon; a
    switch that makes the name appear invalidates it at once."""
    attr = pyfuse3.EntryAttributes()
    attr.st_ino = 0
    attr.entry_timeout = NEGATIVE_SECONDS
    return attr


def _name(raw: bytes) -> str:
    return os.fsdecode(raw)


def _caller(ctx: Any) -> tuple[int, int] | None:
    """(uid, gid) of the process that asks, which owns what it makes."""
    return None if ctx is None else (ctx.uid, ctx.gid)


class ShadowOperations(pyfuse3.Operations):
    supports_dot_lookup = True
    enable_writeback_cache = False
    enable_acl = False

    def __init__(self, tree: Tree, no_open: bool | None = None) -> None:
        super().__init__()
        self.tree = tree
        self.no_open = hasattr(pyfuse3, "NO_OPEN_SUPPORT") if no_open is None else no_open
        self.disable_atomic_o_trunc = self.no_open  # read by the patched pyfuse3 at init

    @_errors_as_fuse
    async def lookup(
        self, parent_inode: int, name: bytes, ctx: Any = None
    ) -> pyfuse3.EntryAttributes:
        try:
            return _entry(*self.tree.lookup(parent_inode, _name(name)))
        except FileNotFoundError:
            return _missing()

    async def forget(self, inode_list: Sequence[tuple[int, int]]) -> None:
        for ino, count in inode_list:
            self.tree.forget(ino, count)

    @_errors_as_fuse
    async def getattr(self, inode: int, ctx: Any = None) -> pyfuse3.EntryAttributes:
        return _entry(inode, self.tree.getattr(inode))

    @_errors_as_fuse
    async def setattr(self, inode: int, attr: pyfuse3.EntryAttributes,
                      fields: pyfuse3.SetattrFields, fh: int | None,
                      ctx: Any) -> pyfuse3.EntryAttributes:  # fmt: skip
        # default_permissions: the kernel checked that the caller may change these.
        st = self.tree.setattr(
            inode,
            size=attr.st_size if fields.update_size else None,
            mode=attr.st_mode if fields.update_mode else None,
            mtime_ns=attr.st_mtime_ns if fields.update_mtime else None,
            atime_ns=attr.st_atime_ns if fields.update_atime else None,
            uid=attr.st_uid if fields.update_uid else None,
            gid=attr.st_gid if fields.update_gid else None,
        )
        return _entry(inode, st)

    @_errors_as_fuse
    async def readlink(self, inode: int, ctx: Any) -> bytes:
        return self.tree.readlink(inode)

    async def opendir(self, inode: int, ctx: Any) -> int:
        if self.no_open:
            raise pyfuse3.FUSEError(errno.ENOSYS)  # from now on the kernel does not ask
        return inode

    @_errors_as_fuse
    async def readdir(self, fh: int, start_id: int, token: pyfuse3.ReaddirToken) -> None:
        for offset, name, ino, st in self.tree.readdir(fh, start_id):
            if not pyfuse3.readdir_reply(token, os.fsencode(name), _entry(ino, st), offset):
                return
            if name not in (".", ".."):  # readdirplus takes no reference for these
                self.tree.counted(ino)

    async def releasedir(self, fh: int) -> None:
        return None

    @_errors_as_fuse
    async def mkdir(
        self, parent_inode: int, name: bytes, mode: int, ctx: Any
    ) -> pyfuse3.EntryAttributes:
        return _entry(*self.tree.mkdir(parent_inode, _name(name), mode, _caller(ctx)))

    @_errors_as_fuse
    async def rmdir(self, parent_inode: int, name: bytes, ctx: Any) -> None:
        self.tree.rmdir(parent_inode, _name(name))

    @_errors_as_fuse
    async def unlink(self, parent_inode: int, name: bytes, ctx: Any) -> None:
        self.tree.unlink(parent_inode, _name(name))

    @_errors_as_fuse
    async def symlink(
        self, parent_inode: int, name: bytes, target: bytes, ctx: Any
    ) -> pyfuse3.EntryAttributes:
        return _entry(*self.tree.symlink(parent_inode, _name(name), target, _caller(ctx)))

    @_errors_as_fuse
    async def rename(self, parent_inode_old: int, name_old: bytes, parent_inode_new: int,
                     name_new: bytes, flags: int, ctx: Any) -> None:  # fmt: skip
        self.tree.rename(
            parent_inode_old, _name(name_old), parent_inode_new, _name(name_new), flags
        )

    @_errors_as_fuse
    async def link(
        self, inode: int, new_parent_inode: int, new_name: bytes, ctx: Any
    ) -> pyfuse3.EntryAttributes:
        return _entry(*self.tree.link(inode, new_parent_inode, _name(new_name)))

    @_errors_as_fuse
    async def mknod(
        self, parent_inode: int, name: bytes, mode: int, rdev: int, ctx: Any
    ) -> pyfuse3.EntryAttributes:
        # The kernel checked CAP_MKNOD for device nodes; FIFOs and sockets anyone may make.
        return _entry(*self.tree.mknod(parent_inode, _name(name), mode, rdev, _caller(ctx)))

    @_errors_as_fuse
    async def open(self, inode: int, flags: int, ctx: Any) -> pyfuse3.FileInfo:
        if self.no_open:
            raise pyfuse3.FUSEError(errno.ENOSYS)  # from now on the kernel does not ask
        # Atomic O_TRUNC is on here: truncation arrives in open, not as a setattr.
        self.tree.open(inode, truncate=bool(flags & os.O_TRUNC))
        return pyfuse3.FileInfo(fh=inode)  # keep_cache: the lower watch invalidates edits

    @_errors_as_fuse
    async def create(self, parent_inode: int, name: bytes, mode: int, flags: int,
                     ctx: Any) -> tuple[pyfuse3.FileInfo, pyfuse3.EntryAttributes]:  # fmt: skip
        ino, st = self.tree.create(parent_inode, _name(name), mode, _caller(ctx))
        return pyfuse3.FileInfo(fh=ino), _entry(ino, st)

    @_errors_as_fuse
    async def read(self, fh: int, off: int, size: int) -> bytes:
        return self.tree.read(fh, off, size)

    @_errors_as_fuse
    async def write(self, fh: int, off: int, buf: bytes) -> int:
        return self.tree.write(fh, off, buf)

    async def flush(self, fh: int) -> None:
        # Nothing to flush: writes land in memory. ENOSYS makes the kernel stop asking,
        # which saves one round trip on every close.
        raise pyfuse3.FUSEError(errno.ENOSYS)

    async def fsync(self, fh: int, datasync: bool) -> None:
        return None

    async def fsyncdir(self, fh: int, datasync: bool) -> None:
        return None

    async def release(self, fh: int) -> None:
        return None  # nothing is held per open (and without open, only created files get here)

    @_errors_as_fuse
    async def statfs(self, ctx: Any) -> pyfuse3.StatvfsData:
        st = self.tree.lower.statvfs()
        data = pyfuse3.StatvfsData()
        for field in ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files",
                      "f_ffree", "f_favail", "f_namemax"):  # fmt: skip
            setattr(data, field, getattr(st, field))
        return data

    @_errors_as_fuse
    async def getxattr(self, inode: int, name: bytes, ctx: Any) -> bytes:
        return self.tree.getxattr(inode, _name(name))

    @_errors_as_fuse
    async def listxattr(self, inode: int, ctx: Any) -> list[bytes]:
        return [os.fsencode(n) for n in self.tree.listxattr(inode)]

    async def setxattr(self, inode: int, name: bytes, value: bytes, ctx: Any) -> None:
        raise pyfuse3.FUSEError(errno.ENOTSUP)  # extended attributes are read-only in a shadow

    async def removexattr(self, inode: int, name: bytes, ctx: Any) -> None:
        raise pyfuse3.FUSEError(errno.ENOTSUP)
