"""The user's folder: the one place shadowkernel reads it directly, and writes it (accept).

Reads are of single files, refusing what a branch cannot stage (symlinks, directories) and any
path whose folder leads out through a symlink. The only write is `write_atomic`, which accept
uses: a temp file in the same folder, then a rename, so an editor never sees half a file.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile

from ..errors import PathError, StagingError
from ..paths import RelPath, is_within

DEFAULT_MODE = 0o644


class Folder:
    """The user's folder at `root` (an absolute, resolved path)."""

    def __init__(self, root: str) -> None:
        self.root = root

    def path(self, path: RelPath) -> str:
        """Absolute path of `path`; PathError if a symlink on the way leads out."""
        full = os.path.join(self.root, path)
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
            raise StagingError(f"{path}: is a symlink in the workspace; stage the file it points "
                               "to instead")  # fmt: skip
        if not stat.S_ISREG(st.st_mode):
            raise StagingError(f"{path}: is not a regular file (a directory?); stage files")
        with open(full, "rb") as f:
            return f.read(), stat.S_IMODE(st.st_mode)

    def content(self, path: RelPath) -> bytes | None:
        return self.read(path)[0]

    def is_dir(self, path: RelPath) -> bool:
        return os.path.isdir(os.path.join(self.root, path))

    def write_atomic(self, path: RelPath, data: bytes | None, mode: int) -> None:
        """Replace (None: remove) one file; an existing file keeps the user's mode."""
        full = self.path(path)
        if data is None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(full)
            return
        folder = os.path.dirname(full)
        os.makedirs(folder, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            mode = stat.S_IMODE(os.lstat(full).st_mode)
        fd, temp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(full)}.", suffix=".sk")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                os.fchmod(f.fileno(), mode)
            os.replace(temp, full)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
