"""Read-only access to the user's folder: the only code of the overlay that touches it.

Every method here reads; none can write, create, rename or change metadata. Keeping the
whole surface in one small class is how invariant 1 stays checkable by eye.
"""

from __future__ import annotations

import os

from ..paths import RelPath

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC


class Lower:
    def __init__(self, root: str) -> None:
        self.root = os.path.realpath(root)
        self._prefix = os.fsencode(self.root) + b"/"

    def path(self, path: RelPath) -> bytes:
        return self._prefix + os.fsencode(path) if path else self._prefix[:-1]

    def lstat(self, path: RelPath) -> os.stat_result | None:
        try:
            return os.lstat(self.path(path))
        except (FileNotFoundError, NotADirectoryError):
            return None

    def listdir(self, path: RelPath) -> list[str]:
        return [os.fsdecode(n) for n in os.listdir(self.path(path))]

    def scan(self, path: RelPath) -> list[tuple[str, os.stat_result]]:
        """Names and lstat results of a directory's entries, each stat relative to the
        directory's fd (no path walk per entry). Entries that vanish meanwhile are skipped."""
        fd = os.open(self.path(path), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            out = []
            with os.scandir(fd) as entries:
                for entry in entries:
                    try:
                        out.append((entry.name, entry.stat(follow_symlinks=False)))
                    except FileNotFoundError:
                        continue
            return out
        finally:
            os.close(fd)

    def open(self, path: RelPath) -> int:
        return os.open(self.path(path), _READ_FLAGS)

    def pread(self, path: RelPath, size: int, offset: int) -> bytes:
        fd = self.open(path)
        try:
            return os.pread(fd, size, offset)
        finally:
            os.close(fd)

    def read(self, path: RelPath) -> bytes:
        fd = self.open(path)
        try:
            chunks = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)

    def readlink(self, path: RelPath) -> bytes:
        return os.readlink(self.path(path))

    def getxattr(self, path: RelPath, name: str) -> bytes:
        return os.getxattr(self.path(path), name, follow_symlinks=False)

    def listxattr(self, path: RelPath) -> list[str]:
        return os.listxattr(self.path(path), follow_symlinks=False)

    def statvfs(self) -> os.statvfs_result:
        return os.statvfs(self.root)
