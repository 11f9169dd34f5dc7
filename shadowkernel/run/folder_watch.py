"""Whether names changed in the user's folder: a fanotify filesystem mark (root), else
inotify on every directory of the folder (`TreeWatch`, other users).

Kept overlayfs views need this: overlayfs does not revalidate what it cached against its
lower layer, so after the user replaces a file (an editor's save: write a temporary file,
rename it over) a view that had looked the file up keeps showing the old one, and a name it
had found missing stays missing. Changes of bytes in place need no notice (a lower file is
read through to the same inode); only directory entries matter: create, delete, rename.

The mark covers the whole filesystem, so every event names its directory by a file handle,
resolved to a path (memoised) to tell whether it lies inside the folder. A directory deleted
before its handle is resolved lay outside: one deleted inside left an event in a directory
that still exists. A full queue counts as a change.

Normal users cannot place a filesystem mark, so `TreeWatch` walks the folder once and
watches each directory with inotify (new directories are watched as they appear); a folder
with more directories than the user's `fs.inotify.max_user_watches` left cannot be watched
(OSError), and then no view is kept. Caveat: the walk costs about a millisecond per thousand
directories, once per Shadow.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import struct

from inotify_simple import INotify, flags

from ..paths import is_within

FAN_CLOEXEC, FAN_NONBLOCK, FAN_REPORT_DIR_FID = 0x1, 0x2, 0x400
FAN_MARK_ADD, FAN_MARK_FILESYSTEM = 0x1, 0x100
FAN_MOVED_FROM, FAN_MOVED_TO, FAN_CREATE, FAN_DELETE = 0x40, 0x80, 0x100, 0x200
FAN_Q_OVERFLOW, FAN_ONDIR = 0x4000, 0x40000000
DIRENT_EVENTS = FAN_MOVED_FROM | FAN_MOVED_TO | FAN_CREATE | FAN_DELETE | FAN_ONDIR
FAN_EVENT_INFO_TYPE_DFID = 3
AT_FDCWD = -100
METADATA = struct.Struct("=IBBHQii")  # event_len, vers, reserved, metadata_len, mask, fd, pid
INFO = struct.Struct("=BBH8x")  # info_type, pad, len, fsid; a struct file_handle follows
MEMO_LIMIT = 100_000

_libc = ctypes.CDLL(None, use_errno=True)
_libc.fanotify_mark.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_uint64, ctypes.c_int,
                                ctypes.c_char_p]  # fmt: skip


class FolderWatch:
    """Raises OSError if the machine cannot watch `folder` (not root, old kernel, a filesystem
    without an fsid)."""

    def __init__(self, folder: str) -> None:
        self.folder = folder.rstrip("/")
        fd = _libc.fanotify_init(FAN_CLOEXEC | FAN_NONBLOCK | FAN_REPORT_DIR_FID, os.O_RDONLY)
        if fd < 0:
            raise _error("fanotify_init")
        self.fd = fd
        self.anchor = -1
        try:
            if _libc.fanotify_mark(fd, FAN_MARK_ADD | FAN_MARK_FILESYSTEM, DIRENT_EVENTS,
                                   AT_FDCWD, os.fsencode(folder)) < 0:  # fmt: skip
                raise _error("fanotify_mark")
            self.anchor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)  # for open_by_handle_at
        except BaseException:
            self.close()
            raise
        self.inside: dict[bytes, bool] = {}  # directory handle -> lies in the folder

    def changed(self) -> bool:
        """Whether a name changed in the folder since the last call (drains the queue)."""
        found = False
        while chunk := self._read():
            for mask, handle in _events(chunk):
                found = found or bool(mask & FAN_Q_OVERFLOW) or self._in_folder(handle)
        if found or len(self.inside) > MEMO_LIMIT:
            self.inside.clear()  # a directory moved in since was memoised as outside
        return found

    def close(self) -> None:
        for fd in (self.fd, self.anchor):
            if fd >= 0:
                os.close(fd)
        self.fd = self.anchor = -1

    def _read(self) -> bytes:
        try:
            return os.read(self.fd, 1 << 16)
        except BlockingIOError:
            return b""

    def _in_folder(self, handle: bytes | None) -> bool:
        if handle is None:
            return False
        if handle not in self.inside:
            self.inside[handle] = self._resolve(handle)
        return self.inside[handle]

    def _resolve(self, handle: bytes) -> bool:
        fd = _libc.open_by_handle_at(self.anchor, handle, os.O_PATH)
        if fd < 0:
            return False  # gone: see the module's docstring
        try:
            path = os.readlink(f"/proc/self/fd/{fd}")
        finally:
            os.close(fd)
        return is_within(path, self.folder)


LISTING = flags.CREATE | flags.DELETE | flags.MOVED_FROM | flags.MOVED_TO
TREE_MASK = LISTING | flags.ONLYDIR | flags.DONT_FOLLOW


class TreeWatch:
    """inotify on each directory of `folder`; raises OSError if one cannot be watched."""

    def __init__(self, folder: str) -> None:
        self.inotify = INotify(nonblocking=True)
        self.paths: dict[int, str] = {}  # watch descriptor -> directory
        try:
            self._watch_tree(folder)
        except BaseException:
            self.close()
            raise

    def changed(self) -> bool:
        """Whether a name changed in the folder since the last call (drains the queue)."""
        found = False
        for event in self.inotify.read(timeout=0):
            found = found or bool(event.mask & (LISTING | flags.Q_OVERFLOW))
            if event.mask & flags.ISDIR and event.mask & (flags.CREATE | flags.MOVED_TO):
                with contextlib.suppress(OSError):  # gone again, or the limit: changed anyway
                    self._watch_tree(os.path.join(self.paths[event.wd], event.name))
        return found

    def close(self) -> None:
        self.inotify.close()

    def _watch_tree(self, top: str) -> None:
        for directory, _, _ in os.walk(top, onerror=_raise):
            self.paths[self.inotify.add_watch(directory, TREE_MASK)] = directory


def watch_folder(folder: str) -> FolderWatch | TreeWatch:
    """A watch of `folder`'s names: a fanotify mark where allowed (root), else a TreeWatch."""
    try:
        return FolderWatch(folder)
    except PermissionError:
        return TreeWatch(folder)


def _raise(error: OSError) -> None:
    raise error


def _events(chunk: bytes):
    """(mask, directory handle or None) for each event in a read from the fanotify fd."""
    offset = 0
    while offset + METADATA.size <= len(chunk):
        length, _, _, meta_len, mask, fd, _ = METADATA.unpack_from(chunk, offset)
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)
        handle = None
        info = offset + meta_len
        if info + INFO.size <= offset + length:
            kind, _, info_len = INFO.unpack_from(chunk, info)
            if kind == FAN_EVENT_INFO_TYPE_DFID:
                handle = chunk[info + INFO.size : info + info_len]  # struct file_handle
        yield mask, handle
        offset += length


def _error(call: str) -> OSError:
    code = ctypes.get_errno() or errno.EINVAL
    return OSError(code, f"{call}: {os.strerror(code)}")
