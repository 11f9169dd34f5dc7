"""Manifest -> upper: write a branch's overrides as an overlayfs upper layer."""

from __future__ import annotations

import errno
import os
import shutil
import stat
from dataclasses import dataclass

from ...paths import ROOT, RelPath, is_within, join, name, parent
from ..attributes import owner_of
from ..lower import Lower
from ..metadata import Owned
from ..store import Dir, File, Manifest, Override, Special, Symlink, Whiteout, lower_source
from .resolve import TRUSTED, Xattrs, by_depth, check_redirects, is_lower_dir


@dataclass
class _Writer:
    manifest: Manifest
    lower: Lower
    upper: str
    redirects: bool
    xattrs: Xattrs = TRUSTED

    def __post_init__(self) -> None:
        check_redirects(self.redirects, self.xattrs)
        root = os.stat(self.lower.root)
        # An override that records no owner shows the folder's owner, in both views.
        self.owner = (root.st_uid, root.st_gid)
        self.linked: dict[str, RelPath] = {}  # hard-link group -> the path written first
        self.dir_times: dict[RelPath, int] = {}
        self.made: set[RelPath] = {ROOT}  # upper directories known to exist
        self.shown_dirs: dict[RelPath, bool] = {}  # memo: is this a directory in the view?
        self.copied = False  # whether a copied tree may already hold an override's path

    def at(self, path: RelPath) -> bytes:
        return os.fsencode(os.path.join(self.upper, path)) if path else os.fsencode(self.upper)

    def shows(self, path: RelPath) -> RelPath | None:
        """The lower path overlayfs shows at `path` if the upper has no entry there."""
        above = self.source(parent(path))
        return None if above is None else join(above, name(path))

    def source(self, directory: RelPath) -> RelPath | None:
        """`lower_source`, except that a copied (not redirected) directory is opaque."""
        if directory == ROOT:
            return ROOT
        override = self.manifest.get(directory)
        if override is None:
            return self.shows(directory)
        if not isinstance(override, Dir) or override.origin is None:
            return None
        if self.redirects or override.origin == self.shows(directory):
            return override.origin
        return None

    def write(self) -> None:
        root = os.stat(self.lower.root)  # overlayfs shows the upper root's own attributes
        os.chmod(self.upper, stat.S_IMODE(root.st_mode))
        self.chown(ROOT, self.owner)
        self.dir_times[ROOT] = root.st_mtime_ns
        for path in by_depth(p for p in self.manifest if p):
            if self.reachable(path):
                self.ensure_parents(path)
                self.clear(path)
                self.put(path, self.manifest[path])
        # Children change a directory's mtime, so directories get theirs last.
        for path, mtime_ns in sorted(self.dir_times.items(), key=lambda kv: -kv[0].count("/")):
            os.utime(self.at(path), ns=(mtime_ns, mtime_ns))

    def reachable(self, path: RelPath) -> bool:
        """`reachable()`, memoised per directory: overrides share their parents."""
        up = parent(path)
        if up == ROOT:
            return True
        if up not in self.shown_dirs:
            override = self.manifest.get(up)
            here = isinstance(override, Dir) if override is not None else is_lower_dir(
                self.lower, lower_source(self.manifest, up))  # fmt: skip
            self.shown_dirs[up] = here and self.reachable(up)
        return self.shown_dirs[up]

    def ensure_parents(self, path: RelPath) -> None:
        """Upper copies of the lower directories above `path`, with their mode and mtime."""
        missing = []
        up = parent(path)
        while up not in self.made and not os.path.lexists(self.at(up)):
            missing.append(up)
            up = parent(up)
        for directory in reversed(missing):
            st = self.lower.lstat(lower_source(self.manifest, directory))  # type: ignore[arg-type]
            assert st is not None  # reachable() checked it
            os.mkdir(self.at(directory))
            self.made.add(directory)
            self.lower_meta(directory, st)

    def clear(self, path: RelPath) -> None:
        """Whatever a copied tree put at `path` before its own override replaces it."""
        if not self.copied:
            return
        target = self.at(path)
        if os.path.isdir(target) and not os.path.islink(target):
            shutil.rmtree(target)
        elif os.path.lexists(target):
            os.unlink(target)
        for gone in [d for d in self.dir_times if is_within(d, path)]:
            del self.dir_times[gone]

    def put(self, path: RelPath, override: Override) -> None:
        if isinstance(override, Whiteout):
            # Only where a lower entry can show: overlayfs lists a whiteout in a pure upper dir.
            if self.shows(path) is not None:
                os.mknod(self.at(path), stat.S_IFCHR, os.makedev(0, 0))
        elif isinstance(override, Dir):
            self.put_dir(path, override)
        elif override.link is not None and override.link in self.linked:
            os.link(self.at(self.linked[override.link]), self.at(path), follow_symlinks=False)
        else:
            self.put_linkable(path, override)
            if override.link is not None:
                self.linked[override.link] = path

    def put_linkable(self, path: RelPath, override: File | Symlink | Special) -> None:
        if isinstance(override, Symlink):
            os.symlink(override.target, self.at(path))
            self.meta(path, stat.S_IFLNK, override, is_dir=False)
        elif isinstance(override, Special):
            os.mknod(self.at(path), override.mode, override.rdev)
            self.meta(path, override.mode, override, is_dir=False)
        else:
            self.put_file(path, override)

    def put_dir(self, path: RelPath, override: Dir) -> None:
        os.mkdir(self.at(path))
        self.made.add(path)
        self.meta(path, override.mode, override)
        if override.origin is None:
            os.setxattr(self.at(path), self.xattrs.opaque, b"y")
        elif override.origin != self.shows(path):
            if self.redirects:
                redirect = b"/" + os.fsencode(override.origin)
                os.setxattr(self.at(path), self.xattrs.redirect, redirect)
            else:
                os.setxattr(self.at(path), self.xattrs.opaque, b"y")
                self.copied = True
                self.copy_tree(override.origin, path)

    def put_file(self, path: RelPath, override: File) -> None:
        target = self.at(path)
        if override.blob is not None:
            with open(target, "wb") as f:
                for offset in range(0, override.blob.size, 1 << 20):
                    f.write(override.blob.read(offset, 1 << 20))
        elif override.origin is None:
            return  # a file without content or origin cannot be shown by either view
        elif self.redirects and override.link is None:  # a metacopy is not shared by names
            self.put_metacopy(path, override.origin)
        else:
            shutil.copyfile(self.lower.path(override.origin), target, follow_symlinks=False)
        self.meta(path, override.mode, override, is_dir=False)

    def put_metacopy(self, path: RelPath, origin: RelPath) -> None:
        st = self.lower.lstat(origin)
        with open(self.at(path), "wb") as f:
            f.truncate(st.st_size if st is not None else 0)
        os.setxattr(self.at(path), self.xattrs.metacopy, b"")
        if origin != self.shows(path):
            os.setxattr(self.at(path), self.xattrs.redirect, b"/" + os.fsencode(origin))

    def copy_tree(self, source: RelPath, path: RelPath) -> None:
        """A lower directory's children as plain upper entries (when redirects are off)."""
        for entry in self.lower.listdir(source):
            src, dst = join(source, entry), join(path, entry)
            st = self.lower.lstat(src)
            if st is None:
                continue
            if stat.S_ISDIR(st.st_mode):
                os.mkdir(self.at(dst))
                self.copy_tree(src, dst)
            elif stat.S_ISLNK(st.st_mode):
                os.symlink(self.lower.readlink(src), self.at(dst))
            elif stat.S_ISREG(st.st_mode):
                shutil.copyfile(self.lower.path(src), self.at(dst), follow_symlinks=False)
            else:
                continue
            self.lower_meta(dst, st)

    def lower_meta(self, path: RelPath, st: os.stat_result) -> None:
        """A lower entry's mode, owner and mtime on its upper copy."""
        times = Dir(mtime_ns=st.st_mtime_ns, uid=st.st_uid, gid=st.st_gid)
        self.meta(path, st.st_mode, times, is_dir=stat.S_ISDIR(st.st_mode))

    def meta(self, path: RelPath, mode: int, override: Owned, is_dir: bool = True) -> None:
        """`override`'s owner, mode and times on the upper entry at `path`."""
        self.chown(path, owner_of(override, self.owner))
        mtime_ns = override.mtime_ns
        atime_ns = mtime_ns if override.atime_ns is None else override.atime_ns
        if stat.S_ISLNK(mode):
            os.utime(self.at(path), ns=(atime_ns, mtime_ns), follow_symlinks=False)
            return
        os.chmod(self.at(path), stat.S_IMODE(mode))
        if is_dir:
            self.dir_times[path] = mtime_ns
        else:
            os.utime(self.at(path), ns=(atime_ns, mtime_ns))

    def chown(self, path: RelPath, owner: tuple[int, int]) -> None:
        if owner == (os.geteuid(), os.getegid()):
            return
        try:
            os.chown(self.at(path), *owner, follow_symlinks=False)
        except (PermissionError, OSError) as exc:
            # A writer without CAP_CHOWN (or a user namespace that does not map the uid)
            # can give only the folder's owner; an entry's own owner is then its writer's.
            # A normal user's upper (USER xattrs) may not give the folder's either (a group
            # they are not in): the writer's then too.
            given = owner == self.owner and self.xattrs == TRUSTED
            if given or exc.errno not in (errno.EPERM, errno.EINVAL):
                raise


def write_upper(
    manifest: Manifest, lower_root: str, upper_dir: str, *, redirects: bool = True,
    xattrs: Xattrs = TRUSTED,
) -> None:  # fmt: skip
    """Materialise `manifest` as an overlayfs upper layer in the empty directory `upper_dir`.

    Entries the FUSE view cannot reach (below a file, or below a directory that exists in
    neither the manifest nor the user's folder) are left out, so both views agree.
    Costs O(overrides), plus the bytes of renamed files and directories when not `redirects`.
    `xattrs`: USER for an overlayfs mounted in a user namespace (`userxattr`, no redirects).
    """
    _Writer(manifest, Lower(lower_root), upper_dir, redirects, xattrs).write()
