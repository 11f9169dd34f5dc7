"""Paths relative to the workspace root: the one way a file is named inside shadowkernel.

A `RelPath` is a normalised POSIX path without a leading slash, `.` or `..` parts; the
root itself is the empty string. Names are `str`; bytes that are not UTF-8 are kept through
`os.fsdecode` (surrogateescape), so every name the user's folder holds round-trips.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, NewType

from .errors import PathError

if TYPE_CHECKING:
    import tarfile

RelPath = NewType("RelPath", str)

ROOT = RelPath("")


def rel(path: str | bytes | os.PathLike[str]) -> RelPath:
    """Check and normalise a workspace-relative path; raise PathError naming it otherwise."""
    text = os.fsdecode(path)
    if "\0" in text:
        raise PathError(f"path {text!r} contains a NUL byte")
    if text.startswith("/"):
        raise PathError(f"path {text!r} is absolute; give it relative to the workspace root")
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise PathError(f"path {text!r} leaves the workspace (it contains '..')")
    return RelPath("/".join(parts))


def parent(path: RelPath) -> RelPath:
    return RelPath(path[: max(path.rfind("/"), 0)])  # dirname, without its generality


def name(path: RelPath) -> str:
    return posixpath.basename(path)


def join(directory: RelPath, child: str) -> RelPath:
    return RelPath(f"{directory}/{child}" if directory else child)


def is_within(path: str | bytes, directory: str | bytes) -> bool:
    """True when `path` is `directory` itself or lies below it, compared by name (nothing is
    resolved: give both in the same form). The one check for relative paths (the root `""`
    holds every path) and absolute ones (`/` holds every path), as str or as bytes."""
    if isinstance(path, bytes):
        path = os.fsdecode(path)  # round-trips any bytes (surrogateescape)
    if isinstance(directory, bytes):
        directory = os.fsdecode(directory)
    folder = directory.rstrip("/")
    return not folder or path.startswith(folder + "/") or path.rstrip("/") == folder


def relative_to(path: str, directory: str) -> RelPath | None:
    """Absolute `path` as a RelPath below absolute `directory`, or None when it lies outside."""
    if not is_within(path, directory):
        return None
    return rel(path.rstrip("/")[len(directory.rstrip("/")) :].lstrip("/"))


def rebase(path: RelPath, old: RelPath, new: RelPath) -> RelPath:
    """`path` below `old`, moved to the same place below `new`."""
    rest = path[len(old) :].lstrip("/")
    return join(new, rest) if rest else new


# -- paths agents may not change ----------------------------------------------------------------

# Version-control metadata: a `.git` folder, or a submodule's `.git` gitdir file, at any depth.
# Compared without case: on a case-insensitive folder `.GIT/config` is `.git/config`.
VCS_NAMES = frozenset({".git", ".hg", ".svn", ".jj"})


def vcs_part(path: RelPath) -> str | None:
    """The version-control name `path` lies in or is (e.g. '.git'), or None."""
    for part in path.split("/"):
        if part.lower() in VCS_NAMES:
            return part
    return None


class Protection:
    """The paths no agent may stage, keep from a run, or accept: version-control metadata
    always, plus the user's `protect` globs (gitignore syntax: `.env` anywhere,
    `.github/workflows/**` below the root)."""

    def __init__(self, globs: Sequence[str] = ()) -> None:
        self.globs = tuple(globs)
        import pathspec  # here: the bare folder proxy (`shadowkernel mount`) needs none of it

        self._spec = pathspec.GitIgnoreSpec.from_lines(self.globs)

    def rule(self, path: RelPath, folder: bool = False) -> str | None:
        """What protects `path`, as a message names it ("version-control metadata (.git)",
        "the protect= glob '.env'"), or None when nothing does. A `folder` also matches the
        globs only folders match (`secrets/`)."""
        part = vcs_part(path)
        if part is not None:
            return f"version-control metadata ({part})"
        if self.globs:
            found = self._spec.check_file(f"{path}/" if folder and path else path)
            if found.include and found.index is not None:
                return f"the protect= glob {self._spec.patterns[found.index].pattern!r}"
        return None

    def reason(self, path: RelPath) -> str | None:
        """Why `path` is protected, or None when an agent may change it."""
        rule = self.rule(path)
        return None if rule is None else f"{rule} is read-only to agents"

    def check(self, paths: Iterable[RelPath], doing: str) -> None:
        """PathError naming the first protected path of `paths`."""
        for path in sorted(paths):
            why = self.reason(path)
            if why is not None:
                raise PathError(f"{doing}: {path!r} is protected ({why}); nothing was changed")

    def allowed(self, paths: Iterable[RelPath]) -> tuple[list[RelPath], list[RelPath]]:
        """(allowed, protected) of `paths`, sorted."""
        ordered = sorted(paths)
        return ([p for p in ordered if self.reason(p) is None],
                [p for p in ordered if self.reason(p) is not None])  # fmt: skip

    def link_reason(self, path: RelPath, target: bytes) -> str | None:
        """Why a symlink at `path` to `target` may not be staged (it leaves the workspace or
        lands on a protected path, so the user's own tools would write there through it)."""
        text = os.fsdecode(target)
        joined = posixpath.normpath(posixpath.join(parent(path), text))
        if text.startswith("/") or joined == ".." or joined.startswith("../"):
            return f"symlink to {text!r} points outside the workspace"
        why = self.reason(RelPath(joined))
        return None if why is None else f"symlink to {text!r} points at a protected path ({why})"

    def check_links(self, links: Mapping[RelPath, bytes], doing: str) -> None:
        """PathError naming the first symlink of `links` (path -> target) `link_reason` refuses."""
        for path, target in sorted(links.items()):
            why = self.link_reason(path, target)
            if why is not None:
                raise PathError(f"{doing}: {path!r} is refused ({why}); nothing was changed")


def extract_tar(archive: tarfile.TarFile, into: str | os.PathLike[str]) -> None:
    """Extract `archive` below `into` as tarfile's 'data' filter does: no member, and no
    link, may land outside it, and no device file. Pythons before 3.11.4 (Debian 12's
    3.11.2) lack the filter: the same checks by hand, then a plain extract."""
    import tarfile  # here: most users of this module never unpack anything

    if hasattr(tarfile, "data_filter"):
        try:
            archive.extractall(into, filter="data")
        except tarfile.FilterError as error:
            raise PathError(f"archive member {error.tarinfo.name!r}: {error}; not "
                            "extracted") from None  # fmt: skip
        return
    top = os.path.realpath(into)
    for member in archive.getmembers():
        where = os.path.realpath(os.path.join(top, member.name))
        if member.issym():
            leads = os.path.realpath(os.path.join(os.path.dirname(where), member.linkname))
        elif member.islnk():
            leads = os.path.realpath(os.path.join(top, member.linkname))
        else:
            leads = where
        if not (is_within(where, top) and is_within(leads, top)) or member.isdev():
            raise PathError(f"archive member {member.name!r} would land outside {top} (or is "
                            "a device file): not extracted")  # fmt: skip
    archive.extractall(top)  # every member checked above
