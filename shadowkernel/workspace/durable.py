"""The durable store: a folder's branches on disk, so they outlive the process.

In the folder's state directory (`statedir`): `blobs/` holds content by its SHA-256, and
`record.sqlite` (SQLite in WAL mode) an append-only record of what each branch did: its fork,
each version (the bytes it staged and the bases of the paths it touched first, as blob hashes),
what runs wrote into its scratch layer, new bases after accept. A drop deletes the branch's
records in one transaction. Restoring replays the record in order.

Sync policy ("full", the default): a blob is written to a temporary file and renamed into
place; before the record that names it is committed, the new blobs are fsync'ed (one each; a
record naming more than FSYNC_EACH new blobs, as a run's scratch may, syncs their file system
once with syncfs instead) and so is their directory; commits run with `synchronous=FULL`,
which fsyncs the WAL. So a staging call returns only when its version survives a crash of the
process and of the machine. "normal" (benchmarks only) skips the blob syncs and uses
`synchronous=NORMAL`: still safe against a crash of the process, not against a power loss.
`benchmarks/durable.py` measures both. Records are written one at a time (a record's blobs
are synced before any other record commits).

A crash can leave a blob nobody names (written, record not committed) or a temporary file:
restoring removes both. What is not restored: the timeline's events (they describe requests
of a process that is gone), a merged branch's `conflicts`, and the mtimes of staged files
(a restored version's files show the time of the restore).
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import dataclasses
import hashlib
import json
import logging
import os
import sqlite3
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ..errors import PathError, ShadowError, StagingError
from ..overlay.store import WHITEOUT, Blob, Dir, File, Override, Special, Symlink
from ..paths import RelPath
from . import statedir
from .folder import Folder
from .staging import Version
from .state import Base, BranchState

log = logging.getLogger(__name__)

Put = Callable[[bytes | None], str | None]  # bytes -> the hash of their blob (None: None)

SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    branch TEXT NOT NULL,   -- the branch's key
    kind TEXT NOT NULL,     -- fork, version, scratch, rebase
    body TEXT NOT NULL      -- JSON
);
CREATE INDEX IF NOT EXISTS records_by_branch ON records (branch);
"""

DELETE = "DELETE FROM records WHERE branch = ?"
INSERT = "INSERT INTO records (branch, kind, body) VALUES (?, ?, ?)"
SELECT = "SELECT branch, kind, body FROM records ORDER BY seq"
SYNC_MODES = {"full": "FULL", "normal": "NORMAL"}
FSYNC_EACH = 16  # a record naming more new blobs syncs their file system once instead
SYNC = "full"  # the policy of stores a Workspace opens (benchmarks/durable.py compares both)


class Blobs:
    """Content-addressed files named by their SHA-256. `put` writes one (a temporary file
    renamed into place, so a name never holds half its content); `sync` makes what was put
    since the last sync durable, before a record names it."""

    def __init__(self, path: str, fsync: bool) -> None:
        self.path, self.fsync = path, fsync
        self.pending: list[str] = []  # written since the last sync
        os.makedirs(path, mode=0o700, exist_ok=True)

    def put(self, data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        target = os.path.join(self.path, digest)
        if os.path.exists(target):  # synced before a record named it (or swept at restore)
            return digest
        fd, temp = tempfile.mkstemp(dir=self.path, prefix="tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(temp, target)
        except BaseException:
            _unlink(temp)
            raise
        self.pending.append(target)
        return digest

    def sync(self) -> None:
        """A few new files: an fsync each; many (what a run wrote): one syncfs of their file
        system, cheaper than hundreds of fsyncs. Then the directory, for the renames."""
        if not self.fsync or not self.pending:
            self.pending.clear()
            return
        if len(self.pending) <= FSYNC_EACH:
            for path in self.pending:
                _fsync(path, os.O_RDONLY)
        else:
            _syncfs(self.path)
        _fsync(self.path, os.O_RDONLY | os.O_DIRECTORY)
        self.pending.clear()

    def get(self, digest: str) -> bytes:
        with open(os.path.join(self.path, digest), "rb") as f:
            return f.read()

    def keep_only(self, wanted: set[str]) -> int:
        """Remove what no record names (and crashed writes' temporary files)."""
        removed = 0
        for name in os.listdir(self.path):
            if name not in wanted:
                _unlink(os.path.join(self.path, name))
                removed += 1
        return removed


def _fsync(path: str, flags: int) -> None:
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _syncfs(path: str) -> None:
    """syncfs(2) of the file system holding `path` (Linux); sync(2) elsewhere."""
    syncfs = getattr(ctypes.CDLL(None, use_errno=True), "syncfs", None)
    if syncfs is None:
        os.sync()
        return
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if syncfs(fd) != 0:
            raise OSError(ctypes.get_errno(), "syncfs failed", path)
    finally:
        os.close(fd)


def _unlink(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


class DurableStore:
    """A folder's branches in its state directory `path`; implements `state.Journal`.

    Opening takes the directory's lock (statedir.claim); `close()` releases it.
    """

    def __init__(self, path: str, root: str, sync: str | None = None) -> None:
        sync = SYNC if sync is None else sync
        if sync not in SYNC_MODES:
            raise ValueError(f"sync={sync!r}: one of {sorted(SYNC_MODES)}")
        self.path = path
        self._lock_fd = statedir.claim(path, root)
        self._mutex = threading.Lock()
        try:
            self.blobs = Blobs(os.path.join(path, "blobs"), fsync=sync == "full")
            self._db = sqlite3.connect(os.path.join(path, "record.sqlite"),
                                       isolation_level=None, check_same_thread=False)  # fmt: skip
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={SYNC_MODES[sync]}")
            self._db.executescript(SCHEMA)
        except BaseException:
            os.close(self._lock_fd)
            raise

    def close(self) -> None:
        with self._mutex:
            if self._lock_fd < 0:
                return
            self._db.close()
            os.close(self._lock_fd)
            self._lock_fd = -1

    # -- the journal: each call returns once its record is durable ---------------------------

    def fork(self, state: BranchState) -> None:
        self._record(state, "fork", lambda put: {"name": state.name})

    def version(
        self, state: BranchState, version: Version, data: Mapping[RelPath, bytes | None],
        bases: Mapping[RelPath, Base],
    ) -> None:  # fmt: skip
        self._record(state, "version", lambda put: {
            "number": version.number, "op": version.op,
            "data": {p: put(d) for p, d in data.items()},
            "bases": {p: [put(b), mode] for p, (b, mode) in bases.items()},
            "modes": dict(version.modes),
        })  # fmt: skip

    def scratch(self, state: BranchState, written: Mapping[RelPath, Override | None]) -> None:
        self._record(state, "scratch", lambda put: encode_scratch(written, put))

    def rebase(self, state: BranchState, bases: Mapping[RelPath, Base]) -> None:
        self._record(state, "rebase", lambda put: {p: [put(b), m] for p, (b, m) in bases.items()})

    def drop(self, state: BranchState) -> None:
        self._guarded(lambda: self._db.execute(DELETE, (state.key,)))

    def _record(self, state: BranchState, kind: str, body: Callable[[Put], Any]) -> None:
        """Write the blobs `body` names, make them durable, then commit the record (one
        statement in autocommit: one transaction, durable when it returns)."""

        def step() -> None:
            text = json.dumps(body(self._put), separators=(",", ":"))
            self.blobs.sync()
            self._db.execute(INSERT, (state.key, kind, text))

        self._guarded(step)

    def _put(self, data: bytes | None) -> str | None:
        return None if data is None else self.blobs.put(data)

    def _guarded(self, step: Callable[[], object]) -> None:
        """One change at a time (a record's blobs are synced before any other record commits);
        a failure is a StagingError and the caller changes nothing."""
        with self._mutex:
            if self._lock_fd < 0:
                raise StagingError(f"the durable store at {self.path} is closed")
            try:
                step()
            except (sqlite3.Error, OSError) as error:
                raise StagingError(f"could not record the change in {self.path}: {error}; "
                                   "nothing changed") from None  # fmt: skip

    # -- restore ---------------------------------------------------------------------------------

    def restore(self, folder: Folder, make: Callable[[bytes], Blob]) -> list[BranchState]:
        """Every branch the record holds, in the order they forked, without a journal attached;
        blobs no record names are removed."""
        states: dict[str, BranchState] = {}
        wanted: set[str] = set()
        read = _cached(self.blobs.get)
        try:
            for key, kind, body in self._records():
                wanted.update(_hashes(kind, body))
                if kind == "fork":
                    states[key] = BranchState(body["name"], key)
                elif key in states:
                    _replay(states[key], kind, body, folder, make, read)
        except (OSError, sqlite3.Error, LookupError, TypeError, ValueError) as error:
            raise PathError(f"state directory {self.path}: cannot restore its branches ({error!r});"
                            " open with restore=False to start empty (deleting nothing), or "
                            "choose another state=DIR") from None  # fmt: skip
        removed = self.blobs.keep_only(wanted)
        if removed:
            log.info("%s: removed %d blobs no record names", self.path, removed)
        return list(states.values())

    def sweep(self) -> None:
        """Remove the blobs no record names (what a crash left), without restoring."""
        wanted = {h for _, kind, body in self._records() for h in _hashes(kind, body)}
        self.blobs.keep_only(wanted)

    def _records(self) -> Iterator[tuple[str, str, Any]]:
        with self._mutex:
            rows = self._db.execute(SELECT).fetchall()
        for key, kind, body in rows:
            yield key, kind, json.loads(body)


def _cached(read: Callable[[str], bytes]) -> Callable[[str | None], bytes | None]:
    cache: dict[str, bytes] = {}

    def get(digest: str | None) -> bytes | None:
        if digest is None:
            return None
        if digest not in cache:
            cache[digest] = read(digest)
        return cache[digest]

    return get


def _replay(
    state: BranchState, kind: str, body: Any, folder: Folder, make: Callable[[bytes], Blob],
    read: Callable[[str | None], bytes | None],
) -> None:  # fmt: skip
    """Apply one record to a restored branch (no journal is attached yet)."""
    if kind == "version":
        data = {RelPath(p): read(h) for p, h in body["data"].items()}
        bases = {RelPath(p): (read(h), mode) for p, (h, mode) in body["bases"].items()}
        modes = {RelPath(p): m for p, m in body.get("modes", {}).items()}
        state.append(state.next_version(data, body["op"], bases, modes, folder, make), data, bases)
    elif kind == "scratch":
        state.absorb({RelPath(p): decode_override(o, make, read) for p, o in body.items()})
    elif kind == "rebase":
        state.rebase({RelPath(p): (read(h), m) for p, (h, m) in body.items()})
    else:
        raise ShadowError(f"unknown record {kind!r} in a durable store (a newer shadowkernel?)")


def _hashes(kind: str, body: Any) -> Iterator[str]:
    """The blobs a record names."""
    if kind == "version":
        yield from (h for h in body["data"].values() if h)
        yield from (h for h, _ in body["bases"].values() if h)
    elif kind == "rebase":
        yield from (h for h, _ in body.values() if h)
    elif kind == "scratch":
        yield from (o["blob"] for o in body.values() if o and o.get("blob"))


# -- overrides as JSON (what runs wrote into the scratch layer) ---------------------------------

KINDS: dict[str, type] = {"file": File, "dir": Dir, "symlink": Symlink, "special": Special}


def encode_scratch(written: Mapping[RelPath, Override | None], put: Put) -> dict[str, Any]:
    return {path: encode_override(override, put) for path, override in written.items()}


def encode_override(override: Override | None, put: Put) -> Any:
    """An override as JSON: its fields, a blob as its hash, a link target in base64."""
    if override is None or override is WHITEOUT:
        return None
    kind = next(k for k, t in KINDS.items() if isinstance(override, t))
    out: dict[str, Any] = {"kind": kind}
    for field in dataclasses.fields(override):  # type: ignore[arg-type]
        value = getattr(override, field.name)
        if isinstance(value, Blob):
            value = put(value.bytes())
        elif isinstance(value, bytes):
            value = base64.b64encode(value).decode()
        out[field.name] = value
    return out


def decode_override(data: Any, make: Callable[[bytes], Blob],
                    read: Callable[[str | None], bytes | None]) -> Override | None:  # fmt: skip
    if data is None:
        return None  # the scratch layer records a whiteout for it
    fields = dict(data)
    kind = KINDS[fields.pop("kind")]
    if kind is File and fields.get("blob"):
        fields["blob"] = make(read(fields["blob"]) or b"")
    if kind is Symlink:
        fields["target"] = base64.b64decode(fields["target"])
    override: Override = kind(**fields)
    return override
