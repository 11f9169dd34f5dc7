"""A branch's scratch layer: what its runs wrote that no version holds (yet).

Later runs of the branch see the scratch layer over the version's manifest; lints, diff and
accept do not. `Branch.run(..., keep=True)` turns what a run wrote under the project into the
branch's next version instead (a formatter, a codemod, `sed -i`, generated code), less what
the project's .gitignore files and the usual caches exclude; those stay in the scratch layer.
Files (text or binary, with their mode) and symlinks are kept; empty folders and special
files a run made stay in the scratch layer, and so does anything it wrote to version-control
metadata or a protected path (`paths.Protection`). `Scratch.listing` shows what the layer
holds, so nothing a run wrote is invisible.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import pathspec

from ..overlay.store import WHITEOUT, Dir, File, Manifest, Override, Special, Symlink, freeze
from ..paths import RelPath, join, parent
from .staging import LINK

# Never kept as versions: build and tool caches, environments, VCS data.
USUAL_CACHES = (
    ".git/", "__pycache__/", "*.py[cod]", ".pytest_cache/", ".mypy_cache/", ".ruff_cache/",
    ".hypothesis/", ".tox/", ".nox/", ".venv/", "venv/", "*.egg-info/", ".coverage",
    ".coverage.*", "node_modules/", ".ipynb_checkpoints/", ".cache/",
)  # fmt: skip


class Scratch:
    """Path -> override (WHITEOUT where a run deleted what the version shows)."""

    def __init__(self) -> None:
        self.entries: dict[RelPath, Override] = {}

    def absorb(self, written: Mapping[RelPath, Override | None]) -> None:
        for path, override in written.items():
            # None: the run left no override where the manifest it ran on had one, and the user's
            # folder has nothing there; a whiteout keeps it gone over the version's file.
            self.entries[path] = WHITEOUT if override is None else override

    def discard(self, paths: Iterable[RelPath]) -> None:
        for path in paths:
            self.entries.pop(path, None)  # a staged edit wins over what a run wrote

    def over(self, manifest: Manifest) -> Manifest:
        return freeze({**manifest, **self.entries}) if self.entries else manifest

    def clear(self) -> None:
        self.entries.clear()

    def listing(self) -> list[Entry]:
        return [entry(p, o) for p, o in sorted(self.entries.items())]


@dataclass(frozen=True)
class Entry:
    """One path of a branch's scratch layer: what a run left there, that no version holds."""

    path: RelPath
    kind: str  # "file", "symlink", "dir", "special" or "deleted"
    size: int | None  # bytes of a file, or of a symlink's target; None otherwise
    mode: int | None = None  # a file's permission bits


def entry(path: RelPath, override: Override) -> Entry:
    if isinstance(override, File):
        size = override.blob.size if override.blob is not None else None
        return Entry(path, "file", size, override.mode & 0o7777)
    if isinstance(override, Symlink):
        return Entry(path, "symlink", len(override.target))
    if isinstance(override, Dir):
        return Entry(path, "dir", None)
    if isinstance(override, Special):
        return Entry(path, "special", None)
    return Entry(path, "deleted", None)


def ignore_rules(
    read: Callable[[RelPath], bytes | None], paths: Iterable[RelPath]
) -> pathspec.GitIgnoreSpec:
    """The usual caches plus the .gitignore files of the project's root and of every folder
    above `paths` (read at the branch's version), patterns made relative to the root."""
    lines = list(USUAL_CACHES)
    folders = {RelPath("")}
    for path in paths:
        while path:
            path = parent(path)
            folders.add(path)
    for folder in sorted(folders):
        data = read(join(folder, ".gitignore"))
        if data is not None:
            lines += _rooted(folder, data.decode("utf-8", errors="replace").splitlines())
    return pathspec.GitIgnoreSpec.from_lines(lines)


def _rooted(folder: RelPath, patterns: list[str]) -> list[str]:
    """A nested .gitignore's patterns, rewritten to match from the project's root."""
    if not folder:
        return patterns
    out = []
    for pattern in patterns:
        stripped = pattern.strip()
        if not stripped or stripped.startswith("#"):
            continue
        negate, body = ("!", stripped[1:]) if stripped.startswith("!") else ("", stripped)
        anchored = "/" in body.rstrip("/")
        body = body.lstrip("/")
        out.append(f"{negate}/{folder}/{body}" if anchored else f"{negate}/{folder}/**/{body}")
    return out


def kept(
    written: Mapping[RelPath, Override | None],
    ignored: pathspec.GitIgnoreSpec,
    content: Callable[[File], bytes],
) -> tuple[dict[RelPath, bytes | None], dict[RelPath, int]]:
    """What of a run's writes becomes the next version: files (with their modes), symlinks
    (mode LINK, their target as bytes) and deletions, unignored."""
    out: dict[RelPath, bytes | None] = {}
    modes: dict[RelPath, int] = {}
    for path, override in sorted(written.items()):
        if isinstance(override, (Dir, Special)) or ignored.match_file(path):
            continue
        if override is None or override is WHITEOUT:
            out[path] = None
        elif isinstance(override, Symlink):
            out[path], modes[path] = override.target, LINK
        elif isinstance(override, File):
            out[path], modes[path] = content(override), override.mode & 0o777
    return out, modes
