"""The merged namespace: what each path shows, its override or the lower entry beneath.

Read-only questions by path over the live layer and the user's folder (through `Lower`):
attributes, listings, whether a lower entry would show, and a *snapshot* (an override
that reproduces a path's state wherever it is put, which is how renames and copy-ups are
recorded without copying). No inode numbers here; those are `inodes.py`'s.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from dataclasses import replace

from ..paths import RelPath, join, parent
from . import attributes
from .attributes import Stat
from .inodes import fail
from .layer import Layer
from .lower import Lower
from .store import Dir, File, Meta, Override, Special, Symlink, Whiteout


class Merged:
    def __init__(self, lower: Lower, layer: Layer, owner: tuple[int, int]) -> None:
        self.lower = lower
        self.layer = layer
        self.owner = owner  # of every entry the shadow makes
        # When programs last made or removed an entry in a directory (its new mtime and
        # ctime). Not an override: a version holds files, not its directories' times, so a
        # touched directory is no change to collect, keep or switch; activation clears it.
        self.entry_times: dict[RelPath, int] = {}

    def stat(self, path: RelPath) -> Stat | None:
        override = self.layer.get(path)
        if override is not None:
            return self.of_override(override, path)
        source = self.layer.source(path)
        st = None if source is None else self.lower.lstat(source)
        return None if st is None else self._timed(path, self._of_lower(path, st))

    def _timed(self, path: RelPath, st: Stat) -> Stat:
        when = self.entry_times.get(path)
        if when is None or when <= max(st.mtime_ns, st.ctime_ns):
            return st
        return replace(st, mtime_ns=when, ctime_ns=when)

    def _of_lower(self, path: RelPath, st: os.stat_result) -> Stat:
        shown = attributes.from_lstat(st)
        # The root is merged with what programs write from the start; overlayfs counts a
        # merged directory's links as 1. (A lower directory keeps its own count: overlayfs
        # says 1 once anything below it changed, which the kernel's cached attributes of the
        # directory would not follow here.)
        return replace(shown, nlink=1) if not path and stat.S_ISDIR(st.st_mode) else shown

    def of_override(self, override: Override, path: RelPath | None = None) -> Stat | None:
        """What `override` shows at `path` (None: an orphan's, which has no place)."""
        st = attributes.of_override(
            override, self.owner, self._lower_size, self._nlink(override, path)
        )
        return st if st is None or path is None else self._timed(path, st)

    def _nlink(self, override: Override, path: RelPath | None) -> int | None:
        """Names of a file; for a directory, as overlayfs counts: 1 when merged with a lower
        one, else 2 and one per subdirectory (all of which are overrides)."""
        if not isinstance(override, Dir):
            return self.layer.nlink(override)
        if override.origin is not None:
            return 1
        return 2 + (self.layer.subdirs[path] if path is not None else 0)

    def _lower_size(self, source: RelPath) -> int | None:
        st = self.lower.lstat(source)
        return None if st is None else st.st_size

    def list(self, path: RelPath) -> Iterator[tuple[str, Stat]]:
        """A directory's entries: the lower ones without an override, then the overridden."""
        source = self.layer.source(path)
        listing = self.lower.scan(source) if source is not None else []
        own = self.layer.children(path)
        for name, lower_st in listing:
            if name not in own:
                child = join(path, name)
                yield name, self._timed(child, self._of_lower(child, lower_st))
        for name in sorted(own):
            child = join(path, name)
            st = self.of_override(self.layer.entries[child], child)
            if st is not None:
                yield name, st

    def is_empty_dir(self, path: RelPath) -> bool:
        return next(iter(self.list(path)), None) is None

    def check_replaceable(self, old_st: Stat, new: RelPath, new_st: Stat) -> None:
        """Raise what rename(2) answers when the entry `old_st` may not replace `new`."""
        if stat.S_ISDIR(new_st.mode):
            if not stat.S_ISDIR(old_st.mode):
                raise fail(errno.EISDIR)
            if not self.is_empty_dir(new):
                raise fail(errno.ENOTEMPTY)
        elif stat.S_ISDIR(old_st.mode):
            raise fail(errno.ENOTDIR)

    def subtree(self, path: RelPath, st: Stat) -> dict[RelPath, Override]:
        """Overrides that carry `path` and everything below it to another name."""
        below = self.layer.below(path, stat.S_ISDIR(st.mode))
        moved = {p: self.layer.entries[p] for p in below if p != path}
        moved[path] = self.snapshot(path, st)
        return moved

    def is_dir(self, path: RelPath) -> bool:
        override = self.layer.get(path)
        if override is not None:  # answered without a stat of the user's folder
            return isinstance(override, Dir)
        st = self.stat(path)
        return st is not None and stat.S_ISDIR(st.mode)

    def shows_lower(self, path: RelPath) -> bool:
        """Whether the user's folder has an entry that would show at `path` without an override."""
        source = self.layer.source(parent(path))
        return (
            source is not None
            and self.lower.lstat(join(source, path.rsplit("/", 1)[-1])) is not None
        )

    def content_source(self, path: RelPath | None, override: Override | None) -> RelPath | None:
        """The lower file whose bytes `path` (or an orphan's `override`) shows, if any."""
        if isinstance(override, File):
            return override.origin
        return None if path is None else self.layer.source(path)

    def link_target(self, path: RelPath | None, override: Override | None) -> bytes:
        """The raw target of the symlink at `path` (or an orphan's `override`)."""
        if isinstance(override, Symlink):
            return override.target
        if override is not None or path is None:
            raise fail(errno.EINVAL)  # not a link
        source = self.layer.source(path)
        if source is None:
            raise fail(errno.ENOENT)
        return self.lower.readlink(source)

    def lower_of(self, path: RelPath | None, override: Override | None) -> RelPath | None:
        """The lower entry shown unchanged at `path` (or by an orphan's `override`), if any:
        its extended attributes show through."""
        if override is None and path is not None:
            return self.layer.source(path)
        return override.origin if isinstance(override, (File, Dir)) else None

    def snapshot(self, path: RelPath, st: Stat) -> Override:
        """An override that reproduces `path`'s current state wherever it is put."""
        override = self.layer.get(path)
        if override is not None:
            return override
        source = self.layer.source(path)
        assert source is not None  # `st` came from the lower entry
        mode, meta = stat.S_IMODE(st.mode), self._meta(st)
        if stat.S_ISDIR(st.mode):  # a directory's atime is noise: every listing moves it
            return Dir(origin=source, mode=mode, mtime_ns=st.mtime_ns, uid=meta.uid, gid=meta.gid)
        if stat.S_ISLNK(st.mode):
            return Symlink(self.lower.readlink(source), st.mtime_ns, uid=meta.uid, gid=meta.gid,
                           atime_ns=meta.atime_ns)  # fmt: skip
        if stat.S_ISREG(st.mode):
            return File(origin=source, mode=mode, mtime_ns=st.mtime_ns, uid=meta.uid,
                        gid=meta.gid, atime_ns=meta.atime_ns)  # fmt: skip
        return Special(st.mode, st.rdev, st.mtime_ns, uid=meta.uid, gid=meta.gid,
                       atime_ns=meta.atime_ns)  # fmt: skip

    def _meta(self, st: Stat) -> Meta:
        """A lower entry's owner and atime, where they differ from what an override
        shows without them (so a rename of an ordinary file records only its origin)."""
        uid = None if st.uid == self.owner[0] else st.uid
        gid = None if st.gid == self.owner[1] else st.gid
        atime = None if st.atime_ns == st.mtime_ns else st.atime_ns
        return Meta(uid=uid, gid=gid, atime_ns=atime)

    def snapshot_of(self, path: RelPath) -> Override | None:
        """`path`'s current state as an override, or None if it does not exist."""
        override = self.layer.get(path)
        if override is not None:
            return None if isinstance(override, Whiteout) else override
        st = self.stat(path)
        return None if st is None else self.snapshot(path, st)
