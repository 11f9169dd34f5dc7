"""What both directions of the upper translation share: overlayfs's xattrs, the mount
options, and where an entry without an override of its own shows from."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from ...paths import ROOT, RelPath, join, name, parent
from ..lower import Lower
from ..store import Dir, Override, lower_source


@dataclass(frozen=True)
class Xattrs:
    """The names overlayfs gives its xattrs: `trusted.overlay.*` when mounted by the machine's
    root, `user.overlay.*` when mounted in a user namespace (`userxattr`)."""

    prefix: str

    @property
    def opaque(self) -> str:
        return self.prefix + "opaque"

    @property
    def redirect(self) -> str:
        return self.prefix + "redirect"

    @property
    def metacopy(self) -> str:
        return self.prefix + "metacopy"


TRUSTED = Xattrs("trusted.overlay.")
USER = Xattrs("user.overlay.")  # the kernel refuses redirects and metacopy with these


def mount_options(lower: str, upper: str, work: str, redirects: bool = True,
                  xattrs: Xattrs = TRUSTED) -> str:  # fmt: skip
    """The `-o` string for `mount -t overlay` of an upper written with `redirects` and
    `xattrs` (USER: the `userxattr` mount of a user namespace, which takes no redirects)."""
    for path in (lower, upper, work):
        if any(c in path for c in ",:\\"):
            raise ValueError(f"path {path!r} holds ',', ':' or '\\', which overlayfs cannot take")
    check_redirects(redirects, xattrs)
    if xattrs == USER:  # redirect_dir and metacopy are off there, and may not be named
        return f"lowerdir={lower},upperdir={upper},workdir={work},userxattr"
    extra = ",redirect_dir=on,metacopy=on" if redirects else ",redirect_dir=off,metacopy=off"
    return f"lowerdir={lower},upperdir={upper},workdir={work}{extra}"


def check_redirects(redirects: bool, xattrs: Xattrs) -> None:
    if redirects and xattrs != TRUSTED:
        raise ValueError("redirects=True needs trusted.overlay.* xattrs (a privileged mount); "
                         "pass redirects=False with user xattrs")  # fmt: skip


# -- resolution shared by both directions ------------------------------------------------------


def natural(entries: Mapping[RelPath, Override], path: RelPath) -> RelPath | None:
    """The lower path `path` shows when it has no override of its own."""
    above = lower_source(entries, parent(path))
    return None if above is None else join(above, name(path))


def reachable(entries: Mapping[RelPath, Override], lower: Lower, path: RelPath) -> bool:
    """Whether every ancestor of `path` is a directory in the view (else the entry is hidden)."""
    up = parent(path)
    while up != ROOT:
        override = entries.get(up)
        if override is not None:
            if not isinstance(override, Dir):
                return False
        elif not is_lower_dir(lower, lower_source(entries, up)):
            return False
        up = parent(up)
    return True


def is_lower_dir(lower: Lower, source: RelPath | None) -> bool:
    st = lower.lstat(source) if source is not None else None
    return st is not None and stat.S_ISDIR(st.st_mode)


def by_depth(paths: Iterator[RelPath] | list[RelPath]) -> list[RelPath]:
    return sorted(paths, key=lambda p: (p.count("/"), p))


def xattr(path: bytes, key: str) -> bytes | None:
    try:
        return os.getxattr(path, key, follow_symlinks=False)
    except OSError:
        return None


def read_bytes(path: bytes) -> bytes:
    with open(path, "rb") as f:
        return f.read()
