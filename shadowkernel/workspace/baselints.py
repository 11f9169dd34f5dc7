"""The base-lint cache: what each touched file's base version lints as, for the `new` column.

Keyed by (servers asked, path, digest of the base content), so branches forked from the same
files share one answer and a file the user edits gets a fresh one. Caveat: a lint a base file
has only because of *another* file's content is attributed as if that file had its base
content too.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..lsp import Lint
from ..paths import RelPath
from .staging import digest

Key = tuple[str, RelPath, str]


def servers_key(servers: Sequence[str] | None) -> str:
    return ",".join(sorted(servers)) if servers else "*"


def key(servers: str, path: RelPath, base: bytes | None) -> Key:
    return (servers, path, digest(base))


class BaseLints:
    """Lints of base files, per key; filled by lint requests, never invalidated (keys change)."""

    def __init__(self) -> None:
        self._lints: dict[Key, tuple[Lint, ...]] = {}

    def __len__(self) -> int:
        return len(self._lints)

    def missing(self, keys: dict[RelPath, Key]) -> list[RelPath]:
        return [path for path, k in keys.items() if k not in self._lints]

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
