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
a round per version took up to 7% of this process's CPU). "full": the caller waits for those
fsyncs before the record commits with `synchronous=FULL`. "normal" (benchmarks only) never fsyncs.

A power loss can leave records past the watermark whose blobs never reached the disk:
restoring ends such a branch at its last whole version (the rest is deleted, a warning
logged). A missing or torn blob at or below the watermark is damage: restore refuses, naming
the store. `benchmarks/durable.py` measures the policies.

A large file's version that changed a small part of the branch's previous content of that
path (its last version, else its base) is recorded as that change instead of a blob: the
lengths of the common prefix and suffix, the new middle in base64, and the new length
(`DELTA_MIN`, `DELTA_SHARE`). An agent editing a 5,644-line file then writes a few hundred
bytes into the record per version, not a 250 KB blob to write, hash and fsync; restoring
replays the change on the content the branch had (records are replayed in order).

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
import json
import logging
import os
import sqlite3
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ..errors import PathError, ShadowError, StagingError
from ..overlay.store import WHITEOUT, Blob, Dir, File, Override, Special, Symlink
from ..paths import RelPath
from ..text.ends import ends
from . import statedir
from .folder import Folder
from .identity import IdentityCache
from .staging import Version
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
FLUSH_LINGER = 0.05  # seconds a flush round waits for more records: the window a machine crash
# may take beyond the round's own fsyncs (a process crash takes nothing)
DELTA_MIN = 16 * 1024  # content at least this long may be recorded as a change ...
DELTA_SHARE = 8  # ... when its changed middle is at most 1/DELTA_SHARE of it


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
        try:
            self.blobs = Blobs(os.path.join(path, "blobs"), fsync=sync != "normal")
            self._db = sqlite3.connect(os.path.join(path, "record.sqlite"),
                                       isolation_level=None, check_same_thread=False)  # fmt: skip
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={SYNC_MODES[sync]}")
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
            os.close(self._lock_fd)

    # -- the journal: each call returns once its record survives a crash of the process -------

    def fork(self, state: BranchState) -> None:
        self._record(state, "fork", lambda put: {"name": state.name})

    def version(
        self, state: BranchState, version: Version, data: Mapping[RelPath, bytes | None],
        bases: Mapping[RelPath, Base], taken: Mapping[RelPath, int],
        conflicts: Conflicts | None = None,
    ) -> None:  # fmt: skip
        self._record(state, "version", lambda put: {
            "number": version.number, "op": version.op,
            "data": {p: _delta(_before(state, p, bases), d) or put(d) for p, d in data.items()},
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
        while True:
            self._dirty.wait()
            self._closing.wait(FLUSH_LINGER)  # more records join this round
            self._dirty.clear()
            closing = self._closed
            try:
                self.flush()
            except (OSError, sqlite3.Error):  # the records stay durable against process crashes
                log.warning("%s: could not flush to disk", self.path, exc_info=True)
            if closing:
                return

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
        read = _cached(self.blobs.get)
        try:
            with self._mutex:
                flushed = self._db.execute(WATERMARK).fetchone()[0]
            for seq, key, kind, body in self._records():
                if kind == "fork":
                    states[key] = BranchState(body["name"], key)
                elif key in torn:
                    continue
                elif key in states:
                    try:
                        _replay(states[key], kind, body, folder, make, read)
                    except Torn:
                        if seq <= flushed:
                            raise
                        self._truncate(states[key], seq)
                        torn.add(key)
                        continue
                wanted.update(_hashes(kind, body))
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


def _cached(read: Callable[[str], bytes]) -> Callable[[str | None], bytes | None]:
    """Blobs by hash, each read and checked once (Torn when missing or not its content)."""
    cache: dict[str, bytes] = {}

    def get(digest: str | None) -> bytes | None:
        if digest is None:
            return None
        if digest not in cache:
            try:
                data = read(digest)
            except FileNotFoundError:
                raise Torn(f"blob {digest} is missing") from None
            if hashlib.sha256(data).hexdigest() != digest:
                raise Torn(f"blob {digest} does not hold its content")
            cache[digest] = data
        return cache[digest]

    return get


def _replay(
    state: BranchState, kind: str, body: Any, folder: Folder, make: Callable[[bytes], Blob],
    read: Callable[[str | None], bytes | None],
) -> None:  # fmt: skip
    """Apply one record to a restored branch (no journal is attached yet)."""
    if kind == "version":
        bases = {RelPath(p): (read(h), mode) for p, (h, mode) in body["bases"].items()}
        data = {RelPath(p): _undelta(_before(state, RelPath(p), bases), h)
                if isinstance(h, list) else read(h) for p, h in body["data"].items()}  # fmt: skip
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
        state.absorb({RelPath(p): decode_override(o, make, read) for p, o in body.items()})
    elif kind == "rebase":
        taken = {RelPath(p): m[0] for p, (_, _, *m) in body.items() if m and m[0]}
        MOMENTS.past(taken.values())
        state.rebase({RelPath(p): (read(h), m) for p, (h, m, *_) in body.items()}, taken)
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


def _before(state: BranchState, path: RelPath, bases: Mapping[RelPath, Base]) -> bytes | None:
    """The branch's content of `path` before the version being recorded (or replayed): its
    last version's, else the base it records now, else the base it had."""
    if path in state.head.files:
        return state.head.files[path]
    return bases[path][0] if path in bases else state.bases.get(path)


def _delta(before: bytes | None, data: bytes | None) -> list[Any] | None:
    """`data` as its change from `before`: [prefix, suffix, length, middle in base64], or
    None when a blob is the better record (no previous content, a small file, a large change)."""
    if before is None or data is None or len(data) < DELTA_MIN:
        return None
    prefix, suffix = ends(before, data)
    middle = data[prefix : len(data) - suffix]
    if len(middle) * DELTA_SHARE > len(data):
        return None
    return [prefix, suffix, len(data), base64.b64encode(middle).decode("ascii")]


def _undelta(before: bytes | None, delta: list[Any]) -> bytes:
    """The content a `_delta` record describes, from the branch's previous content."""
    prefix, suffix, length, middle = delta
    if before is None or prefix + suffix > len(before):
        raise Torn(f"a recorded change does not fit the content before it ({prefix}+{suffix} "
                   f"bytes kept of {0 if before is None else len(before)})")  # fmt: skip
    data = before[:prefix] + base64.b64decode(middle) + before[len(before) - suffix :]
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
