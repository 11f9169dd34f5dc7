"""The durable store: a folder's branches on disk, so they outlive the process.

In the folder's state directory (`statedir`): `blobs/` holds content by its SHA-256, and
`record.sqlite` (SQLite in WAL mode) an append-only record of what each branch did: its fork,
each version (the bytes it staged and the bases of the paths it touched first, as blob hashes,
with the moments they were taken: a merge's base is the older of two), what runs wrote into
its scratch layer, new bases after accept. A drop deletes the branch's
records in one transaction. Restoring replays the record in order.

Sync policy. "behind" (the default): a staging call returns once its record and blobs are
written to the operating system (a blob to a temporary file renamed into place; the record
committed with `synchronous=NORMAL`), so it survives the crash of any process (DESIGN
invariant 8); a flusher thread then makes them survive a machine crash too, off the callers'
path: it fsyncs the new blobs (one each; more than FSYNC_EACH, as a run's scratch may write,
sync their file system once with syncfs instead) and their directory, then records the
watermark `flushed` (every record up to it has its blobs on disk) and fsyncs the WAL. A round
starts `FLUSH_LINGER` after the record that woke it; records written meanwhile or while it works
wait for it, so one round of fsyncs serves all of them (group commit: with 20 agents staging,
a round per version took up to 7% of this process's CPU). The flusher also copies the WAL
into the database once it passes `CHECKPOINT_BYTES`, on a connection of its own: the callers'
never checkpoints, so no staging waits for those fsyncs. "full": the caller waits for those
fsyncs before the record commits with `synchronous=FULL`. "normal" (benchmarks only) never fsyncs.

A power loss can leave records past the watermark whose blobs never reached the disk:
restoring ends such a branch at its last whole version (the rest is deleted, a warning
logged). A missing or torn blob at or below the watermark is damage: restore refuses, naming
the store. `benchmarks/durable.py` measures the policies.

A large file's version that changed a small part of the branch's previous content of that
path (its last version, else its base) is recorded as that change instead of a blob: the
lengths of the common prefix and suffix (found once while staging, `staging.changes_from`),
the new middle in base64, and the new length (`staging.DELTA_MIN`, `DELTA_SHARE`). An agent
editing a 5,644-line file then writes a few hundred bytes into the record per version, not a
250 KB blob to write, hash and fsync; restoring replays the change on the content the branch
had (records are replayed in order).

Restoring checks every blob the record names (each read and hashed once, by two threads,
before the replay) but copies none: a restored version's content is a blob reading a hard link
to the store's file in `restored/` (gone at close, and at the next open after a crash), read
when someone asks for that version. Only the heads' bytes and the bases come into memory, as
they were before the restart; a change record's content is rebuilt from the content before it
and kept as staging keeps a version's. Reopening after a long run (1,160 versions, 364 MB of
blobs) went from 1.8 s of CPU and 501 MB of PSS to 0.8 s and 179 MB (`benchmarks/durable.py`).

A crash can leave a blob nobody names (written, record not committed) or a temporary file:
restoring removes both. What is not restored: the timeline's events (they describe requests
of a process that is gone) and the mtimes of staged files (a restored version's files show the
time of the restore). A merge's conflicts are: its version's record lists them.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import dataclasses
import hashlib
import itertools
import json
import logging
import os
import shutil
import sqlite3
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..errors import PathError, ShadowError, StagingError
from ..overlay.store import WHITEOUT, Blob, Dir, File, Override, Special, Symlink, remember
from ..paths import RelPath
from ..text.ends import ends
from ..text.identity import IdentityCache
from . import statedir
from .folder import Folder
from .staging import DELTA_MIN, Ends, Version, small_change
from .state import MOMENTS, Base, BranchState, Conflicts

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
CREATE TABLE IF NOT EXISTS flushed (seq INTEGER NOT NULL);  -- one row: the watermark
INSERT INTO flushed SELECT COALESCE(MAX(seq), 0) FROM records  -- a store older than it
    WHERE NOT EXISTS (SELECT 1 FROM flushed);
"""

DELETE = "DELETE FROM records WHERE branch = ?"
INSERT = "INSERT INTO records (branch, kind, body) VALUES (?, ?, ?)"
SELECT = "SELECT seq, branch, kind, body FROM records ORDER BY seq"
WATERMARK = "SELECT seq FROM flushed"
NEWEST = "SELECT COALESCE(MAX(seq), 0) FROM records"
BRANCHES = "SELECT COUNT(DISTINCT branch) FROM records"
MARK = "UPDATE flushed SET seq = ?"
TRUNCATE = "DELETE FROM records WHERE branch = ? AND seq >= ?"
SYNC_MODES = {"behind": "NORMAL", "full": "FULL", "normal": "NORMAL"}
FSYNC_EACH = 16  # a record naming more new blobs syncs their file system once instead
SYNC = "behind"  # the policy of stores a Workspace opens (benchmarks/durable.py compares)
# A WAL past this size is copied into the database by the flusher (SQLite's own default,
# 1,000 pages, but there the commit that crosses it does, waiting for its fsyncs: a stall of
# 4-5 ms of the services' loop every 300-400 stagings on this machine's disk).
CHECKPOINT_BYTES = 4 * 2**20
FLUSH_LINGER = 0.05  # seconds a flush round waits for more records: the window a machine crash
# may take beyond the round's own fsyncs (a process crash takes nothing)


class Blobs:
    """Content-addressed files named by their SHA-256. `put` writes one (a temporary file
    renamed into place, so a name never holds half its content); `sync` makes what was put
    durable, before a durable record names it."""

    def __init__(self, path: str, fsync: bool) -> None:
        self.path, self.fsync = path, fsync
        self.pending: list[str] = []  # written since the last `take`
        os.makedirs(path, mode=0o700, exist_ok=True)

    def put(self, data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        target = os.path.join(self.path, digest)
        if os.path.exists(target):  # written before (synced, or pending in a flush round)
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

    def take(self) -> list[str]:
        """The blobs written since the last take (to be synced)."""
        taken, self.pending = self.pending, []
        return taken

    def sync(self, paths: list[str], everything: bool = False) -> None:
        """A few new files: an fsync each; many (what a run wrote), or `everything`: one
        syncfs of their file system, cheaper than hundreds of fsyncs. Then the directory, for
        the renames."""
        if not self.fsync or not (paths or everything):
            return
        if len(paths) <= FSYNC_EACH and not everything:
            for path in paths:
                _fsync(path, os.O_RDONLY)
        else:
            _syncfs(self.path)
        _fsync(self.path, os.O_RDONLY | os.O_DIRECTORY)

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
        self.path, self.sync = path, sync
        self._lock_fd = statedir.claim(path, root)
        self._mutex = threading.Lock()  # the connection, the blobs' pending list, _last
        self._rounds = threading.Lock()  # one flush round at a time
        self._closed = False
        self._last = self._flushed = 0  # the newest record's seq; the durable watermark
        self._dirty = threading.Event()  # wakes the flusher
        self._closing = threading.Event()  # ends its linger
        self._flusher: threading.Thread | None = None
        self._bases: IdentityCache[str] = IdentityCache(256)  # base bytes -> their blob
        self._dropped = False  # a branch was dropped: its blobs go at close
        self._restored = os.path.join(path, "restored")  # links restored versions read
        try:
            shutil.rmtree(self._restored, ignore_errors=True)  # a killed process's
            self.blobs = Blobs(os.path.join(path, "blobs"), fsync=sync != "normal")
            self._db = sqlite3.connect(os.path.join(path, "record.sqlite"),
                                       isolation_level=None, check_same_thread=False)  # fmt: skip
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={SYNC_MODES[sync]}")
            if sync == "behind":  # the flusher checkpoints (`_checkpoint`)
                self._db.execute("PRAGMA wal_autocheckpoint=0")
            self._db.executescript(SCHEMA)
            self._flushed = self._db.execute(WATERMARK).fetchone()[0]
            self._last = self._db.execute(NEWEST).fetchone()[0]
            self._inherited = self._last > self._flushed  # a crashed process's unflushed records
        except BaseException:
            os.close(self._lock_fd)
            raise
        if sync == "behind":
            self._flusher = threading.Thread(target=self._flush_rounds, daemon=True,
                                             name="shadowkernel-flusher")  # fmt: skip
            self._flusher.start()

    def close(self) -> None:
        """Flush what is pending (a clean close is durable against a machine crash too), then
        release the directory."""
        with self._mutex:
            if self._closed:
                return
            self._closed = True  # no record from now on
        if self._flusher is not None:
            self._closing.set()
            self._dirty.set()
            self._flusher.join()  # its last round flushes everything
        if self._dropped:  # nothing records any more: no blob can be named meanwhile
            try:
                self.sweep()
            except (OSError, sqlite3.Error):  # the next open sweeps again
                log.warning("%s: could not remove dropped branches' blobs", self.path,
                            exc_info=True)  # fmt: skip
        with self._mutex:
            self._db.close()
            shutil.rmtree(self._restored, ignore_errors=True)  # as spill files go at close
            os.close(self._lock_fd)

    # -- the journal: each call returns once its record survives a crash of the process -------

    def fork(self, state: BranchState) -> None:
        self._record(state, "fork", lambda put: {"name": state.name})

    def version(
        self, state: BranchState, version: Version, data: Mapping[RelPath, bytes | None],
        bases: Mapping[RelPath, Base], taken: Mapping[RelPath, int],
        conflicts: Conflicts | None = None, changes: Mapping[RelPath, Ends] = {},
    ) -> None:  # fmt: skip
        """`changes`: what some paths' bytes share with the head's (found while staging)."""
        self._record(state, "version", lambda put: {
            "number": version.number, "op": version.op,
            "data": {p: _delta(_before(state, p, bases), d, changes.get(p)) or put(d)
                     for p, d in data.items()},
            "bases": {p: [self._put_base(b), mode] for p, (b, mode) in bases.items()},
            "taken": dict(taken), "modes": dict(version.modes),
            **({} if conflicts is None else
               {"conflicts": {"paths": dict(conflicts.paths), "labels": conflicts.labels}}),
        })  # fmt: skip

    def scratch(self, state: BranchState, written: Mapping[RelPath, Override | None]) -> None:
        self._record(state, "scratch", lambda put: encode_scratch(written, put))

    def rebase(
        self, state: BranchState, bases: Mapping[RelPath, Base], taken: Mapping[RelPath, int]
    ) -> None:
        self._record(state, "rebase", lambda put: {p: [put(b), m, taken.get(p)]
                                                   for p, (b, m) in bases.items()})  # fmt: skip

    def drop(self, state: BranchState) -> None:
        """Delete the branch's records; its blobs (unless another record names them) leave
        the directory when the store closes: a sweep reads every record, too slow per drop."""
        self._guarded(lambda: self._db.execute(DELETE, (state.key,)))
        self._dropped = True

    def _record(self, state: BranchState, kind: str, body: Callable[[Put], Any]) -> None:
        """Write the blobs `body` names, then commit the record (one statement in autocommit:
        one transaction). "full": the blobs are synced first, and the record commits with the
        watermark moved over it; "behind": the flusher does that in its next round."""

        def step() -> None:
            text = json.dumps(body(self._put), separators=(",", ":"))
            if self.sync != "full":
                self._last = self._db.execute(INSERT, (state.key, kind, text)).lastrowid or 0
                self._dirty.set()
                return
            self.blobs.sync(self.blobs.take(), everything=self._inherited)
            self._db.execute("BEGIN")
            try:
                self._last = self._db.execute(INSERT, (state.key, kind, text)).lastrowid or 0
                self._db.execute(MARK, (self._last,))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._flushed, self._inherited = self._last, False

        self._guarded(step)

    def _put(self, data: bytes | None) -> str | None:
        return None if data is None else self.blobs.put(data)

    def _put_base(self, data: bytes | None) -> str | None:
        """A base is one bytes object per content, shared by the branches that touch its path
        (Workspace.shared_base): hashed and written once, not once per branch."""
        if data is None:
            return None
        return self._bases.get((data,), lambda: self.blobs.put(data))

    def _guarded(self, step: Callable[[], object]) -> None:
        """One change at a time; a failure is a StagingError and the caller changes nothing."""
        with self._mutex:
            if self._closed:
                raise StagingError(f"the durable store at {self.path} is closed")
            try:
                step()
            except (sqlite3.Error, OSError) as error:
                raise StagingError(f"could not record the change in {self.path}: {error}; "
                                   "nothing changed") from None  # fmt: skip

    # -- the flusher: durable against a machine crash, off the callers' path --------------------

    def _flush_rounds(self) -> None:
        record, checkpointer = os.path.join(self.path, "record.sqlite"), None
        try:
            while True:
                self._dirty.wait()
                self._closing.wait(FLUSH_LINGER)  # more records join this round
                self._dirty.clear()
                closing = self._closed
                try:
                    self.flush()
                    if not closing:  # the last connection to close checkpoints anyway
                        checkpointer = checkpointer or _connect(record)
                        _checkpoint(checkpointer, record + "-wal")
                except (OSError, sqlite3.Error):  # durable against process crashes still
                    log.warning("%s: could not flush to disk", self.path, exc_info=True)
                if closing:
                    return
        finally:
            if checkpointer is not None:
                checkpointer.close()

    def flush(self) -> None:
        """Make every record written so far survive a machine crash: its blobs synced, then the
        watermark moved over it and the WAL synced."""
        with self._rounds:
            with self._mutex:
                paths, last = self.blobs.take(), self._last
            if last <= self._flushed:
                return
            try:
                self.blobs.sync(paths, everything=self._inherited)
            except BaseException:
                with self._mutex:
                    self.blobs.pending[:0] = paths  # the next round tries them again
                raise
            with self._mutex:
                self._db.execute(MARK, (last,))
            with contextlib.suppress(FileNotFoundError):  # a checkpoint synced and removed it
                _fsync(os.path.join(self.path, "record.sqlite-wal"), os.O_RDONLY)
            self._flushed, self._inherited = last, False

    # -- restore ---------------------------------------------------------------------------------

    def restore(self, folder: Folder, make: Callable[[bytes], Blob]) -> list[BranchState]:
        """Every branch the record holds, in the order they forked, without a journal attached;
        blobs no record names are removed. A branch whose record past the watermark names a
        blob missing or torn (a power loss before the flusher's round) ends before it."""
        states: dict[str, BranchState] = {}
        wanted: set[str] = set()
        torn: set[str] = set()  # branches that ended early
        try:
            with self._mutex:
                flushed = self._db.execute(WATERMARK).fetchone()[0]
            records = list(self._records())
            os.makedirs(self._restored, mode=0o700, exist_ok=True)
            blobs = _Checked(self.blobs, records, self._restored, make)
            for seq, key, kind, body in records:
                if kind == "fork":
                    states[key] = BranchState(body["name"], key)
                elif key in torn:
                    continue
                elif key in states:
                    try:
                        _replay(states[key], kind, body, folder, make, blobs)
                    except Torn:
                        if seq <= flushed:
                            raise
                        self._truncate(states[key], seq)
                        torn.add(key)
                        continue
                wanted.update(_hashes(kind, body))
            for state in states.values():
                _hold_head(state)
        except (OSError, sqlite3.Error, LookupError, TypeError, ValueError, Torn) as error:
            raise PathError(f"state directory {self.path}: cannot restore its branches ({error!r});"
                            " open with restore=False to start empty (deleting nothing), or "
                            "choose another state=DIR") from None  # fmt: skip
        removed = self.blobs.keep_only(wanted)
        if removed:
            log.info("%s: removed %d blobs no record names", self.path, removed)
        return list(states.values())

    def _truncate(self, state: BranchState, seq: int) -> None:
        """Forget `state`'s records from `seq` on (a power loss tore them)."""
        log.warning("%s: branch %r lost its changes after version %d (written just before a "
                    "machine crash)", self.path, state.name, state.head.number)  # fmt: skip
        with self._mutex:
            self._db.execute(TRUNCATE, (state.key, seq))

    def sweep(self) -> None:
        """Remove the blobs no record names (what a crash left), without restoring."""
        wanted = {h for _, _, kind, body in self._records() for h in _hashes(kind, body)}
        self.blobs.keep_only(wanted)

    def _records(self) -> Iterator[tuple[int, str, str, Any]]:
        with self._mutex:
            rows = self._db.execute(SELECT).fetchall()
        for seq, key, kind, body in rows:
            yield seq, key, kind, json.loads(body)


def branch_count(path: str, exclusive: bool) -> int | None:
    """How many branches the store in the state directory `path` keeps (a dropped branch's
    records are deleted); None when it has no readable record. `exclusive`: the caller holds
    the directory's lock, so the record opens as a workspace's would (leaving no log files
    behind); else read-only, beside the workspace that holds it and writes on undisturbed."""
    record = os.path.join(path, "record.sqlite")
    if not os.path.exists(record):
        return None
    uri = Path(record).as_uri() + ("" if exclusive else "?mode=ro")
    try:
        with contextlib.closing(sqlite3.connect(uri, uri=True)) as db:
            return int(db.execute(BRANCHES).fetchone()[0])
    except sqlite3.Error:
        return None


class Torn(ShadowError):
    """A record names a blob that is missing or does not hold its content."""


class _Checked:
    """The blobs a restore's records name, each read and hashed once before the replay, by a
    few threads (hashing releases the GIL: on two cores the checks take half the time). A
    version's content then becomes a `Blob` read from the store's file when asked, not a copy
    in memory or a spill file. It reads a hard link in `restored`: whatever deletes a blob's
    file once done with it (the kernel owns a blob a run through the mount hands back, a
    renamed file's) deletes that link, never the store's file. Bases are bytes, one object
    per content."""

    def __init__(self, blobs: Blobs, records: list[tuple[int, str, str, Any]], restored: str,
                 make: Callable[[bytes], Blob]) -> None:  # fmt: skip
        self._path, self._restored, self._make = blobs.path, restored, make
        named = list(dict.fromkeys(h for _, _, kind, body in records for h in _hashes(kind, body)))
        shares = [named[i::CHECKERS] for i in range(CHECKERS)]
        with ThreadPoolExecutor(CHECKERS, thread_name_prefix="shadowkernel-restore") as pool:
            self._sizes = {d: size for found in pool.map(self._check_all, shares)
                           for d, size in found.items()}  # fmt: skip
        self._blobs: dict[str, Blob] = {}
        self._bytes: dict[str, bytes] = {}

    def blob(self, digest: str | None) -> Blob | None:
        if digest is None:
            return None
        if digest not in self._blobs:
            self._blobs[digest] = self._lend(digest, self._size(digest))
        return self._blobs[digest]

    def bytes(self, digest: str | None) -> bytes | None:
        """Branches sharing a base share one bytes object of it, as they did before."""
        if digest is None:
            return None
        if digest not in self._bytes:
            self._size(digest)
            with open(self._file(digest), "rb") as f:
                self._bytes[digest] = f.read()
        return self._bytes[digest]

    def _lend(self, digest: str, size: int) -> Blob:
        """A blob reading its link in `restored`; a copy where no link can be made."""
        link = os.path.join(self._restored, digest)
        try:
            os.link(self._file(digest), link)
        except OSError:  # a file system without hard links
            return self._make(self.bytes(digest) or b"")
        return remember(Blob(f"{os.getpid()}-restored-{next(_restored_ids)}", size, spill=link))

    def _size(self, digest: str) -> int:
        size = self._sizes[digest]
        if isinstance(size, Torn):
            raise size
        return size

    def _file(self, digest: str) -> str:
        return os.path.join(self._path, digest)

    def _check_all(self, digests: list[str]) -> dict[str, int | Torn]:
        """Each blob's size, or Torn when it is missing or does not hold its content (the
        replay decides whether that is damage or a branch's end)."""
        found: dict[str, int | Torn] = {}
        for digest in digests:
            try:
                with open(self._file(digest), "rb") as f:
                    same = hashlib.file_digest(f, "sha256").hexdigest() == digest
                    found[digest] = f.tell() if same else Torn(f"blob {digest} does not hold "
                                                               "its content")  # fmt: skip
            except FileNotFoundError:
                found[digest] = Torn(f"blob {digest} is missing")
        return found


CHECKERS = 2  # threads checking blobs before a restore's replay
_restored_ids = itertools.count(1)


def _hold_head(state: BranchState) -> None:
    """A restored branch's head keeps its bytes in memory, as it did before the restart (every
    lint and staging reads them); earlier versions' stay in the store's files."""
    for path in state.head.files:
        state.head.files.hold(path)


def _replay(
    state: BranchState, kind: str, body: Any, folder: Folder, make: Callable[[bytes], Blob],
    blobs: _Checked,
) -> None:  # fmt: skip
    """Apply one record to a restored branch (no journal is attached yet)."""
    if kind == "version":
        bases = {RelPath(p): (blobs.bytes(h), mode) for p, (h, mode) in body["bases"].items()}
        data = {RelPath(p): _undelta(_before(state, RelPath(p), bases), h)
                if isinstance(h, list) else blobs.blob(h)
                for p, h in body["data"].items()}  # fmt: skip
        modes = {RelPath(p): m for p, m in body.get("modes", {}).items()}
        conflicts = body.get("conflicts")  # a merge's version: what it left conflicted
        if conflicts is not None:
            conflicts = Conflicts({RelPath(p): how for p, how in conflicts["paths"].items()},
                                  tuple(conflicts["labels"]))  # fmt: skip
        taken = {RelPath(p): m for p, m in body.get("taken", {}).items()}  # older: ticks
        MOMENTS.past(taken.values())
        version = state.next_version(data, body["op"], bases, modes, folder, make)
        state.append(version, data, bases, taken, conflicts)
    elif kind == "scratch":
        state.absorb({RelPath(p): decode_override(o, blobs.blob) for p, o in body.items()})
    elif kind == "rebase":
        taken = {RelPath(p): m[0] for p, (_, _, *m) in body.items() if m and m[0]}
        MOMENTS.past(taken.values())
        state.rebase({RelPath(p): (blobs.bytes(h), m) for p, (h, m, *_) in body.items()}, taken)
    else:
        raise ShadowError(f"unknown record {kind!r} in a durable store (a newer shadowkernel?)")


def _hashes(kind: str, body: Any) -> Iterator[str]:
    """The blobs a record names."""
    if kind == "version":
        yield from (h for h in body["data"].values() if isinstance(h, str))  # not a change
        yield from (h for h, _ in body["bases"].values() if h)
    elif kind == "rebase":
        yield from (h for h, *_ in body.values() if h)
    elif kind == "scratch":
        yield from (o["blob"] for o in body.values() if o and o.get("blob"))


def _connect(record: str) -> sqlite3.Connection:
    db = sqlite3.connect(record, isolation_level=None)
    db.execute("PRAGMA synchronous=NORMAL")
    return db


def _checkpoint(db: sqlite3.Connection, wal: str) -> None:
    """Copy a WAL grown past CHECKPOINT_BYTES into the database, so writers reuse it from its
    start: PASSIVE, on a connection of its own, so the callers' records neither wait for it
    nor hold it up."""
    with contextlib.suppress(FileNotFoundError):
        if os.path.getsize(wal) > CHECKPOINT_BYTES:
            db.execute("PRAGMA wal_checkpoint(PASSIVE)")


def _before(state: BranchState, path: RelPath, bases: Mapping[RelPath, Base]) -> bytes | None:
    """The branch's content of `path` before the version being recorded (or replayed): its
    last version's, else the base it records now, else the base it had."""
    if path in state.head.files:
        return state.head.files[path]
    return bases[path][0] if path in bases else state.bases.get(path)


def _delta(
    before: bytes | None, data: bytes | None, shared: Ends | None = None
) -> list[Any] | None:
    """`data` as its change from `before` (`shared`: what they share, if known): [prefix,
    suffix, length, middle in base64], or None when a blob is the better record (no previous
    content, a small file, a large change)."""
    if before is None or data is None or len(data) < DELTA_MIN:
        return None
    prefix, suffix = ends(before, data) if shared is None else shared
    if not small_change(len(data), (prefix, suffix)):
        return None
    middle = data[prefix : len(data) - suffix]
    return [prefix, suffix, len(data), base64.b64encode(middle).decode("ascii")]


def _undelta(before: bytes | None, delta: list[Any]) -> bytes:
    """The content a `_delta` record describes, from the branch's previous content."""
    prefix, suffix, length, middle = delta
    if before is None or prefix + suffix > len(before):
        raise Torn(f"a recorded change does not fit the content before it ({prefix}+{suffix} "
                   f"bytes kept of {0 if before is None else len(before)})")  # fmt: skip
    kept = memoryview(before)  # one copy of the whole, not one per slice and concatenation
    data = b"".join((kept[:prefix], base64.b64decode(middle), kept[len(before) - suffix :]))
    if len(data) != length:
        raise Torn(f"a recorded change gives {len(data)} bytes, not {length}")
    return data


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
    for field in dataclasses.fields(override):
        value = getattr(override, field.name)
        if isinstance(value, Blob):
            value = put(value.bytes())
        elif isinstance(value, bytes):
            value = base64.b64encode(value).decode()
        out[field.name] = value
    return out


def decode_override(data: Any, blob: Callable[[str | None], Blob | None]) -> Override | None:
    if data is None:
        return None  # the scratch layer records a whiteout for it
    fields = dict(data)
    kind = KINDS[fields.pop("kind")]
    if kind is File and fields.get("blob"):
        fields["blob"] = blob(fields["blob"])
    if kind is Symlink:
        fields["target"] = base64.b64decode(fields["target"])
    override: Override = kind(**fields)
    return override
