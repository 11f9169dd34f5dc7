"""The override store: what a branch changes on top of the user's folder, as plain data.

A *manifest* maps workspace-relative paths to overrides:

- `File`: new bytes (a `Blob`), or the bytes of a lower file (`origin`) when only the
  name or the metadata changed: renames are recorded, never replayed by copying;
- `Dir`: a directory created or renamed; `origin` names the lower directory whose
  untouched children still show through it (None: an opaque, new directory);
- `Symlink`: a link with its raw target;
- `Special`: a FIFO, a unix socket's node or a device node;
- `Whiteout`: the lower entry is deleted.

Each but a whiteout may record its owner and its access and change times (`Meta`); files,
links and special files may share one inode with other paths of the manifest (`link`).

A path without an override shows the lower entry found through its parent's source.
Everything here is pure but spilling: a blob's file, and the folder that holds them.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import stat
import tempfile
import threading
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from ..paths import RelPath, is_within
from .mounts import filesystem_type

DEFAULT_MEMORY_BUDGET = 256 * 2**20

_blob_ids = itertools.count(1)


@dataclass(frozen=True, eq=False)
class Blob:
    """Immutable file content, in memory or spilled to a private file. Compared by identity.

    In memory, an older version's blob may come to keep its bytes as their change from a newer
    blob's (`shrink`): the same content, a fraction of the memory. Another process gets the
    bytes (`__reduce__`), never the chain."""

    id: str
    size: int
    data: bytes | None = None
    spill: str | None = None  # path of a file nobody else writes
    at: int = 0  # where in `spill` its bytes start (a segment holds many blobs)
    change: Change | None = field(default=None, repr=False)  # set by `shrink`, then data goes
    charge: Charge | None = field(default=None, repr=False)  # what the store counts for it

    def __reduce__(self) -> tuple[type[Blob], tuple[str, int, bytes | None, str | None, int]]:
        return Blob, (self.id, self.size, self._held(), self.spill, self.at)

    def _held(self) -> bytes | None:
        """The bytes in this process, whole or rebuilt from the change (None: spilled)."""
        data = self.data  # read once: `shrink` may drop it meanwhile (its change is set first)
        return data if data is not None or self.change is None else self.change.bytes()

    def read(self, offset: int = 0, size: int = -1) -> bytes:
        end = self.size if size < 0 else min(self.size, offset + size)
        data = self._held()
        if data is not None:
            return data[offset:end]
        assert self.spill is not None
        with open(self.spill, "rb") as f:
            return os.pread(f.fileno(), end - offset, self.at + offset) if end > offset else b""

    def bytes(self) -> bytes:
        return self.read()

    def shrink(self, newer: Blob, prefix: int, suffix: int, run: int = 1) -> None:
        """Keep this blob's bytes (in memory) as newer's with its middle replaced: they share
        `prefix` bytes at the start and then `suffix` at the end (`run`: see `Change`).
        Readers in other threads see the bytes or the change, never neither."""
        data = self.data
        assert data is not None and prefix + suffix <= min(len(data), newer.size)
        middle = data[prefix : len(data) - suffix]
        object.__setattr__(self, "change", Change(newer, prefix, suffix, middle, run))
        object.__setattr__(self, "data", None)
        if self.charge is not None:
            self.charge.move(len(middle))

    @property
    def in_memory(self) -> bool:
        """Its bytes are in this process (whole, or as a change), not in a spill file."""
        return self.data is not None or self.change is not None

    # Identity is the id, so a blob stays itself across the control channel's pickling.
    def __eq__(self, other: object) -> bool:
        return isinstance(other, Blob) and other.id == self.id

    def __hash__(self) -> int:
        return hash(self.id)


@dataclass(frozen=True)
class Change:
    """Bytes as a newer blob's with a middle replaced: newer[:prefix] + middle +
    newer[size - suffix:]. `run`: the changes in a row that end with this one (each older one's
    newer blob is the next), so reading the oldest goes through `run` of them to this one's
    newer blob; whoever shrinks blobs keeps it bounded."""

    newer: Blob
    prefix: int
    suffix: int
    middle: bytes
    run: int

    def bytes(self) -> bytes:
        newer = memoryview(self.newer.bytes())
        return b"".join((newer[: self.prefix], self.middle, newer[len(newer) - self.suffix :]))


class Charge:
    """The bytes a store counts against its budget for one blob, until the blob goes."""

    def __init__(self, store: BlobStore, size: int) -> None:
        self.store, self.size = store, size

    def move(self, size: int) -> None:
        self.store.account(size - self.size)
        self.size = size

    def end(self) -> None:
        self.move(0)


class BlobStore:
    """Makes blobs, keeping at most `memory_budget` bytes in memory and spilling the rest.

    Spill files live in a private (0700) temporary directory, so the overlay process
    can read them by path without a copy through the control channel. Blobs spilled by
    `make` are appended to a segment, a spill file of up to `SEGMENT` bytes that goes when
    its last blob does: creating a file per blob cost 0.5-1.2 ms of CPU on ext4 (a version
    of more-itertools' more.py, past the budget), more than staging the version. The
    overlay process keeps a file per blob (`file_per_blob`): it hands its blobs over, and
    the taker owns their files.
    """

    def __init__(
        self, memory_budget: int = DEFAULT_MEMORY_BUDGET, spill_dir: str | None = None,
        file_per_blob: bool = False,
    ) -> None:  # fmt: skip
        self.memory_budget = memory_budget
        self.in_memory = 0
        self._owns_dir = spill_dir is None
        self.spill_dir = spill_dir or new_spill_dir()
        self.file_per_blob = file_per_blob
        self._lock = threading.Lock()
        self._segment: Segment | None = None

    def close(self) -> None:
        """Remove the spill directory this store made (blobs spilled there become unreadable)."""
        with self._lock:
            if self._segment is not None:
                self._segment.seal()
                self._segment = None
        if self._owns_dir:
            shutil.rmtree(self.spill_dir, ignore_errors=True)
            _remove_if_empty(os.path.dirname(self.spill_dir))

    def make(self, data: bytes) -> Blob:
        with self._lock:
            in_memory = self.in_memory + len(data) <= self.memory_budget
            if in_memory:
                self.in_memory += len(data)
        if in_memory:
            charge = Charge(self, len(data))
            blob = Blob(_new_id(), len(data), data=bytes(data), charge=charge)
            weakref.finalize(blob, charge.end)
            return blob
        if not self.file_per_blob:
            return self._append(data)
        path = self.spill_path()
        with open(path, "wb") as f:
            f.write(data)
        return self.adopt(path, len(data))

    def _append(self, data: bytes) -> Blob:
        """A blob spilled into the current segment (a new one when it is full)."""
        with self._lock:
            segment = self._segment
            if segment is None or not segment.fits(len(data)):
                if segment is not None:
                    segment.seal()
                segment = self._segment = Segment(self.spill_path())
            at = segment.reserve(len(data))
        try:
            segment.write(data, at)
        except BaseException:  # a full disk, say: the segment does not wait for this blob
            segment.release()
            raise
        blob = Blob(_new_id(), len(data), spill=segment.path, at=at)
        weakref.finalize(blob, segment.release)
        return remember(blob)

    def adopt(self, path: str, size: int) -> Blob:
        """A blob for a spill file already written; the file goes when the blob does."""
        blob = Blob(_new_id(), size, spill=path)
        weakref.finalize(blob, _remove, path)
        return remember(blob)

    def take(self, blob: Blob) -> Blob:
        """This process's blob for one an overlay handed back (a file a run renamed or
        chmodded keeps its blob): the blob itself while it lives, so its file keeps one
        owner; else the overlay's own (its buffer's) content, now ours. One of ours that went
        since is referred to, never owned: its file went with it, or is a segment that holds
        other blobs and goes with the last of them."""
        if blob.in_memory:
            return self.make(blob.bytes())
        assert blob.spill is not None
        known = _spilled.get(blob.id)
        if known is not None:
            return known
        if _made_here(blob.id):
            return Blob(blob.id, blob.size, spill=blob.spill, at=blob.at)
        return self.adopt(blob.spill, blob.size)

    def account(self, delta: int) -> None:
        with self._lock:
            self.in_memory += delta

    def spill_path(self) -> str:
        fd, path = tempfile.mkstemp(dir=self.spill_dir, prefix="blob-")
        os.close(fd)
        return path


SEGMENT = 64 * 2**20  # bytes of blobs a segment takes before the next one starts


class Segment:
    """One spill file holding many blobs, appended to; it goes once it is sealed (the next
    segment started) and its last blob went. A reader holding it open (the overlay, see
    content.py) keeps reading it after that, as with a file per blob."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.end = 0  # bytes reserved so far
        self.live = 0  # blobs in it that still exist
        self.sealed = False
        self._fd: int | None = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
        self._lock = threading.RLock()  # a blob's finalizer may run in any thread, any time

    def fits(self, size: int) -> bool:
        return self.end == 0 or self.end + size <= SEGMENT

    def reserve(self, size: int) -> int:
        """Where a blob of `size` bytes goes (under the store's lock)."""
        at, self.end = self.end, self.end + size
        with self._lock:
            self.live += 1
        return at

    def write(self, data: bytes, at: int) -> None:
        view, fd = memoryview(data), self._fd
        assert fd is not None
        while view:
            view = view[os.pwrite(fd, view, at + len(data) - len(view)) :]

    def seal(self) -> None:
        with self._lock:
            self.sealed = True
            self._remove_if_unused()

    def release(self) -> None:
        """One of its blobs went."""
        with self._lock:
            self.live -= 1
            self._remove_if_unused()

    def _remove_if_unused(self) -> None:
        if self.sealed and self.live == 0 and self._fd is not None:
            os.close(self._fd)
            self._fd = None
            _remove(self.path)


SPILL_PREFIX = "shadowkernel-spill-"
SPILLS = "shadowkernel-spills-"  # + the uid: one user's spill folders (a run hides it whole)
ON_DISK_TEMP = "/var/tmp"  # temporary files kept on disk, by convention (FHS)


def new_spill_dir() -> str:
    """A private folder for spill files, named by this process's pid, in `spill_parent()`.
    The folders of dead processes (a killed kernel's: SIGKILL runs no cleanup) go first;
    nothing else removes them, and each may hold hundreds of megabytes."""
    root = spill_root()  # once: it reads the mount table
    for _ in range(3):  # the user's folder went between making it and making ours in it
        parent = spill_parent(root)
        for folder in dict.fromkeys([parent, root]):  # the root: older versions'
            with contextlib.suppress(OSError):
                for name in os.listdir(folder):
                    pid = _spill_pid(name)
                    if pid is not None and process_gone(pid):
                        _remove_own_folder(os.path.join(folder, name))
        with contextlib.suppress(FileNotFoundError):
            return tempfile.mkdtemp(prefix=f"{SPILL_PREFIX}{os.getpid()}-", dir=parent)
    return tempfile.mkdtemp(prefix=f"{SPILL_PREFIX}{os.getpid()}-", dir=root)


def spill_parent(root: str) -> str:
    """This user's folder of spill folders in `root` (`spill_root()`), made 0700 when
    missing: a run hides it whole, so what a kernel started during the run spills stays out
    of its sight too. The root itself where that name is something else (another's folder,
    a link)."""
    parent = os.path.join(root, f"{SPILLS}{os.geteuid()}")
    with contextlib.suppress(FileExistsError):
        os.mkdir(parent, 0o700)
    try:
        info = os.lstat(parent)
    except OSError:
        return root
    private = stat.S_ISDIR(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o700
    return parent if private and info.st_uid == os.geteuid() else root


def spill_root() -> str:
    """The temporary directory, unless it keeps its files in memory while nobody chose it
    ($TMPDIR unset) and ON_DISK_TEMP is a writable folder on disk: /tmp is a tmpfs on Debian
    13, Fedora and Arch, where bytes spilled past the memory budget would stay in memory."""
    temp = tempfile.gettempdir()
    if "TMPDIR" in os.environ or filesystem_type(temp) != "tmpfs":
        return temp
    writable = os.path.isdir(ON_DISK_TEMP) and os.access(ON_DISK_TEMP, os.W_OK | os.X_OK)
    return ON_DISK_TEMP if writable and filesystem_type(ON_DISK_TEMP) != "tmpfs" else temp


def _spill_pid(name: str) -> int | None:
    """The pid in a spill folder's name (`shadowkernel-spill-<pid>-<random>`), or None."""
    pid, dash, _ = name.removeprefix(SPILL_PREFIX).partition("-")
    return int(pid) if name.startswith(SPILL_PREFIX) and dash and pid.isdigit() else None


def process_gone(pid: int) -> bool:
    """No process has `pid` now (one of another user's is there: not gone). What a killed
    process left, named by its pid, may be removed then: spill folders, accept's temp files."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def _remove_if_empty(parent: str) -> None:
    """The user's folder of spill folders goes with the last of them (another process may be
    making one in it: then it is not empty, or that process makes the folder again)."""
    if os.path.basename(parent).startswith(SPILLS):
        with contextlib.suppress(OSError):
            os.rmdir(parent)


def _remove_own_folder(path: str) -> None:
    with contextlib.suppress(OSError):
        if os.lstat(path).st_uid == os.getuid():
            shutil.rmtree(path, ignore_errors=True)


# This process's spilled blobs by id, while they live: an id that comes back from an overlay
# names one of them (ids carry the pid of the process that made them).
_spilled: weakref.WeakValueDictionary[str, Blob] = weakref.WeakValueDictionary()


def remember(blob: Blob) -> Blob:
    """Make a spilled blob of this process known to `BlobStore.take`."""
    _spilled[blob.id] = blob
    return blob


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _new_id() -> str:
    return f"{os.getpid()}-{next(_blob_ids)}"


def _made_here(blob_id: str) -> bool:
    """The blob was made by this process (`_new_id`), not by an overlay that handed it over."""
    return blob_id.startswith(f"{os.getpid()}-")


def new_link() -> str:
    """A hard-link group id, unique across processes (like a blob's id)."""
    return "link-" + _new_id()


def with_blob(override: File, blob: Blob) -> File:
    """`override` with other content; direct, as `replace()` costs microseconds each."""
    o = override
    return File(blob, o.origin, o.mode, o.mtime_ns, uid=o.uid, gid=o.gid, atime_ns=o.atime_ns,
                ctime_ns=o.ctime_ns, link=o.link)  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class Meta:
    """What every entry but a whiteout records beside its content (keyword-only, last)."""

    uid: int | None = None  # None: the owner of the user's folder, as before owners existed
    gid: int | None = None
    atime_ns: int | None = None  # None: the same as mtime_ns
    ctime_ns: int | None = None  # None: the same as mtime_ns


@dataclass(frozen=True, kw_only=True)
class Linkable(Meta):
    # The paths of a manifest with the same `link` are one inode (hard links): they hold
    # equal overrides, and their count is the inode's link count. None: not linked.
    link: str | None = None


@dataclass(frozen=True)
class File(Linkable):
    blob: Blob | None = None
    origin: RelPath | None = None  # lower file supplying the bytes when blob is None
    mode: int = 0o644
    mtime_ns: int = 0


@dataclass(frozen=True)
class Dir(Meta):
    origin: RelPath | None = None  # lower directory whose children show through
    mode: int = 0o755
    mtime_ns: int = 0


@dataclass(frozen=True)
class Symlink(Linkable):
    target: bytes
    mtime_ns: int = 0


@dataclass(frozen=True)
class Special(Linkable):
    """A FIFO, a unix socket's node, or a device node; `mode` includes the file type."""

    mode: int
    rdev: int = 0
    mtime_ns: int = 0


@dataclass(frozen=True)
class Whiteout:
    def __reduce__(self) -> str:
        return "WHITEOUT"  # one whiteout per process, also across the control channel


WHITEOUT = Whiteout()

Override = File | Dir | Symlink | Special | Whiteout
Manifest = Mapping[RelPath, Override]
EMPTY: Manifest = MappingProxyType({})


def freeze(entries: Mapping[RelPath, Override]) -> Manifest:
    """A read-only manifest; one that is already frozen passes through (switches are hot)."""
    if isinstance(entries, MappingProxyType):
        return entries
    return MappingProxyType(dict(entries))


Delta = Mapping[RelPath, "Override | None"]  # path -> its new override, None: no override


def delta(old: Manifest, new: Manifest) -> dict[RelPath, Override | None]:
    """What turns `old` into `new`. Identity is checked first: the versions of a branch share
    the overrides they did not change, so two large manifests compare at C speed."""
    if old is new:
        return {}
    was = old.get
    out: dict[RelPath, Override | None] = {p: o for p, o in new.items() if was(p) is not o}
    for path in [p for p, o in out.items() if was(p) == o]:  # equal copies: rare
        del out[path]
    out.update(dict.fromkeys(old.keys() - new.keys()))
    return out


def patched(manifest: Manifest, changes: Delta) -> Manifest:
    """`manifest` with `changes` applied."""
    # A frozen manifest copies its dict at C speed (25x faster than dict() over the proxy).
    out = manifest.copy() if isinstance(manifest, MappingProxyType) else dict(manifest)
    for path, override in changes.items():
        if override is None:
            out.pop(path, None)
        else:
            out[path] = override
    return MappingProxyType(out)


def changed_paths(old: Manifest, new: Manifest) -> list[RelPath]:
    """Paths whose override differs between two manifests (the cost of a switch)."""
    return sorted(delta(old, new))


# -- resolution ---------------------------------------------------------------------------


def lower_source(entries: Mapping[RelPath, Override], path: RelPath) -> RelPath | None:
    """The lower path that supplies `path` (its bytes or its children), or None.

    None means the entry, or one of its ancestors, is new, deleted or opaque: nothing
    of the user's folder shows through there. This runs on every lookup and open, so it
    walks up with `rfind` instead of recursing through `dirname`.
    """
    probe = path
    while probe:
        override = entries.get(probe)
        if override is not None:
            origin = override.origin if isinstance(override, (File, Dir)) else None
            return None if origin is None else RelPath(origin + path[len(probe) :])
        probe = RelPath(probe[: max(probe.rfind("/"), 0)])
    return path


def paths_below(keys: Mapping[RelPath, object], path: RelPath, is_dir: bool) -> list[RelPath]:
    """`path` and, for a directory, every key below it (a scan only directories pay)."""
    if not is_dir:
        return [path] if path in keys else []
    return [p for p in keys if is_within(p, path)]
