"""The control channel between the kernel and the overlay process.

Length-prefixed pickles over a Unix socket pair: both ends are our own processes, started
together, so pickle's trust model holds. Requests are `(verb, *args)`; replies are
`("ok", value)` or `("error", message)`.

A switch sends only what differs from the manifest the overlay shows (path -> override,
None: no override), so its cost follows the changed paths, not the manifest's size. Blobs
cross once: the sender remembers which blob ids the overlay holds and sends those as
stubs (id and size only); the overlay resolves stubs from its cache and reports evictions.
"""

from __future__ import annotations

import pickle
import socket
import struct
from collections.abc import Mapping
from typing import Any

from ..paths import RelPath
from .store import Blob, File, Override, with_blob

HEADER = struct.Struct("!Q")


def encode(message: Any) -> bytes:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(data)) + data


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise EOFError("the overlay control channel closed")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def receive(sock: socket.socket) -> Any:
    (size,) = HEADER.unpack(recv_exactly(sock, HEADER.size))
    return pickle.loads(recv_exactly(sock, size))


def is_stub(blob: Blob) -> bool:
    return not blob.in_memory and blob.spill is None


def memory_sent(changes: Mapping[RelPath, Override | None]) -> int:
    """Bytes of in-memory blobs that `changes` carries whole (not as stubs)."""
    return sum(
        o.blob.size for o in changes.values()
        if isinstance(o, File) and o.blob is not None and o.blob.data is not None
    )  # fmt: skip


def stubbed(
    manifest: Mapping[RelPath, Override | None], known: set[str]
) -> dict[RelPath, Override | None]:
    """The manifest with blobs the overlay already holds reduced to stubs; marks the rest known."""
    out: dict[RelPath, Override | None] = {}
    for path, override in manifest.items():
        if isinstance(override, File) and override.blob is not None:
            blob = override.blob
            if blob.id in known:  # a stub
                override = with_blob(override, Blob(blob.id, blob.size))
            else:
                known.add(blob.id)
        out[path] = override
    return out


def resolved(
    manifest: Mapping[RelPath, Override | None], cache: dict[str, Blob]
) -> dict[RelPath, Override | None]:
    """Stubs replaced by cached blobs; new blobs enter the cache. KeyError for an unknown stub."""
    out: dict[RelPath, Override | None] = {}
    for path, override in manifest.items():
        if isinstance(override, File) and override.blob is not None:
            blob = override.blob
            if is_stub(blob):
                override = with_blob(override, cache[blob.id])
            else:
                cache[blob.id] = blob
        out[path] = override
    return out


def evict(cache: dict[str, Blob], manifest: Mapping[RelPath, Override], budget: int) -> list[str]:
    """Drop cached in-memory blobs the manifest does not use while the cache exceeds `budget`."""
    used = {o.blob.id for o in manifest.values() if isinstance(o, File) and o.blob is not None}
    total = sum(b.size for b in cache.values() if b.data is not None)
    evicted = []
    for blob_id, blob in list(cache.items()):
        if total <= budget:
            break
        if blob_id not in used:
            del cache[blob_id]
            evicted.append(blob_id)
            total -= blob.size if blob.data is not None else 0
    return evicted
