"""`DetachedShadow`: the stand-in for `Shadow` where no FUSE mount can be made ("documents" mode).

It has the small interface the scheduler's `Lane` and the runs use (`activate`, `manifest`,
`mountpoint`, `source`, `store`, `collect`, `alive`, `close`, ...) but mounts nothing: its
"mountpoint" is the user's folder itself, read-only by convention. So:

- Language servers are rooted at the user's folder. The files a branch stages reach them as
  open documents (`didOpen`/`didChange` with the version's text, which the pool already syncs
  from `View.documents`); everything else they read from the project on disk. Answers for the
  files a branch stages are exact; answers that depend on other files see the user's files.
- A deleted staged file is closed in the servers, but a server that reads the disk still sees
  the user's file there (an import of it still resolves). A renamed file is a deletion plus a
  new document: the new path is exact, the old one stays visible on disk the same way. A new
  module a branch adds exists only as an open document: servers that resolve imports from the
  disk alone do not find it.
- Nothing is written through it: `activate` only records the manifest, `collect` has nothing
  to give (runs harvest their private copy instead, see `run/copy.py`).
- Servers and checkers must not write caches into the user's folder: the workspace points
  them at `cache_dir` (see `private_cache_env`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import PathError
from ..paths import RelPath
from .shadow import Switch
from .store import (
    DEFAULT_MEMORY_BUDGET,
    EMPTY,
    BlobStore,
    Manifest,
    Override,
    changed_paths,
    freeze,
)


class DetachedShadow:
    """A shadow of `source` without a mount: the manifest is kept, never shown on a disk."""

    def __init__(
        self,
        source: str | os.PathLike[str],
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
        store: BlobStore | None = None,
        skip: tuple[str, ...] = (),
    ) -> None:
        self.source = os.path.realpath(source)
        if not os.path.isdir(self.source):
            raise PathError(f"source {os.fspath(source)!r} is not a directory")
        self.mountpoint = self.source  # read-only by convention: nothing writes through it
        self.skip = skip  # gitignore-style patterns a run's copy leaves out (the usual caches)
        self._own_store = store is None
        self.store = store or BlobStore(memory_budget)
        self.manifest: Manifest = EMPTY
        self.cache_dir = tempfile.mkdtemp(prefix="shadowkernel-caches-")
        self._closers: list[Callable[[], None]] = []
        self._closed = False

    @property
    def alive(self) -> bool:
        return not self._closed

    @property
    def pid(self) -> int | None:
        return None

    @property
    def started(self) -> bool:
        return True  # nothing to start: as a `Shadow` once it mounted

    def activate(self, manifest: Mapping[RelPath, Override]) -> Switch:
        began = time.perf_counter()
        manifest = freeze(manifest)
        changed = len(changed_paths(self.manifest, manifest))
        self.manifest = manifest
        seconds = time.perf_counter() - began
        return Switch(changed, 0, seconds, seconds)

    def collect(self) -> dict[RelPath, Override | None]:
        return {}  # nothing writes through a detached shadow

    def statistics(self) -> dict[str, Any]:
        return {"mode": "documents", "overrides": len(self.manifest), "pid": None}

    def restart(self) -> None:
        """Nothing to restart: there is no overlay process."""

    def on_close(self, callback: Callable[[], None]) -> None:
        self._closers.append(callback)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for callback in self._closers:
            with contextlib.suppress(Exception):
                callback()
        self._closers.clear()
        shutil.rmtree(self.cache_dir, ignore_errors=True)
        if self._own_store:
            self.store.close()

    def __enter__(self) -> DetachedShadow:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def private_cache_env(cache_dir: str) -> dict[str, str]:
    """Environment that sends the caches servers and checkers write to `cache_dir`, not to
    the folder they are rooted at (ruff, mypy, cargo, Python bytecode)."""
    return {
        "RUFF_CACHE_DIR": os.path.join(cache_dir, "ruff"),
        "MYPY_CACHE_DIR": os.path.join(cache_dir, "mypy"),
        "CARGO_TARGET_DIR": os.path.join(cache_dir, "cargo"),
        "PYTHONPYCACHEPREFIX": os.path.join(cache_dir, "pycache"),
    }
