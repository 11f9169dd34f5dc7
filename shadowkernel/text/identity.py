"""Values computed from bytes objects, kept by the objects' identity: no hashing of megabytes
to find them again (a version's bytes are immutable and shared, so identity is the key)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

V = TypeVar("V")


class IdentityCache(Generic[V]):
    """Values computed from some bytes objects, keyed by their identity (no hashing of
    megabytes per lint), least recently used first out. An entry holds its objects, so their
    ids cannot be reused while it lives. Thread-safe."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple[int, ...], tuple[tuple[bytes, ...], V]] = OrderedDict()

    def get(self, of: tuple[bytes, ...], make: Callable[[], V]) -> V:
        key = tuple(map(id, of))
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key][1]
        value = make()  # outside the lock: two threads may both compute it, same answer
        with self._lock:
            self._entries[key] = (of, value)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)
        return value

    def cached(self, of: tuple[bytes, ...]) -> V | None:
        with self._lock:
            entry = self._entries.get(tuple(map(id, of)))
        return None if entry is None else entry[1]

    def __len__(self) -> int:
        return len(self._entries)
