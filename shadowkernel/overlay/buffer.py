"""Mutable file content for files programs write through the mount.

A `Buffer` starts in memory and moves to a private spill file once it is large or the
process is over its memory budget, so a 100 MB write costs disk, not RAM. `freeze()`
turns it into an immutable `Blob` for the branch's next version.
"""

from __future__ import annotations

import contextlib
import os
import shutil

from .store import Blob, BlobStore

SPILL_AT = 8 * 2**20  # one file larger than this always lives on disk


class Buffer:
    def __init__(self, store: BlobStore, data: bytes = b"") -> None:
        self.store = store
        self.memory: bytearray | None = bytearray(data)
        self.fd: int | None = None
        self.path: str | None = None
        self.size = len(data)
        store.account(self.size)
        if self.size > SPILL_AT:
            self._spill()

    def read(self, offset: int, size: int) -> bytes:
        size = max(0, min(size, self.size - offset))
        if self.memory is not None:
            return bytes(self.memory[offset : offset + size])
        assert self.fd is not None
        return os.pread(self.fd, size, offset)

    def write(self, offset: int, data: bytes) -> int:
        end = offset + len(data)
        if self.memory is not None and (end > SPILL_AT or self._over_budget(end - self.size)):
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
        if self.memory is not None:
            before = len(self.memory)
            if size <= before:
                del self.memory[size:]
            else:
                self.memory.extend(bytes(size - before))
            self.store.account(size - before)
        else:
            assert self.fd is not None
            os.ftruncate(self.fd, size)
        self.size = size

    def freeze(self) -> Blob:
        if self.memory is not None:
            return self.store.make(bytes(self.memory))
        assert self.path is not None
        copy = self.store.spill_path()
        shutil.copyfile(self.path, copy)
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
