"""Paths relative to the workspace root: the one way a file is named inside shadowkernel.

A `RelPath` is a normalised POSIX path without a leading slash, `.` or `..` parts; the
root itself is the empty string. Names are `str`; bytes that are not UTF-8 are kept through
`os.fsdecode` (surrogateescape), so every name the user's folder holds round-trips.
"""

from __future__ import annotations

import os
import posixpath
from typing import NewType

from .errors import PathError

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
