"""The base-lint cache: what each touched file's base version lints as, for the `new` column.

Keyed by (servers asked, path, digest of the base content), so branches forked from the same
files share one answer and a file the user edits gets a fresh one. Caveat: a lint a base file
has only because of *another* file's content is attributed as if that file had its base
content too.

The other half of the `new` column, how each staged file's lines map to its base, is kept
with each version (`staging.Files.line_map`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable, Sequence

from ..lsp import Lint
from ..paths import RelPath
from ..text.identity import IdentityCache
from .staging import digest

Key = tuple[str, RelPath, str]


def servers_key(servers: Sequence[str] | None) -> str:
    return ",".join(sorted(servers)) if servers else "*"


def key(servers: str, path: RelPath, base: bytes | None, kept: bool = False) -> Key:
    """The cache key; `kept`: `base` is an object the branch keeps (its recorded base), so
    its digest is remembered by identity instead of hashed again on every lint."""
    if base is None or not kept:
        return (servers, path, digest(base))
    return (servers, path, _DIGESTS.get((base,), lambda: digest(base)))


class BaseLints:
    """Lints of base files, per key; filled by lint requests, never invalidated (keys change).

    A key one lane is linting is *in flight*: another lane needing it serves its own lints
    first and then waits for that answer (`wait`), instead of linting the same base again
    (with several lanes, every lane's first request would). Used on the services' loop only.
    """

    def __init__(self) -> None:
        self._lints: dict[Key, tuple[Lint, ...]] = {}
        self._flying: dict[Key, asyncio.Future[None]] = {}

    def __len__(self) -> int:
        return len(self._lints)

    def missing(self, keys: dict[RelPath, Key]) -> list[RelPath]:
        """The paths whose key is neither cached nor in flight on another lane."""
        return [path for path, k in keys.items() if k not in self._lints and k not in self._flying]

    @contextlib.asynccontextmanager
    async def linting(self, keys: dict[RelPath, Key]) -> AsyncIterator[None]:
        """Mark `keys` in flight while the block lints them (and `store`s the answer);
        waiters wake when it ends, whether it stored them or failed."""
        loop = asyncio.get_running_loop()
        mine = {k: self._flying.setdefault(k, loop.create_future()) for k in keys.values()}
        try:
            yield
        finally:
            for k, future in mine.items():
                if self._flying.get(k) is future:
                    del self._flying[k]
                if not future.done():
                    future.set_result(None)

    async def wait(self, keys: dict[RelPath, Key]) -> None:
        """Until no key of `keys` is in flight (then each is cached, or `missing` again)."""
        while flying := [self._flying[k] for k in keys.values() if k in self._flying]:
            await asyncio.wait(flying)

    def store(self, keys: dict[RelPath, Key], found: Iterable[Lint]) -> None:
        """Record `found` (the lints of the paths in `keys`, in the base snapshot) per path."""
        by_path: dict[RelPath, list[Lint]] = {path: [] for path in keys}
        for lint in found:
            if lint.path in by_path:
                by_path[lint.path].append(lint)
        for path, lints in by_path.items():
            self._lints[keys[path]] = tuple(lints)

    def lints(self, keys: dict[RelPath, Key]) -> list[Lint]:
        return [lint for k in keys.values() for lint in self._lints[k]]


_DIGESTS: IdentityCache[str] = IdentityCache(1024)
