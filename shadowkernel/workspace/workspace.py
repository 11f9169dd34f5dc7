"""The workspace: the user's folder, its shadow(s), the scheduler, and the branches on top.

    with sk.Workspace("project", servers=["ruff"]) as ws:
        a = ws.branch("a")
        a.replace("pkg/mod.py", "return a + b", "return a - b")
        a.lint(new_only=True)            # LintTable (pandas), 1-based positions
        a.accept()                       # the only call that writes the user's folder

Two modes (`ws.mode`, and why: `ws.mode_reason`): "fuse", a FUSE mount per lane; and
"documents" where no mount can be made (no /dev/fuse, no mount rights): servers rooted at the
user's folder get the staged files as open documents, runs happen in a private copy
(overlay/detached.py, run/copy.py, docs/fallback.md). mode="auto" probes once
(run/capabilities.py) and also falls back when the mount itself fails. Where every language
server is a single-file linter (ruff) and a trial FUSE mount works here, mode="auto"
mounts each lane on demand: its servers answer from the user's folder while the branch's
changes are all their open documents, so most workspaces of ruff never mount at all
(`sched.Lane.documents`; the first answer comes 0.1 s sooner, without the overlay's imports).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import itertools
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar

import attrs

from ..errors import (
    WORKSPACE_CLOSED,
    ArgumentError,
    ClosedError,
    NotFound,
    OverlayError,
    PathError,
    ShadowError,
)
from ..lsp import LspPool, registry
from ..lsp.client import warm_codec
from ..lsp.navigation import Symbol
from ..lsp.pool import linters
from ..lsp.specs import ServerSpec
from ..overlay.detached import DetachedShadow, private_cache_env
from ..overlay.shadow import Shadow
from ..overlay.store import DEFAULT_MEMORY_BUDGET, EMPTY, Blob, BlobStore
from ..paths import Protection, RelPath
from ..run import capabilities
from ..sched import (
    Answer,
    Event,
    Lane,
    Policy,
    Scheduler,
    Snapshot,
    Timeline,
    default_lanes,
    most_lanes,
    single_file_only,
)
from ..sched.timeline import events_json as timeline_events_json
from ..sched.timeline import load_events as load_timeline_events
from . import arguments, statedir
from .baselints import BaseLints
from .branch import Branch
from .bridge import Bridge, LoopThread, RunningLoop
from .durable import DurableStore
from .folder import Folder
from .runqueue import RunQueue
from .scratch import USUAL_CACHES
from .staging import digest
from .state import merge

log = logging.getLogger(__name__)
T = TypeVar("T")

FOLDER = Snapshot(("folder",), EMPTY)  # the user's folder as it is: no overrides
LOOPS = ("own", "running")  # Workspace(loop=...): where the services run
RUNS_END_WITHIN = 10.0  # seconds close() waits for cancelled runs to be gone (killing: ~50 ms)

_OPEN: weakref.WeakSet[Workspace] = weakref.WeakSet()


def open_workspaces() -> list[Workspace]:
    """Every workspace of this process that is not closed yet (the kernel closes them all)."""
    return list(_OPEN)


@atexit.register
def _close_open_workspaces() -> None:
    # At exit, while the loop threads still run: a __del__ during interpreter teardown
    # would wait on a loop thread that is already gone.
    for workspace in open_workspaces():
        with contextlib.suppress(Exception):
            workspace.close()


class Workspace:
    """The user's folder, its shadow(s) and the branches staged on top of it.

    `protect`: globs (gitignore syntax) of paths no branch may stage, keep from a run or
    accept, beside version-control metadata, which is always protected (`paths.Protection`).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        servers: Sequence[Any] = ("ruff",),
        *,
        lanes: int | None = None,
        policy: Policy = "round-robin",
        batch: int = 8,
        idle_timeout: float = 900,
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
        mode: str = "auto",
        protect: Sequence[str] = (),
        state: str | os.PathLike[str] | statedir.Default | None = statedir.DEFAULT,
        restore: bool = True,
        max_runs: int | None = None,
        loop: str = "own",
    ) -> None:
        """`state`: where branches are kept durably (default: a directory per folder under
        $XDG_STATE_HOME/shadowkernel; None: in memory only); `restore`: bring back the
        branches kept there (False: start empty, deleting nothing). `loop`: where the
        services (scheduler, language-server clients) run: "own", an event loop in a thread
        of their own (the synchronous API works from any thread, a long cell stalls no
        request); "running", the event loop running in the opening thread, for an async
        host whose agents await the `*_async` methods there (no hand-off between threads
        per request; close with `await aclose()` or `async with`)."""
        if loop not in LOOPS:
            raise ArgumentError(f"loop={loop!r}: give one of {', '.join(map(repr, LOOPS))}")
        self.root = os.path.realpath(path)
        if not os.path.isdir(self.root):
            raise PathError(f"path {os.fspath(path)!r} is not a directory")
        if lanes is None:  # the machine's cores and the servers decide, and load grows them
            names, cores, memory = (_server_names(servers), len(os.sched_getaffinity(0)),
                                    _available_memory())  # fmt: skip
            lanes, grow_to = default_lanes(names, cores, memory), most_lanes(names, cores, memory)
        else:
            grow_to = lanes
        arguments.count("lanes", lanes, 1, "the number of shadows to serve requests")
        if isinstance(servers, str):
            raise ArgumentError(f"servers={servers!r}: give a list of server names, "
                                f"e.g. [{servers!r}]")  # fmt: skip
        arguments.seconds("idle_timeout", idle_timeout)
        arguments.count("memory_budget", memory_budget, 0, "bytes kept in memory before spilling")
        restore = arguments.flag("restore", restore)
        self.servers = tuple(servers)
        # Checkers (mypy, go vet, ...) run as sandboxed runs (checkers.py), not in the pools.
        self._lsp_servers, self.checkers = registry.split(self.servers, Path(self.root))
        self._on_demand = (mode == "auto" and single_file_only(_server_names(self._lsp_servers))
                           and capabilities.fuse_mounts())  # fmt: skip
        if mode != "documents" and not self._on_demand and capabilities.fuse_problem() is None:
            Shadow.prepare()  # its imports run beside the steps below, up to the mount
        self.state_dir = None if state is None else statedir.directory(self.root, state)
        self.durable: DurableStore | None = None
        max_runs = len(os.sched_getaffinity(0)) if max_runs is None else max_runs
        arguments.count("max_runs", max_runs, 1, "the number of runs at once")
        self.mode, self.mode_reason = "fuse", ""  # set by _open_shadows
        self.protection = Protection(arguments.names("protect", protect) or ())
        self.folder = Folder(self.root, self.protection)
        self.store = BlobStore(memory_budget)
        self.base_lints = BaseLints()
        self.bridge: Bridge = LoopThread() if loop == "own" else RunningLoop()
        self.run_queue = RunQueue(max_runs)
        self.origin = time.perf_counter()  # the timeline's zero
        self._idle_timeout = idle_timeout
        self._shadows: list[Shadow | DetachedShadow] = []
        self._branches: dict[str, Branch] = {}
        self._lock = threading.Lock()
        self._base_blobs: dict[tuple[RelPath, str], Blob] = {}
        self._base_bytes: dict[tuple[RelPath, str], bytes] = {}
        self._latest_base: dict[RelPath, bytes] = {}  # the base each path shared last
        self._ids = itertools.count(1)
        self._closed = False
        self._starting: list[asyncio.Task[None]] = []
        self._caches: str | None = None  # where the documents pools' servers write caches
        try:
            if self.state_dir is not None:
                self.durable = DurableStore(self.state_dir, self.root)
            self.restored = self._restore(restore)
            warming = self._warm_codec()
            self._open_shadows(mode, lanes)
            if warming is not None:
                warming.join()  # before any server starts: one thread builds the hooks
            if self.bridge.on_loop():
                self._scheduler = self._start(policy, batch, grow_to)
            else:
                self._scheduler = self.bridge.call(_now(self._start, policy, batch, grow_to))
        except BaseException:
            self.close()
            raise
        _OPEN.add(self)

    def _warm_codec(self) -> threading.Thread | None:
        """With servers to start: the LSP codec's first-use cost (~0.1 s of CPU) paid in a
        thread while the shadows mount (mostly waiting), not by the first answer."""
        if not self._lsp_servers:
            return None
        thread = threading.Thread(target=warm_codec, name="shadowkernel-warm", daemon=True)
        thread.start()
        return thread

    def _open_shadows(self, requested: str, lanes: int) -> None:
        """A FUSE shadow per lane, or (no mount possible) a detached one; sets the mode."""
        facts = capabilities.probe()
        chosen = capabilities.decide(requested, facts)
        self._on_demand &= chosen.name == "fuse"
        if self._on_demand:  # see `single_file_only`
            self._caches = tempfile.mkdtemp(prefix="shadowkernel-caches-")
            self._shadows = [self._new_shadow() for _ in range(lanes)]
            chosen = capabilities.Mode("fuse", f"{chosen.reason}; each lane mounts when a job "
                                       "needs it: its single-file linters answer from the folder, "
                                       "which nothing writes, until then")  # fmt: skip
        elif chosen.name == "fuse":
            try:  # started side by side: each takes about a second to mount
                self._shadows = list(Shadow.several(self.root, lanes, self.store))
            except OverlayError as error:
                if requested == "fuse":
                    raise
                chosen = capabilities.mount_failed(error, facts)
                for shadow in self._shadows:
                    shadow.close()
                self._shadows = []
        self.mode, self.mode_reason = chosen.name, chosen.reason
        if chosen.name == "documents":
            self._shadows = [self._new_shadow() for _ in range(lanes)]

    def _new_shadow(self) -> Shadow | DetachedShadow:
        """One more shadow in the workspace's mode; a FUSE one is started, not yet mounted
        (not even started where lanes mount on demand)."""
        if self._on_demand:
            return Shadow(self.root, store=self.store, lazy=True)
        if self.mode == "fuse":
            return Shadow(self.root, store=self.store, ready=False)
        return DetachedShadow(self.root, store=self.store, skip=USUAL_CACHES)

    def _servers_for(self, shadow: Shadow | DetachedShadow) -> Sequence[Any]:
        """Detached shadows root servers at the user's folder: their caches go elsewhere."""
        if not isinstance(shadow, DetachedShadow):
            return self._specs
        return self._caching_in(shadow.cache_dir)

    def _caching_in(self, cache_dir: str) -> list[ServerSpec]:
        """The servers, their caches sent to `cache_dir` (for servers rooted at the folder)."""
        env = private_cache_env(cache_dir)
        return [attrs.evolve(spec, env={**env, **spec.env}) for spec in self._specs]

    @functools.cached_property
    def _specs(self) -> list[ServerSpec]:
        return registry.resolve_specs(self._lsp_servers, Path(self.root))

    def check_servers(self, names: Sequence[str] | None) -> None:
        """For a lint: NotFound naming what `names` asks that is no language server of the
        workspace, ArgumentError naming one kept for navigation only (as the pool says it;
        a lint with no file to lint asks the pool nothing), or saying that none of its
        servers lints: an empty table would read as clean code."""
        if not linters(self._specs, names) and names is None and self._specs:
            kept = ", ".join(spec.name for spec in self._specs)
            raise ArgumentError(f"no language server of this workspace lints ({kept}: kept for "
                                "navigation); open it with one that does, e.g. ruff beside "
                                "it")  # fmt: skip

    def _pool(self, shadow: Shadow | DetachedShadow) -> LspPool:
        return LspPool(shadow.mountpoint, self._servers_for(shadow), self._idle_timeout,
                       project=self.root)  # fmt: skip

    def _documents_pool(self) -> LspPool | None:
        """A lane's pool rooted at the user's folder, where lanes mount on demand (its
        servers' caches go to the workspace's own directory, as in documents mode)."""
        if self._caches is None:
            return None
        return LspPool(self.root, self._caching_in(self._caches), self._idle_timeout,
                       project=self.root)  # fmt: skip

    def _lane(self, index: int, shadow: Shadow | DetachedShadow, threaded: bool) -> Lane:
        return Lane(index, shadow, self._pool(shadow), threaded,  # type: ignore[arg-type]
                    documents=self._documents_pool())  # fmt: skip

    def _start(self, policy: Policy, batch: int, grow_to: int) -> Scheduler:
        """The lanes' scheduler, started on the services' loop (the caller runs there)."""
        threaded = max(len(self._shadows), grow_to) > 1
        lanes = [self._lane(i, shadow, threaded) for i, shadow in enumerate(self._shadows)]
        scheduler = Scheduler(lanes, policy, batch, origin=self.origin, open_lane=self._open_lane,
                              grow_to=grow_to)  # fmt: skip
        scheduler.start()
        # The servers start now, beside the caller's first stagings, not in the first answer.
        self._starting = [asyncio.create_task(lane.pool.start()) for lane in lanes]
        return scheduler

    async def _open_lane(self, index: int) -> Lane:
        """One more lane while the others serve (the scheduler's `LaneGrowth` decides when),
        returned once its servers are ready. The overlay process is started from the loop's
        thread (a few ms), which lives as long as the workspace (the host's own, with
        `loop="running"`): a process's parent-death signal follows the thread that started
        it. Its mount is awaited in a thread and its servers start as the pools' always do,
        so no answer waits for either."""
        shadow = self._new_shadow()
        lane: Lane | None = None
        try:
            if isinstance(shadow, Shadow) and shadow.started:
                await _in_thread_to_the_end(shadow.wait_ready)
            lane = self._lane(index, shadow, threaded=True)
            await lane.pool.start()
        except BaseException:
            if lane is not None:
                await asyncio.gather(*(pool.close() for pool in lane.pools))
            await _in_thread_to_the_end(shadow.close)
            raise
        self._shadows.append(shadow)
        return lane

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def shadows(self) -> tuple[Shadow | DetachedShadow, ...]:
        """The shadow of each lane (its `mountpoint` is where servers and programs look; in
        documents mode that is the user's folder, read-only by convention)."""
        return tuple(self._shadows)

    # -- branches --------------------------------------------------------------------------

    def branch(self, name: str) -> Branch:
        """A new branch forked from the user's current files; `name` follows git's rules for
        branch names (what `git check-ref-format --branch` accepts)."""
        arguments.branch_name(name)
        with self._lock:
            self.check_open()
            if name in self._branches:
                raise ArgumentError(f"branch {name!r} exists; use ws.branches[{name!r}] or "
                                    "drop() it first")  # fmt: skip
            branch = Branch(self, name, next(self._ids))
            if self.durable is not None:
                self.durable.fork(branch.state)
                branch.state.journal = self.durable
            self._branches[name] = branch
        return branch

    def _restore(self, restore: bool) -> int:
        """The branches the durable store keeps; returns how many came back. Where an older
        branch has the name of a newer one (made after a `restore=False`), it is restored as
        NAME~KEY. Bases are restored as recorded, whatever the folder holds now."""
        if self.durable is None:
            return 0
        if not restore:
            self.durable.sweep()
            return 0
        states = self.durable.restore(self.folder, self.store.make)
        self.folder.sweep_temps({path for state in states for path in state.head.files})
        for state in reversed(states):  # the newest first: it keeps its name
            if state.name in self._branches:
                state.name = f"{state.name}~{state.key[:6]}"
            state.journal = self.durable
            self._branches[state.name] = Branch(self, state.name, next(self._ids), state)
        self._branches = dict(reversed(self._branches.items()))  # in the order they forked
        return len(states)

    @property
    def branches(self) -> Mapping[str, Branch]:
        return MappingProxyType(dict(self._branches))

    def _forget(self, branch: Branch) -> None:
        with self._lock:
            if self._branches.get(branch.name) is branch:
                del self._branches[branch.name]

    def merge_check(self, a: Branch, b: Branch, name: str | None = None) -> Branch:
        """A new branch holding the three-way merge of `a` and `b` over their common base
        (per path, the older of their bases: the text both forked from, also after one of
        them was accepted).

        Lint and run it to learn whether two agents' edits work together before either is
        accepted. Files merge per hunk as `git merge-file` merges them (both sides'
        non-conflicting hunks kept); where both changed the same lines, the path is listed in
        the new branch's `conflicts` and holds git's conflict markers, labelled with the
        branch names (`<<<<<<< a`, `=======`, `>>>>>>> b`; no base section). A binary file
        both changed (it keeps a's bytes) and a file one side deleted (it keeps the other's
        edit) are listed too. The new branch's accept() is refused until each listed path is
        staged again (written or deleted) and holds no conflict block of this merge.
        Neither branch, nor the user's folder, is changed.
        """
        for arg, branch in (("a", a), ("b", b)):
            if not isinstance(branch, Branch) or branch.workspace is not self:
                raise ArgumentError(f"{arg}={branch!r}: give a branch of this workspace")
        merged = self.branch(name or f"merge-{a.name}-{b.name}")
        try:
            merge(merged.state, a.state, b.state, self.folder, self.store.make)
        except BaseException:  # a merge that cannot be staged leaves no empty branch behind
            merged.drop()
            raise
        return merged

    # -- requests ----------------------------------------------------------------------------

    def symbols(self, query: str) -> list[Symbol]:
        """Workspace symbols matching `query`, as the user's folder shows them."""
        arguments.text("query", query)

        async def job(lane: Lane) -> Answer[list[Symbol]]:
            await lane.show(FOLDER)
            found = await lane.pool.workspace_symbols(query)
            return Answer(found, f"{len(found)} symbols")

        async def submit() -> list[Symbol]:
            self.check_open()
            return await self._scheduler.submit("workspace", 0, "navigation", "symbols", job)

        return self.bridge.call(submit())

    async def submit(self, branch: Branch, version: int, kind: Any, op: str, job: Any) -> Any:
        """Queue a request of `branch` at `version` on the scheduler (from the loop thread)."""
        self.check_open()
        return await self._scheduler.submit(branch.name, version, kind, op, job)

    def base_blob(self, path: RelPath, data: bytes) -> Blob:
        """One blob per (path, base content), shared by branches, so base views match."""
        key = (path, digest(data))
        with self._lock:
            blob = self._base_blobs.get(key)
            if blob is None:
                blob = self._base_blobs[key] = self.store.make(data)
        return blob

    def shared_base(self, path: RelPath, data: bytes | None) -> bytes | None:
        """One bytes object per (path, base content): a thousand branches forked from one
        file hold one copy of its base, not a thousand. The base the path shared last is
        compared first (a memcmp): forking from an unchanged file hashes nothing."""
        if data is None:
            return None
        with self._lock:
            latest = self._latest_base.get(path)
        if latest is not None and latest == data:
            return latest
        key = (path, digest(data))
        with self._lock:
            shared = self._latest_base[path] = self._base_bytes.setdefault(key, data)
        return shared

    @property
    def max_runs(self) -> int:
        """How many runs go at once (other branches' runs queue; one branch's runs go in turn)."""
        return self.run_queue.limit

    # -- the timeline ------------------------------------------------------------------------

    def now(self) -> float:
        """The timeline's clock: seconds since the workspace started."""
        return time.perf_counter() - self.origin

    def record(self, branch: str, version: int, kind: Any, op: str, queued: float,
               started: float, **answer: Any) -> None:  # fmt: skip
        """Put a request served outside the lanes (a run in its own view) on the timeline."""
        self._scheduler.record(branch, version, kind, op, queued, started, **answer)

    def events(self) -> list[Event]:
        """Every request served so far, in the order it finished."""
        return list(self._scheduler.events)

    def save_timeline(self, path: str | os.PathLike[str]) -> None:
        """Write the requests served so far to `path` (JSON), for another process's workspace
        to adopt (`adopt_timeline`): `shadowkernel mcp --timeline FILE` does on closing."""
        text = timeline_events_json(self.events(), self.origin)
        Path(path).write_text(text, encoding="utf-8")

    def adopt_timeline(self, path: str | os.PathLike[str]) -> list[Event]:
        """Put the requests another process's workspace saved (`save_timeline`) on this
        timeline, on this clock, with fresh ids: e.g. what an agent CLI asked of the MCP
        server a CommandAgent started, under the name its client announced."""
        try:
            clock, events = load_timeline_events(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise ArgumentError(f"adopt_timeline({str(path)!r}): not a saved timeline "
                                f"({error})") from None  # fmt: skip
        return self._scheduler.adopt(events, clock - self.origin)

    def timeline(self, title: str = "shadow timeline") -> Timeline:
        """Every request served so far, with switch/serve times and per-branch waits."""
        return Timeline(self.events(), title=arguments.text("title", title), diff=self._diff)

    def _diff(self, branch: str, version: int) -> str:
        found = self._branches.get(branch)
        if found is None:
            raise NotFound(f"branch {branch!r} is not open (dropped, or a workspace request)")
        return found.diff(version)

    def statistics(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "lanes": len(self._shadows),
            "lanes_grown": self._scheduler.growth.grown,
            "most_lanes": max(self._scheduler.growth.limit, len(self._shadows)),
            "queued": len(self._scheduler.queue),
            "runs": len(self.run_queue),
            "branches": len(self._branches),
            "base_lints_cached": len(self.base_lints),
            "servers": [lane.pool.statistics() for lane in self._scheduler.lanes],
        }

    # -- lifecycle ----------------------------------------------------------------------------

    def close(self) -> None:
        """Stop servers, unmount the shadows. Nothing is written to the user's folder.
        What fails on the way is logged (and the rest still closed), never raised, except
        closing from the loop the services run on (`loop="running"`), which would block it:
        that is ShadowError, and `await aclose()` closes."""
        if self._closed:
            return
        if getattr(self, "_scheduler", None) is not None and self.bridge.on_loop():
            raise ShadowError("close() would block the event loop this workspace serves on; "
                              "use `await workspace.aclose()` or `async with`")  # fmt: skip
        scheduler = self._closing()
        if scheduler is not None and self.bridge.serving():
            self._attempt("stop the scheduler and servers",
                          lambda: self.bridge.call(self._shutdown(scheduler)))  # fmt: skip
        elif scheduler is not None:  # the host's loop ended with the workspace open
            log.warning("closing %s after the event loop it served on ended: its servers are "
                        "killed (use `async with` or `await aclose()`)", self.root)  # fmt: skip
            for lane in scheduler.lanes:
                for pool in lane.pools:
                    pool.kill()
        self._release()

    async def aclose(self) -> None:
        """`close()` for a caller on an event loop (any: the services' own or another)."""
        if self._closed:
            return
        scheduler = self._closing()
        try:
            if scheduler is not None:
                await self.bridge.call_async(self._shutdown(scheduler))
        except Exception:
            log.warning("closing %s: could not stop the scheduler and servers", self.root,
                        exc_info=True)  # fmt: skip
        finally:  # also when the caller is cancelled: the mounts go
            await asyncio.to_thread(self._release)  # unmounting and joining threads block

    def _closing(self) -> Scheduler | None:
        """Mark the workspace closed; the scheduler to shut down, if it started."""
        self._closed = True
        self.bridge.closing = WORKSPACE_CLOSED
        _OPEN.discard(self)
        return getattr(self, "_scheduler", None)

    def _release(self) -> None:
        """What closing does once the servers stopped: the shadows, the loop, the stores."""
        # Before the loop's thread ends: the overlays of lanes opened while serving were
        # started from it, and its end signals them to stop.
        for shadow in self._shadows:
            self._attempt(f"unmount the shadow at {shadow.mountpoint}", shadow.close)
        self.bridge.stop()
        self.store.close()
        if self._caches is not None:
            shutil.rmtree(self._caches, ignore_errors=True)
        if self.durable is not None:
            self._attempt("close the durable store", self.durable.close)

    def _attempt(self, what: str, step: Any) -> None:
        try:
            step()
        except Exception:
            log.warning("closing %s: could not %s", self.root, what, exc_info=True)

    async def _shutdown(self, scheduler: Scheduler) -> None:
        await self.run_queue.close(RUNS_END_WITHIN)  # before the lanes: fuse runs hold one
        await scheduler.close()
        await asyncio.gather(*self._starting, return_exceptions=True)  # no start left behind
        await asyncio.gather(*(pool.close() for lane in scheduler.lanes for pool in lane.pools),
                             return_exceptions=True)  # fmt: skip

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Workspace:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            if not self._closed and not sys.is_finalizing():
                self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._branches)} branches"
        return f"<Workspace {self.root} ({self.mode}, {len(self._shadows)} lanes, {state})>"

    def check_open(self) -> None:
        if self._closed:
            raise ClosedError(WORKSPACE_CLOSED)


async def _in_thread_to_the_end(call: Any) -> Any:
    """`call()` in a thread; cancelled, wait for it to end (a thread cannot be stopped), then
    raise, so what it set up can be closed behind it."""
    future = asyncio.ensure_future(asyncio.to_thread(call))
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        await asyncio.wait([future])
        raise


def _available_memory() -> int | None:
    """Bytes of memory the machine can still give (MemAvailable), None where unknown."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _server_names(servers: Any) -> list[str]:
    """Server names for the lane default (bad values are reported by the later checks)."""
    try:
        return [spec.name for spec in registry.resolve_specs(servers)]
    except (ShadowError, TypeError, AttributeError):
        return []


async def _now(function: Callable[..., T], *args: Any) -> T:
    """`function(*args)` called on the running loop (what needs one, e.g. to make tasks)."""
    return function(*args)
