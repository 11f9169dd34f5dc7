"""A manifest as a kernel-overlayfs upper layer, and an upper layer back as overrides.

Heavy runs use the kernel's overlayfs (lower: the user's folder, upper: this translation of
the branch's manifest) instead of the FUSE mount, because every FUSE access is a Python round
trip. The translation follows `store.lower_source`, the one resolution rule both views share:

- `File(blob)`: a regular file with the bytes, mode and mtime;
- `File(origin=X)` without a blob (renamed or metadata-only): with `redirects`, an empty
  *metacopy* file (`trusted.overlay.metacopy`, plus `trusted.overlay.redirect=/X` when X is
  not the path the file would show anyway), so a renamed 1 GB file costs nothing; without,
  a copy of X's bytes;
- `Dir(origin=None)`: an opaque directory (`trusted.overlay.opaque=y`);
- `Dir(origin=X)` elsewhere (a renamed directory): with `redirects`, a directory with
  `trusted.overlay.redirect=/X`; without, an opaque directory holding a copy of X's tree;
- `Symlink`: a symlink; `WHITEOUT`: a 0/0 character device.

`redirects` needs the mount options `redirect_dir=on,metacopy=on` (privileged overlayfs; the
kernel refuses both with `userxattr`). `read_upper` reads them back the same way, so a
directory or file the run renamed comes back as a recorded rename, not a copy.

Caveats: a directory's mtime is not harvested (overlayfs bumps it on every child change, the
FUSE view keeps it); fifos, sockets and device nodes a run creates are not harvested (the FUSE
view refuses them); hard links come back as separate files.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from ..paths import ROOT, RelPath, is_within, join, name, parent
from .lower import Lower
from .store import (
    WHITEOUT,
    BlobStore,
    Dir,
    File,
    Manifest,
    Override,
    Symlink,
    Whiteout,
    changed_paths,
    lower_source,
)

XATTR = "trusted.overlay."
OPAQUE, REDIRECT, METACOPY = XATTR + "opaque", XATTR + "redirect", XATTR + "metacopy"

Delta = dict[RelPath, Override | None]


def mount_options(lower: str, upper: str, work: str, redirects: bool = True) -> str:
    """The `-o` string for `mount -t overlay` of an upper written with `redirects`."""
    for path in (lower, upper, work):
        if any(c in path for c in ",:\\"):
            raise ValueError(f"path {path!r} holds ',', ':' or '\\', which overlayfs cannot take")
    extra = ",redirect_dir=on,metacopy=on" if redirects else ",redirect_dir=off,metacopy=off"
    return f"lowerdir={lower},upperdir={upper},workdir={work}{extra}"


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
        elif not _is_lower_dir(lower, lower_source(entries, up)):
            return False
        up = parent(up)
    return True


def _is_lower_dir(lower: Lower, source: RelPath | None) -> bool:
    st = lower.lstat(source) if source is not None else None
    return st is not None and stat.S_ISDIR(st.st_mode)


def _by_depth(paths: Iterator[RelPath] | list[RelPath]) -> list[RelPath]:
    return sorted(paths, key=lambda p: (p.count("/"), p))


# -- manifest -> upper -------------------------------------------------------------------------


@dataclass
class _Writer:
    manifest: Manifest
    lower: Lower
    upper: str
    redirects: bool

    def __post_init__(self) -> None:
        root = os.stat(self.lower.root)
        # The FUSE view shows every override as owned by the folder's owner; so does this one.
        self.owner = None if root.st_uid == os.geteuid() else (root.st_uid, root.st_gid)
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
        self.chown(ROOT, (root.st_uid, root.st_gid))
        self.dir_times[ROOT] = root.st_mtime_ns
        for path in _by_depth(p for p in self.manifest if p):
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
            here = isinstance(override, Dir) if override is not None else _is_lower_dir(
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
            self.meta(directory, st.st_mode, st.st_mtime_ns, owner=(st.st_uid, st.st_gid))

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
        elif isinstance(override, Symlink):
            os.symlink(override.target, self.at(path))
            self.chown(path)
            os.utime(self.at(path), ns=(override.mtime_ns,) * 2, follow_symlinks=False)
        elif isinstance(override, Dir):
            self.put_dir(path, override)
        else:
            self.put_file(path, override)

    def put_dir(self, path: RelPath, override: Dir) -> None:
        os.mkdir(self.at(path))
        self.made.add(path)
        self.meta(path, override.mode, override.mtime_ns)
        if override.origin is None:
            os.setxattr(self.at(path), OPAQUE, b"y")
        elif override.origin != self.shows(path):
            if self.redirects:
                os.setxattr(self.at(path), REDIRECT, b"/" + os.fsencode(override.origin))
            else:
                os.setxattr(self.at(path), OPAQUE, b"y")
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
        elif self.redirects:
            self.put_metacopy(path, override.origin)
        else:
            shutil.copyfile(self.lower.path(override.origin), target, follow_symlinks=False)
        self.meta(path, override.mode, override.mtime_ns, is_dir=False)

    def put_metacopy(self, path: RelPath, origin: RelPath) -> None:
        st = self.lower.lstat(origin)
        with open(self.at(path), "wb") as f:
            f.truncate(st.st_size if st is not None else 0)
        os.setxattr(self.at(path), METACOPY, b"")
        if origin != self.shows(path):
            os.setxattr(self.at(path), REDIRECT, b"/" + os.fsencode(origin))

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
            self.meta(dst, st.st_mode, st.st_mtime_ns, owner=(st.st_uid, st.st_gid),
                      is_dir=stat.S_ISDIR(st.st_mode))  # fmt: skip

    def meta(self, path: RelPath, mode: int, mtime_ns: int, owner: tuple[int, int] | None = None,
             is_dir: bool = True) -> None:  # fmt: skip
        self.chown(path, owner)
        if stat.S_ISLNK(mode):
            os.utime(self.at(path), ns=(mtime_ns, mtime_ns), follow_symlinks=False)
            return
        os.chmod(self.at(path), stat.S_IMODE(mode))
        if is_dir:
            self.dir_times[path] = mtime_ns
        else:
            os.utime(self.at(path), ns=(mtime_ns, mtime_ns))

    def chown(self, path: RelPath, owner: tuple[int, int] | None = None) -> None:
        owner = owner or self.owner
        if owner is not None and owner != (os.geteuid(), os.getegid()):
            os.chown(self.at(path), *owner, follow_symlinks=False)


def write_upper(
    manifest: Manifest, lower_root: str, upper_dir: str, *, redirects: bool = True
) -> None:
    """Materialise `manifest` as an overlayfs upper layer in the empty directory `upper_dir`.

    Entries the FUSE view cannot reach (below a file, or below a directory that exists in
    neither the manifest nor the user's folder) are left out, so both views agree.
    Costs O(overrides), plus the bytes of renamed files and directories when not `redirects`.
    """
    _Writer(manifest, Lower(lower_root), upper_dir, redirects).write()


# -- upper -> delta ----------------------------------------------------------------------------


@dataclass
class _Reader:
    upper: str
    lower: Lower
    base: Manifest
    store: BlobStore

    def __post_init__(self) -> None:
        self.entries: dict[RelPath, Override] = {}
        self.copies: set[RelPath] = set()

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
        if copied and source is not None and _is_lower_dir(self.lower, source):
            for entry in sorted(set(self.lower.listdir(source)) - set(names)):
                self.entries[join(directory, entry)] = WHITEOUT

    def override(self, path: RelPath, st: os.stat_result) -> Override | None:
        if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:
            return self.whiteout(path)
        if stat.S_ISDIR(st.st_mode):
            return self.directory(path, st)
        if stat.S_ISLNK(st.st_mode):
            return self.symlink(path, st)
        if stat.S_ISREG(st.st_mode):
            return self.file(path, st)
        return None  # fifos, sockets, devices: not representable in an override

    def whiteout(self, path: RelPath) -> Override | None:
        source = natural(self.entries, path)
        shows = source is not None and self.lower.lstat(source) is not None
        return WHITEOUT if shows or isinstance(self.base.get(path), Whiteout) else None

    def directory(self, path: RelPath, st: os.stat_result) -> Override | None:
        origin = self.dir_origin(path)
        mode, base = stat.S_IMODE(st.st_mode), self.base.get(path)
        if isinstance(base, Dir) and base.origin == origin and base.mode == mode:
            return base  # mtime drift from child changes is not a change of the directory
        source = natural(self.entries, path)
        if base is None and origin is not None and origin == source:
            lower = self.lower.lstat(source)
            if lower is not None and stat.S_IMODE(lower.st_mode) == mode:
                return None  # a plain copy-up of a lower directory
        return Dir(origin=origin, mode=mode, mtime_ns=st.st_mtime_ns)

    def dir_origin(self, path: RelPath) -> RelPath | None:
        base = self.base.get(path)
        if _xattr(self.at(path), OPAQUE) == b"y":
            if isinstance(base, Dir) and base.origin is not None:
                self.copies.add(path)  # write_upper copied the renamed directory's tree
                return base.origin
            return None
        redirect = _xattr(self.at(path), REDIRECT)
        if redirect is not None:
            return self.redirected(path, redirect)
        source = natural(self.entries, path)
        return source if _is_lower_dir(self.lower, source) else None

    def redirected(self, path: RelPath, redirect: bytes) -> RelPath | None:
        if redirect.startswith(b"/"):
            return RelPath(os.fsdecode(redirect[1:]))
        above = lower_source(self.entries, parent(path))  # relative: the same lower parent
        return None if above is None else join(above, os.fsdecode(redirect))

    def symlink(self, path: RelPath, st: os.stat_result) -> Override | None:
        link = Symlink(target=os.readlink(self.at(path)), mtime_ns=st.st_mtime_ns)
        base = self.base.get(path)
        if base == link:
            return base
        source = natural(self.entries, path)
        if base is None and source is not None and self.same_link_as_lower(link, source):
            return None
        return link

    def same_link_as_lower(self, link: Symlink, source: RelPath) -> bool:
        lower = self.lower.lstat(source)
        if lower is None or not stat.S_ISLNK(lower.st_mode) or lower.st_mtime_ns != link.mtime_ns:
            return False
        return self.lower.readlink(source) == link.target

    def file(self, path: RelPath, st: os.stat_result) -> Override | None:
        mode, mtime_ns = stat.S_IMODE(st.st_mode), st.st_mtime_ns
        if _xattr(self.at(path), METACOPY) is not None:
            redirect = _xattr(self.at(path), REDIRECT)
            origin = self.redirected(path, redirect) if redirect else natural(self.entries, path)
            meta = File(origin=origin, mode=mode, mtime_ns=mtime_ns)
            return meta
        base = self.base.get(path)
        if isinstance(base, File) and self.same_file(path, st, base):
            return base
        source = natural(self.entries, path)
        if base is None and source is not None and self.same_as_lower(path, st, source):
            return None  # copied up (opened for writing) but unchanged
        return File(blob=self.store.make(_read(self.at(path))), mode=mode, mtime_ns=mtime_ns)

    def same_file(self, path: RelPath, st: os.stat_result, base: File) -> bool:
        if (stat.S_IMODE(st.st_mode), st.st_mtime_ns) != (base.mode, base.mtime_ns):
            return False
        if base.blob is not None:
            return st.st_size == base.blob.size and _read(self.at(path)) == base.blob.bytes()
        return base.origin is not None and self.same_bytes_as_lower(path, st, base.origin)

    def same_as_lower(self, path: RelPath, st: os.stat_result, source: RelPath) -> bool:
        lower = self.lower.lstat(source)
        if lower is None or not stat.S_ISREG(lower.st_mode):
            return False
        if (lower.st_mode, lower.st_mtime_ns) != (st.st_mode, st.st_mtime_ns):
            return False
        return self.same_bytes_as_lower(path, st, source)

    def same_bytes_as_lower(self, path: RelPath, st: os.stat_result, source: RelPath) -> bool:
        lower = self.lower.lstat(source)
        if lower is None or lower.st_size != st.st_size:
            return False
        return _read(self.at(path)) == self.lower.read(source)


def _xattr(path: bytes, key: str) -> bytes | None:
    try:
        return os.getxattr(path, key, follow_symlinks=False)
    except OSError:
        return None


def _read(path: bytes) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def read_upper(upper_dir: str, lower_root: str, base_manifest: Manifest, store: BlobStore) -> Delta:
    """What a run wrote, as a delta on `base_manifest` (the shape of `Shadow.collect()`).

    `upper_dir` is the upper layer `write_upper(base_manifest, ...)` wrote, after the run.
    Entries the run did not change come back as the base's own overrides (same blobs), and
    copy-ups overlayfs made without a change (a file opened for writing, a directory that
    gained a child) are not reported.
    """
    reader = _Reader(upper_dir, Lower(lower_root), base_manifest, store)
    after = reader.read()
    return {path: after.get(path) for path in changed_paths(base_manifest, after)}
