"""Mutable file content for files programs write through the mount.

A `Buffer` starts in memory and moves to a private spill file once it is large or the
process is over its memory budget, so a 100 MB write costs disk, not RAM. Sizes are sparse as
on a local filesystem: what lies past the bytes written is a hole that reads as zeros and
costs nothing (in memory only the bytes up to the last write are held; a spill file keeps its
holes, and `freeze()` copies only its data), so `truncate -s 2G` allocates nothing.
`freeze()` turns the buffer into an immutable `Blob` for the branch's next version.
"""

from __future__ import annotations

import contextlib
import errno
import os

from .store import Blob, BlobStore

SPILL_AT = 8 * 2**20  # one file larger than this always lives on disk
PAD_AT = 2**16  # a hole longer than this is kept a hole when frozen (spilled, not padded)


class Buffer:
    def __init__(self, store: BlobStore, data: bytes = b"") -> None:
        self.store = store
        self.memory: bytearray | None = bytearray(data)  # the bytes up to the last written one
        self.fd: int | None = None
        self.path: str | None = None
        self.size = len(data)  # what programs see; past len(memory) it reads as zeros
        store.account(self.size)
        if self.size > SPILL_AT:
            self._spill()

    def read(self, offset: int, size: int) -> bytes:
        size = max(0, min(size, self.size - offset))
        if self.memory is None:
            assert self.fd is not None
            return os.pread(self.fd, size, offset)
        held = bytes(self.memory[offset : offset + size])
        return held + bytes(size - len(held))  # the hole past the written bytes

    def write(self, offset: int, data: bytes) -> int:
        end = offset + len(data)
        held = len(self.memory) if self.memory is not None else 0
        if self.memory is not None and (end > SPILL_AT or self._over_budget(end - held)):
            self._spill()
        if self.memory is not None:
            before = len(self.memory)
            if offset > before:
                self.memory.extend(bytes(offset - before))  # a sparse write reads zeros
            self.memory[offset:end] = data
            self.store.account(len(self.memory) - before)
        else:
            assert self.fd is not None
            os.pwrite(self.fd, data, offset)
        self.size = max(self.size, end)
        return len(data)

    def truncate(self, size: int) -> None:
        if self.memory is None:
            assert self.fd is not None
            os.ftruncate(self.fd, size)
        elif size < len(self.memory):
            self.store.account(size - len(self.memory))
            del self.memory[size:]
        self.size = size  # growing only moves the end of the hole

    def freeze(self) -> Blob:
        if self.memory is not None and self.size - len(self.memory) <= PAD_AT:
            return self.store.make(bytes(self.memory) + bytes(self.size - len(self.memory)))
        if self.memory is not None:
            self._spill()
        assert self.fd is not None
        copy = self.store.spill_path()
        copy_sparse(self.fd, copy, self.size)
        return self.store.adopt(copy, self.size)

    @property
    def spilled(self) -> bool:
        return self.memory is None

    def _over_budget(self, growth: int) -> bool:
        return self.store.in_memory + growth > self.store.memory_budget

    def _spill(self) -> None:
        assert self.memory is not None
        self.path = self.store.spill_path()
        self.fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
        os.pwrite(self.fd, self.memory, 0)
        os.ftruncate(self.fd, self.size)  # the hole stays a hole on disk
        self.store.account(-len(self.memory))
        self.memory = None

    def __del__(self) -> None:
        if self.memory is not None:
            self.store.account(-len(self.memory))
        if self.fd is not None:
            os.close(self.fd)
        if self.path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.path)


def copy_sparse(source: int, target: str, size: int) -> None:
    """Copy the data extents of the open file `source` to a new file `target` of `size` bytes,
    leaving its holes holes (SEEK_DATA/SEEK_HOLE), so a sparse file copies in O(data)."""
    fd = os.open(target, os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC)
    try:
        offset = 0
        while offset < size:
            try:
                start = os.lseek(source, offset, os.SEEK_DATA)
            except OSError as error:
                if error.errno != errno.ENXIO:  # ENXIO: no data past offset
                    raise
                break
            end = min(os.lseek(source, start, os.SEEK_HOLE), size)
            while start < end:
                start += os.copy_file_range(source, fd, end - start, start, start) or end - start
            offset = end
        os.ftruncate(fd, size)
    finally:
        os.close(fd)
