"""File URIs, parsed in one place: to a workspace path, from one, and to an absolute path.

A URI names a workspace file when its path lies below one of the roots given (the shadow
mount, the user's folder, or their resolved forms, since servers may resolve symlinks).
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Sequence
from urllib.parse import unquote, urlparse

from ..errors import PathError
from ..paths import ROOT, RelPath, relative_to

Roots = Sequence[str | os.PathLike[str]]


def path_to_uri(root: pathlib.Path, path: RelPath) -> str:
    return (root / path).as_uri()


def file_uri_path(uri: str) -> str:
    """The absolute path a file URI names (percent-decoded); any other URI unchanged."""
    parsed = urlparse(uri)
    return unquote(parsed.path) if _is_file(parsed.scheme) else uri


def uri_to_path(roots: Roots, uri: str) -> tuple[str, bool]:
    """(path, in_workspace): a RelPath when the URI lies below one of the roots, else the
    absolute path (or the URI itself when it is not a file URI)."""
    absolute = file_uri_path(uri)
    below = _below(absolute, roots)
    return (absolute, False) if below is None else (below, True)


def uri_to_rel(uri: str, roots: Roots) -> RelPath:
    """A file URI of a file below one of `roots` as a RelPath; PathError otherwise."""
    if not _is_file(urlparse(uri).scheme):
        raise PathError(f"uri {uri!r} is not a file URI")
    below = _below(file_uri_path(uri), roots)
    if below is None or below == ROOT:
        shown = ", ".join(os.fspath(r) for r in roots)
        raise PathError(f"uri {uri!r} lies outside the workspace ({shown})")
    return below


def _is_file(scheme: str) -> bool:
    return scheme in ("file", "")


def _below(absolute: str, roots: Roots) -> RelPath | None:
    for root in roots:
        below = relative_to(absolute, os.fspath(root))
        if below is not None:
            return below
    return None
