"""Upper -> delta: what a run wrote in its overlayfs upper layer, as overrides (harvest)."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, replace

from ...paths import ROOT, RelPath, join, parent
from ..lower import Lower
from ..store import (
    WHITEOUT,
    BlobStore,
    Dir,
    File,
    Manifest,
    Override,
    Special,
    Symlink,
    Whiteout,
    changed_paths,
    lower_source,
    new_link,
)
from .resolve import (
    TRUSTED,
    Xattrs,
    is_lower_dir,
    natural,
    reachable,
    read_bytes,
    xattr,
)


@dataclass
class _Reader:
    upper: str
    lower: Lower
    base: Manifest
    store: BlobStore
    xattrs: Xattrs = TRUSTED

    def __post_init__(self) -> None:
        self.entries: dict[RelPath, Override] = {}
        self.copies: set[RelPath] = set()
        root = os.stat(self.lower.root)
        self.owner = (root.st_uid, root.st_gid)  # what an override without one shows
        self.by_inode: dict[int, Override] = {}  # upper inode with several names -> override

    def owned(self, st: os.stat_result) -> tuple[int | None, int | None]:
        """An upper entry's owner as an override records it (None: the folder's)."""
        uid = None if st.st_uid == self.owner[0] else st.st_uid
        return uid, None if st.st_gid == self.owner[1] else st.st_gid

    def at(self, path: RelPath) -> bytes:
        return os.fsencode(os.path.join(self.upper, path)) if path else os.fsencode(self.upper)

    def read(self) -> dict[RelPath, Override]:
        self.walk(ROOT, copied=False)
        for path, override in self.base.items():
            if path not in self.entries and self.left_out(path, override):
                self.entries[path] = override
        return self.entries

    def left_out(self, path: RelPath, override: Override) -> bool:
        """Whether write_upper left `path` out because it made no difference to the view."""
        if isinstance(override, Whiteout):
            source = natural(self.entries, path)
            return source is None or self.lower.lstat(source) is None
        hidden = not reachable(self.base, self.lower, path)
        return hidden and not reachable(self.entries, self.lower, path)

    def walk(self, directory: RelPath, copied: bool) -> None:
        """Overrides for `directory`'s upper children; below a copied directory (write_upper
        without redirects), lower children missing from the upper were deleted."""
        with os.scandir(self.at(directory)) as it:
            names = sorted(os.fsdecode(e.name) for e in it)
        for entry in names:
            path = join(directory, entry)
            st = os.lstat(self.at(path))
            override = self.override(path, st)
            if override is not None:
                self.entries[path] = override
            if stat.S_ISDIR(st.st_mode):
                self.walk(path, copied or path in self.copies)
        source = lower_source(self.entries, directory)
        if copied and source is not None and is_lower_dir(self.lower, source):
            for entry in sorted(set(self.lower.listdir(source)) - set(names)):
                self.entries[join(directory, entry)] = WHITEOUT

    def override(self, path: RelPath, st: os.stat_result) -> Override | None:
        if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:
            return self.whiteout(path)
        if stat.S_ISDIR(st.st_mode):
            return self.directory(path, st)
        if st.st_nlink > 1 and st.st_ino in self.by_inode:
            return self.by_inode[st.st_ino]  # one more name of an inode already read
        override = self.linkable(path, st)
        if st.st_nlink > 1:
            return self.linked(st, override or self.lower_copy(path, st))
        return override

    def linkable(self, path: RelPath, st: os.stat_result) -> File | Symlink | Special | None:
        if stat.S_ISLNK(st.st_mode):
            return self.symlink(path, st)
        if stat.S_ISREG(st.st_mode):
            return self.file(path, st)
        return self.special(path, st)

    def lower_copy(self, path: RelPath, st: os.stat_result) -> File | Symlink:
        """A lower entry copied up unchanged, which has since gained names (a run's link)."""
        uid, gid = self.owned(st)
        if stat.S_ISLNK(st.st_mode):
            return Symlink(os.readlink(self.at(path)), st.st_mtime_ns, uid=uid, gid=gid)
        origin = natural(self.entries, path)
        return File(None, origin, stat.S_IMODE(st.st_mode), st.st_mtime_ns, uid=uid, gid=gid)

    def linked(self, st: os.stat_result, override: File | Symlink | Special) -> Override:
        """The override of every name of a hard-linked upper inode."""
        if override.link is None:
            override = replace(override, link=new_link())
        self.by_inode[st.st_ino] = override
        return override

    def special(self, path: RelPath, st: os.stat_result) -> Special | None:
        uid, gid = self.owned(st)
        node = Special(st.st_mode, st.st_rdev, st.st_mtime_ns, uid=uid, gid=gid)
        base = self.base.get(path)
        if isinstance(base, Special) and _same_but_times(base, node):
            return base
        return replace(node, atime_ns=_atime(st))

    def whiteout(self, path: RelPath) -> Override | None:
        source = natural(self.entries, path)
        shows = source is not None and self.lower.lstat(source) is not None
        return WHITEOUT if shows or isinstance(self.base.get(path), Whiteout) else None

    def directory(self, path: RelPath, st: os.stat_result) -> Override | None:
        origin = self.dir_origin(path)
        mode, base = stat.S_IMODE(st.st_mode), self.base.get(path)
        uid, gid = self.owned(st)
        if isinstance(base, Dir) and (base.origin, base.mode, base.uid, base.gid) == (
            origin, mode, uid, gid):  # fmt: skip
            return base  # mtime drift from child changes is not a change of the directory
        source = natural(self.entries, path)
        if base is None and origin is not None and origin == source:
            lower = self.lower.lstat(source)
            if lower is not None and _same_mode_and_owner(lower, st):
                return None  # a plain copy-up of a lower directory
        return Dir(origin=origin, mode=mode, mtime_ns=st.st_mtime_ns, uid=uid, gid=gid)

    def dir_origin(self, path: RelPath) -> RelPath | None:
        base = self.base.get(path)
        if xattr(self.at(path), self.xattrs.opaque) == b"y":
            if isinstance(base, Dir) and base.origin is not None:
                self.copies.add(path)  # write_upper copied the renamed directory's tree
                return base.origin
            return None
        redirect = xattr(self.at(path), self.xattrs.redirect)
        if redirect is not None:
            return self.redirected(path, redirect)
        source = natural(self.entries, path)
        return source if is_lower_dir(self.lower, source) else None

    def redirected(self, path: RelPath, redirect: bytes) -> RelPath | None:
        if redirect.startswith(b"/"):
            return RelPath(os.fsdecode(redirect[1:]))
        above = lower_source(self.entries, parent(path))  # relative: the same lower parent
        return None if above is None else join(above, os.fsdecode(redirect))

    def symlink(self, path: RelPath, st: os.stat_result) -> Symlink | None:
        uid, gid = self.owned(st)
        link = Symlink(os.readlink(self.at(path)), st.st_mtime_ns, uid=uid, gid=gid)
        base = self.base.get(path)
        if isinstance(base, Symlink) and _same_but_times(base, link):
            return base
        source = natural(self.entries, path)
        if base is None and source is not None and self.same_link_as_lower(link, source):
            return None
        return replace(link, atime_ns=_atime(st))

    def same_link_as_lower(self, link: Symlink, source: RelPath) -> bool:
        lower = self.lower.lstat(source)
        if lower is None or not stat.S_ISLNK(lower.st_mode) or lower.st_mtime_ns != link.mtime_ns:
            return False
        if self.owned(lower) != (link.uid, link.gid):
            return False
        return self.lower.readlink(source) == link.target

    def file(self, path: RelPath, st: os.stat_result) -> File | None:
        mode, mtime_ns = stat.S_IMODE(st.st_mode), st.st_mtime_ns
        uid, gid = self.owned(st)
        if xattr(self.at(path), self.xattrs.metacopy) is not None:
            redirect = xattr(self.at(path), self.xattrs.redirect)
            origin = self.redirected(path, redirect) if redirect else natural(self.entries, path)
            meta = File(None, origin, mode, mtime_ns, uid=uid, gid=gid)
            base = self.base.get(path)
            if isinstance(base, File) and replace(base, atime_ns=None, ctime_ns=None) == meta:
                return base  # unchanged: the atime a read moved is not a change
            return replace(meta, atime_ns=_atime(st))
        base = self.base.get(path)
        if isinstance(base, File) and self.same_file(path, st, base):
            return base
        source = natural(self.entries, path)
        if base is None and source is not None and self.same_as_lower(path, st, source):
            return None  # copied up (opened for writing) but unchanged
        blob = self.store.make(read_bytes(self.at(path)))
        return File(blob, None, mode, mtime_ns, uid=uid, gid=gid, atime_ns=_atime(st))

    def same_file(self, path: RelPath, st: os.stat_result, base: File) -> bool:
        if (stat.S_IMODE(st.st_mode), st.st_mtime_ns) != (base.mode, base.mtime_ns):
            return False
        if self.owned(st) != (base.uid, base.gid):
            return False
        if base.blob is not None:
            return st.st_size == base.blob.size and read_bytes(self.at(path)) == base.blob.bytes()
        return base.origin is not None and self.same_bytes_as_lower(path, st, base.origin)

    def same_as_lower(self, path: RelPath, st: os.stat_result, source: RelPath) -> bool:
        lower = self.lower.lstat(source)
        if lower is None or not stat.S_ISREG(lower.st_mode):
            return False
        if (lower.st_mode, lower.st_mtime_ns) != (st.st_mode, st.st_mtime_ns):
            return False
        if not _same_mode_and_owner(lower, st):
            return False
        return self.same_bytes_as_lower(path, st, source)

    def same_bytes_as_lower(self, path: RelPath, st: os.stat_result, source: RelPath) -> bool:
        lower = self.lower.lstat(source)
        if lower is None or lower.st_size != st.st_size:
            return False
        return read_bytes(self.at(path)) == self.lower.read(source)


def _atime(st: os.stat_result) -> int | None:
    return None if st.st_atime_ns == st.st_mtime_ns else st.st_atime_ns


def _same_mode_and_owner(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_mode, a.st_uid, a.st_gid) == (b.st_mode, b.st_uid, b.st_gid)


def _same_but_times(base: Symlink | Special, upper: Symlink | Special) -> bool:
    """Whether the upper's entry is the base's (atime moves on every read; ctime is the
    kernel's; the link group is the inode's, compared by `linked`)."""
    return replace(base, atime_ns=None, ctime_ns=None, link=None) == upper


def read_upper(upper_dir: str, lower_root: str, base_manifest: Manifest, store: BlobStore,
               xattrs: Xattrs = TRUSTED) -> dict[RelPath, Override | None]:  # fmt: skip
    """What a run wrote, as a delta on `base_manifest` (the shape of `Shadow.collect()`).

    `upper_dir` is the upper layer `write_upper(base_manifest, ...)` wrote, after the run.
    Entries the run did not change come back as the base's own overrides (same blobs), and
    copy-ups overlayfs made without a change (a file opened for writing, a directory that
    gained a child) are not reported. `xattrs`: the names the upper was written with.
    """
    reader = _Reader(upper_dir, Lower(lower_root), base_manifest, store, xattrs)
    after = reader.read()
    return {path: after.get(path) for path in changed_paths(base_manifest, after)}
