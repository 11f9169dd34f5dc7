"""The user's folder: the one place shadowkernel reads it directly, and writes it (accept).

Reads are of single files, refusing what a branch cannot stage (symlinks, directories) and any
path whose folder leads out through a symlink. The only write is `write_atomic`, which accept
uses: a temp file in the same folder, then a rename, so an editor never sees half a file;
`check_writes` first looks at every path an accept will write, so a path in the way stops it
before anything is written.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Callable, Iterable, Mapping

from ..errors import PathError, StagingError
from ..overlay.store import process_gone
from ..paths import Protection, RelPath, is_within, parent
from .staging import LINK

DEFAULT_MODE = 0o644
NAME_MAX, PATH_MAX = 255, 4096  # Linux's limits (bytes of a name; of a path, its NUL included)


class Folder:
    """The user's folder at `root` (an absolute, resolved path); `protection` names the paths
    accept must never write (checked here too, the last door before the disk)."""

    def __init__(self, root: str, protection: Protection | None = None) -> None:
        self.root = root
        self.protection = protection or Protection()

    def path(self, path: RelPath) -> str:
        """Absolute path of `path`; PathError if a symlink on the way leads out, or if a name
        in it is longer than the file system allows (no version could ever be accepted)."""
        full = os.path.join(self.root, path)
        _check_lengths(path, full)
        above = os.path.realpath(os.path.dirname(full))
        if not is_within(above, self.root):
            raise PathError(f"path {path!r} leads out of the workspace through a symlink "
                            f"(its folder resolves to {above})")  # fmt: skip
        return full

    def read(self, path: RelPath) -> tuple[bytes | None, int]:
        """(bytes, or None when absent; mode) of a file."""
        full = self.path(path)
        try:
            st = os.lstat(full)
        except (FileNotFoundError, NotADirectoryError):
            return None, DEFAULT_MODE
        if stat.S_ISLNK(st.st_mode):
            raise StagingError(f"{path}: is a symlink in the workspace (to "
                               f"{os.readlink(full)!r}); give the path of the file it points "
                               "to")  # fmt: skip
        if stat.S_ISDIR(st.st_mode):
            raise StagingError(f"{path}: is a folder in the workspace; give the path of a "
                               "file in it")  # fmt: skip
        if not stat.S_ISREG(st.st_mode):
            raise StagingError(f"{path}: is not a regular file (a device, a socket?); give the "
                               "path of a file")  # fmt: skip
        with open(full, "rb") as f:
            return f.read(), stat.S_IMODE(st.st_mode)

    def content(self, path: RelPath) -> bytes | None:
        return self.read(path)[0]

    def entry(self, path: RelPath) -> tuple[bytes | None, int]:
        """Like `read`, but a symlink is (its target, LINK), as branches hold symlinks."""
        full = self.path(path)
        if os.path.islink(full):
            return os.fsencode(os.readlink(full)), LINK
        return self.read(path)

    def file_entry(self, path: RelPath) -> tuple[bytes | None, int]:
        """Like `entry`, but a folder is no file: (None, 0644). What accept compares and
        records, where a branch may have made a folder of a file it deleted."""
        if self.holds_files(path):
            return None, DEFAULT_MODE
        return self.entry(path)

    def is_dir(self, path: RelPath) -> bool:
        return os.path.isdir(os.path.join(self.root, path))

    def is_link(self, path: RelPath) -> bool:
        return os.path.islink(os.path.join(self.root, path))

    def holds_files(self, path: RelPath) -> bool:
        """`path` is a folder itself (not a symlink to one): no file can take its place."""
        return _lstat_mode(os.path.join(self.root, path), stat.S_ISDIR)

    def blocks(self, path: RelPath) -> bool:
        """Something that is not a folder (a file, a link to one, a dangling link) is at
        `path`, where a folder must be for the paths below it."""
        full = os.path.join(self.root, path)
        return os.path.lexists(full) and not os.path.isdir(full)

    def check_writes(self, writes: Mapping[RelPath, bytes | None]) -> None:
        """PathError naming the first path of `writes` (path -> bytes, None: delete) that
        `write_atomic` could not write as the folder is now: a folder where the file goes, a
        file where a folder must be (unless `writes` deletes it first), a folder it may not
        write in. Accept asks before writing anything, so a path in the way stops it whole."""
        for path, data in sorted(writes.items()):
            self.path(path)  # leads out through a symlink: PathError
            if self.holds_files(path):
                raise PathError(f"{path}: is a folder in the user's folder now; a file cannot "
                                "replace it")  # fmt: skip
            above = parent(path)
            while data is not None and above and not self.is_dir(above):
                if self.blocks(above) and writes.get(above, b"") is not None:
                    raise PathError(f"{path}: {above} is a file in the user's folder now, not "
                                    "a folder")  # fmt: skip
                above = parent(above)
            where = os.path.join(self.root, above)
            if self.is_dir(above) and not os.access(where, os.W_OK | os.X_OK):
                raise PathError(f"{path}: the folder {where} is not writable")

    def write_atomic(self, path: RelPath, data: bytes | None, mode: int | None = None) -> None:
        """Replace (None: remove) one file atomically. `mode`: permission bits to set, LINK
        to make a symlink whose target is `data`, None to keep the existing file's mode (a new
        file gets 0644)."""
        why = self.protection.reason(path)
        if why is not None:
            raise PathError(f"accept: {path!r} is protected ({why}); not written")
        full = self.path(path)
        if data is None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(full)
            return
        folder = os.path.dirname(full)
        os.makedirs(folder, exist_ok=True)
        temp = _temp_name(folder, full)
        try:
            if mode == LINK:
                os.symlink(os.fsdecode(data), temp)
            else:
                _write_file(temp, data, _mode(full, mode))
            os.replace(temp, full)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise

    def sweep_temps(self, paths: Iterable[RelPath]) -> None:
        """Remove the temp files an accept killed mid-write (SIGKILL, a crash) left beside
        `paths`: named after the file and the pid of the process writing it, they are removed
        once that process is gone, at the next accept of the file (before it writes: one
        listing per folder) or the next restore."""
        names: dict[str, set[str]] = {}
        for path in paths:
            try:
                folder, name = os.path.split(self.path(path))
            except PathError:  # leads out of the folder: nothing of ours there
                continue
            names.setdefault(folder, set()).add(_stem(name))
        for folder, stems in names.items():
            try:
                entries = os.listdir(folder)
            except OSError:
                continue
            for entry in entries:
                if _stale_temp(entry, stems):
                    with contextlib.suppress(OSError):
                        os.unlink(os.path.join(folder, entry))


def _stale_temp(entry: str, stems: set[str]) -> bool:
    """`entry` is `_temp_name`'s `.STEM.PID.XXXXXXXX.sk` for a STEM of `stems` (`_stem`), of a
    PID that is no process now."""
    parts = entry[1:-3].rsplit(".", 2) if entry.startswith(".") and entry.endswith(".sk") else []
    if len(parts) != 3:
        return False
    name, pid, random = parts
    return name in stems and pid.isdigit() and len(random) == 8 and process_gone(int(pid))


def _stem(name: str) -> str:
    """The part of a file's name its temp file carries: all of it, but what would take the
    temp's name (with a dot, a pid, a dot, 8 letters and `.sk`) past NAME_MAX."""
    return os.fsdecode(os.fsencode(name)[: NAME_MAX - 23])


def _check_lengths(path: RelPath, full: str) -> None:
    """PathError naming `path` when a name in it, or the whole path, is too long to exist."""
    for name in path.split("/"):
        if len(os.fsencode(name)) > NAME_MAX:
            raise PathError(f"path {path!r}: the name {name[:40]!r}... is "
                            f"{len(os.fsencode(name))} bytes, over the {NAME_MAX} bytes a file "
                            "name may have")  # fmt: skip
    if len(os.fsencode(full)) >= PATH_MAX:
        raise PathError(f"path {path[:60]!r}... is {len(os.fsencode(full))} bytes in the "
                        f"workspace, over the {PATH_MAX - 1} bytes a path may have")  # fmt: skip


def _lstat_mode(full: str, test: Callable[[int], bool]) -> bool:
    try:
        return test(os.lstat(full).st_mode)
    except (FileNotFoundError, NotADirectoryError):
        return False


def _temp_name(folder: str, full: str) -> str:
    prefix = f".{_stem(os.path.basename(full))}.{os.getpid()}."  # `sweep_temps` knows the pid
    fd, temp = tempfile.mkstemp(dir=folder, prefix=prefix, suffix=".sk")
    os.close(fd)
    os.unlink(temp)  # the name only: a symlink or the file itself is made there next
    return temp


def _write_file(temp: str, data: bytes, mode: int) -> None:
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        os.fchmod(f.fileno(), mode)


def _mode(full: str, mode: int | None) -> int:
    """The mode asked for, else the existing regular file's, else 0644."""
    if mode is not None:
        return mode
    with contextlib.suppress(FileNotFoundError):
        st = os.lstat(full)
        if stat.S_ISREG(st.st_mode):
            return stat.S_IMODE(st.st_mode)
    return DEFAULT_MODE
