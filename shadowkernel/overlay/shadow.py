"""`Shadow`: the kernel's handle on one folder proxy (a mount served by an overlay process).

The kernel keeps the truth (every branch's manifests); the overlay process only shows one
manifest at a time plus what programs wrote since. If the overlay dies, nothing is lost:
the mount is detached, calls raise `OverlayError`, and `restart()` (or the next
`activate`) brings up a fresh process showing the same manifest.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import OverlayError, PathError
from ..paths import RelPath, is_within
from . import channel, fastpath, mounts, zygote
from .store import (
    DEFAULT_MEMORY_BUDGET,
    EMPTY,
    Blob,
    BlobStore,
    File,
    Manifest,
    Override,
    delta,
    freeze,
    with_blob,
)

START_TIMEOUT = 30.0


@dataclass(frozen=True)
class Switch:
    """What activating a manifest cost: paths that differ, entries the kernel had to forget,
    seconds end to end (including the kernel's cache invalidation) and for the swap alone."""

    changed: int
    invalidated: int
    seconds: float
    swap_seconds: float


class Shadow:
    def __init__(
        self,
        source: str | os.PathLike[str],
        mountpoint: str | os.PathLike[str] | None = None,
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
        store: BlobStore | None = None,
        ready: bool = True,
        lazy: bool = False,
    ) -> None:
        """`ready=False`: return once the overlay process is started, before it mounted; call
        `wait_ready()` before use (`several` starts shadows so). `lazy=True`: start nothing
        now; the first activation starts and mounts it (a lane whose servers read only their
        open documents may never need its mount)."""
        self.source = os.path.realpath(source)
        if not os.path.isdir(self.source):
            raise PathError(f"source {os.fspath(source)!r} is not a directory")
        if mountpoint is not None and os.path.lexists(mountpoint) and not os.path.isdir(mountpoint):
            raise PathError(f"mountpoint {os.fspath(mountpoint)!r} is not a directory; give an "
                            "empty directory (or none: one is made)")  # fmt: skip
        mounts.clear_stale()
        self._own_mountpoint = mountpoint is None
        self.mountpoint = os.path.realpath(
            mountpoint or tempfile.mkdtemp(prefix="shadowkernel-mnt-")
        )
        if is_within(self.mountpoint, self.source):
            self._drop_mountpoint()
            raise PathError(
                f"mountpoint {self.mountpoint!r} lies inside the source folder; "
                "choose one outside it"
            )
        self.memory_budget = memory_budget
        self._own_store = store is None
        self.store = store or BlobStore(memory_budget)
        self.manifest: Manifest = EMPTY
        self._lock = threading.Lock()
        self._known: set[str] = set()
        self._process: subprocess.Popen[bytes] | zygote.Forked | None = None
        self._sock: socket.socket | None = None
        self._closers: list[Callable[[], None]] = []
        self._started = False
        if lazy:
            return
        try:
            self._spawn()
            if ready:
                self.wait_ready()
        except BaseException:
            self.close()  # a failed start leaves no process, store or mountpoint behind
            raise

    @staticmethod
    def prepare() -> None:
        """Begin what the first shadow's start waits for (the zygote's imports, 0.2 s),
        without waiting: a caller with other work before its shadows does it meanwhile."""
        zygote.prestart()

    @classmethod
    def several(cls, source: str | os.PathLike[str], count: int, store: BlobStore) -> list[Shadow]:
        """`count` shadows of `source` sharing `store`, their overlay processes started
        together (each takes about a second to start and mount), from this thread: a
        process's parent-death signal follows the thread that started it."""
        shadows: list[Shadow] = []
        try:
            for _ in range(count):
                shadows.append(cls(source, store=store, ready=False))
            for shadow in shadows:
                shadow.wait_ready()
        except BaseException:
            for shadow in shadows:
                shadow.close()
            raise
        return shadows

    # -- lifecycle -------------------------------------------------------------------------

    def _start(self) -> None:
        self._spawn()
        self.wait_ready()

    def _spawn(self) -> None:
        self._started = True
        os.makedirs(self.mountpoint, exist_ok=True)
        parent_end, child_end = socket.socketpair()
        arguments = [self.source, self.mountpoint, "--spill", self.store.spill_dir,
                     "--budget", str(self.memory_budget)]  # fmt: skip
        # The overlay logs to a file: a pipe nobody drains would block it once full.
        self._log = open(os.path.join(self.store.spill_dir, "overlay.log"), "w+b")  # noqa: SIM115
        # A fork of the zygote, which imported the overlay's modules once; else a new process.
        self._process = zygote.spawn(arguments, child_end.fileno(), self._log.fileno())
        if self._process is None:
            command = zygote.python_command("shadowkernel.overlay.server", *arguments,
                                            "--control", str(child_end.fileno()))  # fmt: skip
            self._process = subprocess.Popen(
                command, pass_fds=[child_end.fileno()], stdin=subprocess.DEVNULL,
                stdout=self._log, stderr=self._log, start_new_session=True,
            )  # fmt: skip
        child_end.close()
        self._sock = parent_end
        self._known = set()

    def wait_ready(self) -> None:
        """Until the overlay process mounted (OverlayError if it could not)."""
        parent_end = self._sock
        assert parent_end is not None
        parent_end.settimeout(START_TIMEOUT)
        try:
            hello = channel.receive(parent_end)
        except (EOFError, OSError) as exc:
            raise OverlayError(f"the overlay process failed to mount {self.mountpoint}: "
                               f"{failure(self._stderr()) or exc}") from None  # fmt: skip
        finally:
            parent_end.settimeout(None)
        assert hello[0] == "ready", hello
        self.fuse_path: str = hello[2]  # "fast", or why not (see server._path)
        if self.fuse_path == fastpath.STOCK:
            fastpath.warn_slow()
        self._shown: Manifest = EMPTY  # what the overlay shows: switches send the difference
        if self.manifest:
            self._show(self.manifest)

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def started(self) -> bool:
        """Whether an overlay process was ever started (a lazy shadow's first activation)."""
        return self._started

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def restart(self) -> None:
        """A fresh overlay process showing the current manifest (after a crash)."""
        with self._lock:
            self._stop()
            self._start()

    def on_close(self, callback: Callable[[], None]) -> None:
        """Call `callback` when the shadow closes (runs unmount their kept views so)."""
        self._closers.append(callback)

    def close(self) -> None:
        for callback in self._closers:
            with contextlib.suppress(Exception):
                callback()
        self._closers.clear()
        with self._lock:
            self._stop()
        if self._own_store:
            self.store.close()
        self._drop_mountpoint()

    def _drop_mountpoint(self) -> None:
        if self._own_mountpoint:
            with contextlib.suppress(OSError):
                os.rmdir(self.mountpoint)

    def __enter__(self) -> Shadow:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _stop(self) -> None:
        if self._sock is not None:
            self._sock.close()  # the overlay unmounts when its channel closes
            self._sock = None
        if self._process is not None:
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None
            self._log.close()
        mounts.detach(self.mountpoint)

    # -- requests --------------------------------------------------------------------------

    def activate(self, manifest: Mapping[RelPath, Override]) -> Switch:
        """Show `manifest` on the mount; the kernel forgets exactly the paths that differ."""
        manifest = freeze(manifest)
        with self._lock:
            if not self.alive:
                self._stop()
                self._start()
            reply = self._show(manifest)
        return Switch(
            reply["changed"], reply["invalidated"], reply["seconds"], reply["swap_seconds"]
        )

    def _show(self, manifest: Manifest) -> dict[str, Any]:
        reply = self._call("activate", channel.stubbed(delta(self._shown, manifest), self._known))
        self._known.difference_update(reply["evicted"])
        self.manifest = self._shown = manifest
        return dict(reply)

    def collect(self) -> dict[RelPath, Override | None]:
        """What programs wrote through the mount since the last activation (None: removed).

        Blobs come back owned by this process's store, so they outlive the overlay's copies.
        """
        if not self._started:  # nothing was ever mounted, so nothing wrote through it
            return {}
        with self._lock:
            delta = self._call("collect")
        adopted: dict[str, Blob] = {}  # the names of one inode share one blob
        return {path: self._adopt(o, adopted) for path, o in delta.items()}

    def statistics(self) -> dict[str, Any]:
        if not self._started:
            return {"mounted": False, "pid": None}
        with self._lock:
            stats = dict(self._call("statistics"))
        stats["pid"] = self.pid
        return stats

    def _adopt(self, override: Override | None, adopted: dict[str, Blob]) -> Override | None:
        if not isinstance(override, File) or override.blob is None:
            return override
        blob = override.blob
        if blob.id not in adopted:
            adopted[blob.id] = self.store.take(blob)
        return with_blob(override, adopted[blob.id])

    def _call(self, verb: str, *args: Any) -> Any:
        if self._sock is None or not self.alive:
            raise self._died()
        try:
            self._sock.sendall(channel.encode((verb, *args)))
            status, value = channel.receive(self._sock)
        except (EOFError, OSError):
            raise self._died() from None
        if status != "ok":
            raise OverlayError(f"the overlay refused {verb!r}: {value}")
        return value

    def _died(self) -> OverlayError:
        code = None
        if self._process is not None:
            # The control socket closes a moment before the dead process can be reaped.
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = self._process.wait(timeout=1)
        how = f"signal {-code}" if code is not None and code < 0 else f"exit status {code}"
        if code == zygote.UNKNOWN:
            how = "its zygote ended first"
        self._stop()
        return OverlayError(
            f"the overlay process for {self.source} died ({how}); the mount was detached and no "
            "branch data was lost: call restart() or activate a version to bring it back"
        )

    def _stderr(self) -> str:
        """What the overlay process logged (its last 4000 characters)."""
        if self._process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._process.wait(timeout=5)
        self._log.seek(0)
        return self._log.read().decode(errors="replace").strip()[-4000:]


def failure(log: str) -> str:
    """A failed overlay's log with what went wrong first: a traceback's last line (the
    exception) ahead of the traceback, so a one-line account names the error."""
    lines = [line for line in log.strip().splitlines() if line.strip()]
    if not any(line.startswith("Traceback (most recent call last)") for line in lines):
        return log.strip()
    return f"{lines[-1].strip()}\n{log.strip()}"
