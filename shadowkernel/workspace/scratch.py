"""A branch's scratch layer: what its runs wrote that no version holds (yet).

Later runs of the branch see the scratch layer over the version's manifest; lints, diff and
accept do not. `Branch.run(..., keep=True)` turns what a run wrote under the project into the
branch's next version instead (a formatter, a codemod, `sed -i`, generated code), less what
the project's .gitignore files and the usual caches exclude; those stay in the scratch layer.
Only text files are kept as versions (a version holds text the servers can open); binary
files, symlinks and empty folders a run made stay in the scratch layer too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping

import pathspec

from ..errors import StagingError
from ..overlay.store import WHITEOUT, Dir, File, Manifest, Override, Symlink, freeze
from ..paths import RelPath, join, parent
from ..text.content import decode

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
) -> dict[RelPath, bytes | None]:
    """What of a run's writes becomes the next version: text files and deletions, unignored."""
    out: dict[RelPath, bytes | None] = {}
    for path, override in sorted(written.items()):
        if isinstance(override, (Dir, Symlink)) or ignored.match_file(path):
            continue
        if override is None or override is WHITEOUT:
            out[path] = None
            continue
        assert isinstance(override, File)
        data = content(override)
        with contextlib.suppress(StagingError):
            decode(data, path)
            out[path] = data
    return out
