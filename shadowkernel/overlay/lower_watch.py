"""Edits the user makes in their folder reach the shadow's readers at once.

The kernel keeps the shadow's attributes, pages and listings cached for minutes (and with
no-open, never asks us again on open), so the overlay watches, with inotify, every
directory of the user's folder the kernel has looked into, and makes the kernel forget
the nodes the user changed. A directory is watched from its first lookup on; past the
machine's watch limit (fs.inotify.max_user_watches) the rest falls back to the cache
timeouts, and the log says so once; without inotify at all (fs.inotify.max_user_instances
reached), everything does.
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Iterable
from typing import Any

from inotify_simple import INotify, flags

from ..paths import RelPath, join

log = logging.getLogger(__name__)

# What changes a node's bytes or attributes, and what changes a directory's listing.
CONTENT = flags.MODIFY | flags.ATTRIB | flags.CLOSE_WRITE
LISTING = flags.CREATE | flags.DELETE | flags.MOVED_FROM | flags.MOVED_TO
GONE = flags.DELETE_SELF | flags.MOVE_SELF | flags.IGNORED
MASK = CONTENT | LISTING | flags.DELETE_SELF | flags.MOVE_SELF | flags.ONLYDIR | flags.DONT_FOLLOW


class LowerWatch:
    def __init__(self, root: str) -> None:
        self.root = root
        self.paths: dict[int, RelPath] = {}  # watch descriptor -> directory
        self.watched: dict[RelPath, int | None] = {}  # None: cannot be watched
        self.full = False
        try:
            self.inotify: INotify | None = INotify()
        except OSError as exc:
            self.inotify, self.full = None, True
            log.warning("no inotify (%s): edits in the user's folder show after the cache "
                        "timeouts", exc)  # fmt: skip

    def fileno(self) -> int | None:
        return None if self.inotify is None else self.inotify.fileno()

    def watch(self, directory: RelPath) -> None:
        """Watch `directory` of the user's folder (cheap when it already is)."""
        if directory in self.watched or self.full:
            return
        assert self.inotify is not None  # else `full`
        try:
            wd = self.inotify.add_watch(os.path.join(self.root, directory), MASK)
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                self.full = True
                log.warning("inotify watch limit reached: edits in unwatched directories of "
                            "the user's folder show after the cache timeouts")  # fmt: skip
            self.watched[directory] = None  # not a directory of the user's folder
            return
        self.watched[directory] = wd
        self.paths[wd] = directory

    def changes(self) -> list[tuple[RelPath, bool]]:
        """(path, listing changed) for every change the kernel reported since the last
        call; a queue overflow reports every watched directory's listing as changed."""
        if self.inotify is None:
            return []
        return list(dict.fromkeys(self._changes(self.inotify.read(timeout=0))))

    def _changes(self, events: Iterable[Any]) -> Iterable[tuple[RelPath, bool]]:
        for event in events:
            if event.mask & flags.Q_OVERFLOW:  # events were lost: refresh every listing
                log.warning("inotify queue overflow: file contents may lag until timeouts")
                yield from ((d, True) for d, wd in list(self.watched.items()) if wd is not None)
                continue
            directory = self.paths.get(event.wd)
            if directory is None:
                continue
            if event.mask & GONE:
                self._forget(event.wd)
                continue
            path = join(directory, event.name) if event.name else directory
            if event.mask & LISTING:
                self.watched.pop(path, None)  # a new directory there may now be watchable
            yield path, bool(event.mask & LISTING)

    def _forget(self, wd: int) -> None:
        directory = self.paths.pop(wd, None)
        if directory is not None:
            self.watched.pop(directory, None)

    def close(self) -> None:
        if self.inotify is not None:
            self.inotify.close()
