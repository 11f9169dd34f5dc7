"""File content as the tree reads it: a live `Buffer`, an immutable `Blob`, or a lower file.

A spilled blob in use is read through an fd kept open from its activation on, so its
file can go away under us (the kernel's blob cache evicts by unlinking). Once its file is
gone and nothing shown or still open reads it, the next activation closes that fd: held
on, it kept a dropped branch's spill file (a segment: up to 64 MiB) on disk until the
workspace closed. A lower file is
opened per read: reads reach the overlay only past the kernel's page cache, and a fresh
open follows an editor that replaced the user's file.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

from ..paths import RelPath
from .buffer import Buffer
from .lower import Lower
from .store import Blob, File, Override


class Contents:
    def __init__(self, lower: Lower) -> None:
        self.lower = lower
        self._spill_fds: dict[str, int] = {}

    def keep_open(
        self, overrides: Iterable[Override], in_use: Callable[[], Iterable[Override]]
    ) -> None:
        """Hold an fd on every spilled blob among `overrides` (newly shown), and let go of
        those whose file went that no override `in_use` (shown, or open since) reads. The
        files are looked at one fstat each, the overrides walked only when one went."""
        for spill in _spills(overrides):
            if spill not in self._spill_fds:
                self._spill_fds[spill] = os.open(spill, os.O_RDONLY | os.O_CLOEXEC)
        gone = [spill for spill, fd in self._spill_fds.items() if os.fstat(fd).st_nlink == 0]
        if gone:
            used = set(_spills(in_use()))
            for spill in gone:
                if spill not in used:
                    os.close(self._spill_fds.pop(spill))

    def read(self, blob: Blob | Buffer | None, source: RelPath | None, offset: int,
             size: int) -> bytes:  # fmt: skip
        """`size` bytes at `offset` of `blob`, or of the lower file `source` without one."""
        if isinstance(blob, Buffer):
            return blob.read(offset, size)
        if blob is not None:
            return self._read_blob(blob, offset, size)
        assert source is not None
        return self.lower.pread(source, size, offset)

    def whole(self, override: File) -> bytes:
        """All of a file override's bytes (to copy them up into a buffer)."""
        if override.blob is not None:
            return self.read(override.blob, None, 0, override.blob.size)
        assert override.origin is not None
        return self.lower.read(override.origin)

    def _read_blob(self, blob: Blob, offset: int, size: int) -> bytes:
        fd = self._spill_fds.get(blob.spill) if blob.spill else None
        if fd is None:  # in memory (whole or a delta), or a spill file not held open
            return blob.read(offset, size)
        return os.pread(fd, max(0, min(size, blob.size - offset)), blob.at + offset)


def _spills(overrides: Iterable[Override]) -> Iterable[str]:
    for override in overrides:
        blob = override.blob if isinstance(override, File) else None
        if isinstance(blob, Blob) and blob.spill:
            yield blob.spill
