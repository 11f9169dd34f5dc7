"""The state home's directories, one per folder whose branches are kept: what each holds, and
deleting those whose folder is gone (`shadowkernel state [--prune]`).

A state directory outlives its folder by design (a moved folder starts afresh under a new key,
a deleted one leaves its branches behind); nothing deletes one unless asked, and never one a
workspace holds open. Each is read and deleted under its lock, so no workspace opens it
meanwhile.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass

from . import statedir
from .durable import branch_count


@dataclass(frozen=True)
class Kept:
    """One state directory: whose branches it keeps, how many, and what it takes on disk."""

    path: str
    folder: str | None  # the folder it belongs to (None: no marker, not a folder's state)
    branches: int | None  # None: no readable record
    size: int  # bytes of its files
    changed: float  # its newest file's modification time (0: no file)
    holder: str | None  # who holds it open ("process 1234 (...)"), None when nobody does

    @property
    def orphaned(self) -> bool:
        """Its folder is gone (deleted, moved, or on a drive not mounted now)."""
        return self.folder is not None and not os.path.isdir(self.folder)


def kept(home: str | None = None) -> list[Kept]:
    """The state directories under `home` (default: the state home), by name."""
    home = statedir.state_home() if home is None else home
    try:
        names = sorted(os.listdir(home))
    except FileNotFoundError:
        return []
    paths = (os.path.join(home, name) for name in names)
    return [_read(p) for p in paths if os.path.isdir(p) and not os.path.islink(p)]


def prune(states: list[Kept]) -> list[Kept]:
    """Delete the state directories whose folder is gone and that nobody holds; returns them."""
    pruned = []
    for state in states:
        if not state.orphaned or state.holder is not None:
            continue
        with statedir.locked(state.path) as holder:
            if holder is None and state.orphaned:  # still so, now that it is ours
                shutil.rmtree(state.path)
                pruned.append(state)
    return pruned


def _read(path: str) -> Kept:
    size, changed = _usage(path)
    with statedir.locked(path) as holder:
        # Under the lock the record is ours to open like a workspace would; a holder's is
        # read without writing (it keeps its write-ahead log beside it).
        return Kept(path, statedir.folder_of(path), branch_count(path, holder is None), size,
                    changed, holder)  # fmt: skip


def _usage(path: str) -> tuple[int, float]:
    """Bytes and last change of a state directory: a file with several names (an open
    workspace's `restored/` links to its blobs) counts once."""
    size, changed, seen = 0, 0.0, set()
    for folder, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(FileNotFoundError):
                info = os.lstat(os.path.join(folder, name))
                if (info.st_dev, info.st_ino) not in seen:
                    seen.add((info.st_dev, info.st_ino))
                    size, changed = size + info.st_size, max(changed, info.st_mtime)
    return size, changed
