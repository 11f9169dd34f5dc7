"""Versions, and staging edits into the overrides a version's manifest holds (pure).

A branch's state is a chain of immutable versions. A version records the bytes of every path
the branch touched (None: deleted) and the manifest the shadow shows for it; a new version
shares every override it did not change with the one before, so a switch between them costs
only the changed paths (DESIGN invariant 2).

A version's bytes of a path a later version changed are kept as its manifest's blob alone
(`Files.release`): where that blob spilled past the memory budget, the bytes leave memory and
are read back from the spill file when asked for; where it is in memory and the change was
small (`small_change`), the blob keeps only its change from the next version's (`Blob.shrink`,
at most `DELTA_RUN` in a row before one stays whole). A long history then costs memory for its
changes, not a copy of the file per version (an agent's 100 edits of a 175 KB file held
17 MB), and the bytes a new version takes come from freed memory, not from new pages.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from ..errors import ShadowError, StagingError
from ..lsp import LineMap, line_map
from ..overlay.store import WHITEOUT, Blob, Dir, File, Manifest, Override, Symlink, freeze
from ..paths import RelPath, parent
from ..sched import Snapshot
from ..text.content import decode
from ..text.ends import ends

DELTA_MIN = 16 * 1024  # a file at least this long may be kept as its change from another ...
DELTA_SHARE = 8  # ... when its changed middle is at most 1/DELTA_SHARE of it
DELTA_RUN = 64  # versions of a path kept as changes in a row: reading one joins at most this many

DEFAULT_MODE = 0o644
LINK = 0o120000  # a path's mode when it is a symlink: its bytes are the link's target (as in git)


class Files(Mapping[RelPath, "bytes | None"]):
    """A version's touched paths and their bytes (None: deleted), read-only. An entry may be
    `release`d to the blob holding the same bytes (then read back from it), and each path's
    line map against a base is kept here, with the version, not in a cache that would keep
    the bytes of every version alive."""

    __slots__ = ("_entries", "_maps")

    def __init__(self, entries: Mapping[RelPath, bytes | Blob | None]) -> None:
        self._entries: dict[RelPath, bytes | Blob | None] = dict(entries)
        self._maps: dict[RelPath, tuple[bytes, LineMap]] = {}

    def __getitem__(self, path: RelPath) -> bytes | None:
        data = self._entries[path]
        return _read_back(path, data) if isinstance(data, Blob) else data

    def __contains__(self, path: object) -> bool:
        return path in self._entries

    def __iter__(self) -> Iterator[RelPath]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Files({sorted(self._entries)})"

    def present(self, path: RelPath) -> bool:
        """`path` was touched and not deleted (its bytes are not read back to tell)."""
        return self._entries.get(path) is not None

    def held(self, path: RelPath) -> bytes | None:
        """The bytes object kept in memory for `path` (None: released, deleted or absent)."""
        data = self._entries.get(path)
        return data if isinstance(data, bytes) else None

    def release(self, path: RelPath, blob: Blob) -> None:
        """Keep `path`'s bytes as `blob` alone (a blob spilled to a file: they leave memory)."""
        if isinstance(self._entries.get(path), bytes):
            self._entries[path] = blob

    def line_map(self, path: RelPath, base: bytes) -> LineMap:
        """How `path`'s lines here map to `base`'s, computed once per base (by identity: a
        branch's base is one bytes object, hashing 175 KB per lint is not needed)."""
        memo = self._maps.get(path)
        if memo is not None and memo[0] is base:
            return memo[1]
        found = line_map(base, self[path] or b"")
        self._maps[path] = (base, found)
        return found

    def has_line_map(self, path: RelPath, base: bytes) -> bool:
        memo = self._maps.get(path)
        return memo is not None and memo[0] is base

    def hold(self, path: RelPath) -> None:
        """Keep `path`'s bytes in memory again if it was released (a restored head's)."""
        data = self._entries.get(path)
        if isinstance(data, Blob):
            self._entries[path] = _read_back(path, data)

    def changed(self, data: Mapping[RelPath, bytes | Blob | None]) -> Files:
        """The next version's files: these with `data` over them (a blob: bytes read back
        from it when asked; line maps of the paths `data` leaves alone carry over: their
        bytes are the same objects)."""
        out = Files({**self._entries, **data})
        out._maps = {p: memo for p, memo in self._maps.items() if p not in data}
        return out


def _read_back(path: RelPath, blob: Blob) -> bytes:
    try:
        return blob.bytes()
    except OSError as error:
        raise ShadowError(
            f"an earlier version's bytes of {path!r} were spilled past the memory budget to "
            f"{blob.spill} and cannot be read back ({error.strerror}): spill files go when "
            "their workspace closes; read old versions while it is open"
        ) from None


@dataclass(frozen=True)
class Version:
    """One immutable state of a branch."""

    number: int
    files: Files  # every touched path -> bytes (None: deleted)
    manifest: Manifest = field(repr=False)  # what the shadow shows for it (its blobs' bytes)
    op: str  # what made it: "fork", "write pkg/mod.py", "patch (2 files)", ...
    # the mode of each touched path whose mode the branch set (else its base's mode);
    # LINK: a symlink whose target is the path's bytes
    modes: Mapping[RelPath, int] = field(default_factory=lambda: MappingProxyType({}))


Ends = tuple[int, int]  # the bytes two contents share at their start, then at their end


def changes_from(files: Files, data: Mapping[RelPath, bytes | Blob | None]) -> dict[RelPath, Ends]:
    """For each path of `data` whose bytes in `files` (the head's) are held and large, what the
    new bytes share with them (`text.ends`: compares in C, no copy): found once per staging,
    for the durable record's change and for keeping the superseded bytes as a change."""
    out = {}
    for path, new in data.items():
        old = files.held(path)
        if old is not None and isinstance(new, bytes) and min(len(old), len(new)) >= DELTA_MIN:
            out[path] = ends(old, new)
    return out


def small_change(size: int, shared: Ends) -> bool:
    """Content of `size` bytes sharing `shared` with another is worth keeping as its change."""
    return (size - sum(shared)) * DELTA_SHARE <= size


def n_files(n: int) -> str:
    """How a version's op counts files: "1 file", "3 files"."""
    return f"{n} file" if n == 1 else f"{n} files"


def digest(data: bytes | None) -> str:
    """A short content key (base blobs and base lints are shared per path and content)."""
    return "-" if data is None else hashlib.blake2b(data, digest_size=16).hexdigest()


def staged(
    manifest: Manifest,
    data: Mapping[RelPath, bytes | Blob | None],
    modes: Mapping[RelPath, int],
    make: Callable[[bytes], Blob],
    is_user_dir: Callable[[RelPath], bool],
) -> Manifest:
    """`manifest` with each path's new bytes (None: a whiteout; a blob: bytes already in
    one, as a restore gives them) as overrides."""
    out: dict[RelPath, Override] = dict(manifest)
    now = time.time_ns()
    for path, content in data.items():
        if content is None:
            out[path] = WHITEOUT
            continue
        mode = modes.get(path, DEFAULT_MODE)
        if mode == LINK:
            out[path] = Symlink(content.bytes() if isinstance(content, Blob) else content, now)
        else:
            blob = content if isinstance(content, Blob) else make(content)
            out[path] = File(blob, None, mode, now)
        folder = parent(path)
        # a new folder (nothing shows through it), also where the branch deleted a file
        while folder and out.get(folder, WHITEOUT) is WHITEOUT and not is_user_dir(folder):
            out[folder] = Dir(origin=None)
            folder = parent(folder)
    return freeze(out)


def texts(version: Version) -> dict[RelPath, str]:
    """The version's staged text files (what servers open); binary files (with NUL bytes)
    and links are not. A file that is not UTF-8 (Latin-1 source, say) opens with its
    undecodable bytes replaced, as a server reading it from the disk would see it: linted,
    not silently left out, with or without a mount."""
    out = {}
    for path, data in version.files.items():
        if data is None or version.modes.get(path) == LINK:
            continue
        try:
            out[path] = RECENT_TEXTS.text(data)
        except UnicodeDecodeError:
            if b"\0" not in data:
                out[path] = data.decode("utf-8", "replace")
    return out


class RecentTexts:
    """The text each new version's bytes were staged from, by the bytes object's identity,
    until it is first read (up to `budget` bytes): the lint that follows a write opens that
    text without decoding the file again (0.2-0.8 ms for a 175 KB file that is not ASCII),
    and nothing stays behind once it did. Thread-safe; an entry holds its bytes, so their id
    cannot be reused while it lives."""

    def __init__(self, budget: int) -> None:
        self._budget, self._size = budget, 0
        self._lock = threading.Lock()
        self._entries: OrderedDict[int, tuple[bytes, str]] = OrderedDict()

    def remember(self, data: bytes, text: str) -> None:
        with self._lock:
            if (old := self._entries.pop(id(data), None)) is not None:
                self._size -= len(old[0])
            self._entries[id(data)] = (data, text)
            self._size += len(data)
            while self._size > self._budget:
                self._size -= len(self._entries.popitem(last=False)[1][0])

    def text(self, data: bytes) -> str:
        with self._lock:
            entry = self._entries.pop(id(data), None)
            if entry is not None:
                self._size -= len(entry[0])
        return entry[1] if entry is not None else data.decode("utf-8")


RECENT_TEXTS = RecentTexts(16 * 2**20)


def is_text(data: bytes) -> bool:
    """Whether bytes are editable text (UTF-8 without NUL bytes), as `text.content` decides."""
    if b"\0" in data:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def version_snapshot(uid: int, version: Version) -> Snapshot:
    """What the scheduler shows for a branch's version: its manifest and its open documents."""
    documents = texts(version)
    return Snapshot(("branch", uid, version.number), version.manifest, documents)


def base_snapshot(
    bases: Mapping[RelPath, bytes | None],
    modes: Mapping[RelPath, int],
    base_blob: Callable[[RelPath, bytes], Blob],
) -> Snapshot:
    """A branch's base: its touched files as they were at first touch. Branches with the same
    bases share one key (and so one snapshot and one base-lint answer)."""
    manifest: dict[RelPath, Override] = {}
    documents: dict[RelPath, str] = {}
    for path in sorted(bases):
        base = bases[path]
        if base is None:
            manifest[path] = WHITEOUT
            continue
        mode = modes.get(path, DEFAULT_MODE)
        if mode == LINK:
            manifest[path] = Symlink(base)
            continue
        manifest[path] = File(base_blob(path, base), None, mode, 0)
        with contextlib.suppress(StagingError):
            documents[path] = decode(base, path)
    key = ("base", tuple((p, digest(bases[p])) for p in sorted(bases)))
    return Snapshot(key, freeze(manifest), documents)
