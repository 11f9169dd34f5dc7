"""`run_in_shadow`: run a command in a manifest's view of the user's folder.

Two ways to show the view, chosen per run (`mode`):

- "overlayfs" (heavy runs, near native speed): a kernel overlayfs view (lower = the user's
  folder, upper = `write_upper(manifest)` in a private scratch directory), bound over the
  user's own path in a private mount namespace; afterwards `read_upper` harvests what the run
  wrote. Views stay mounted between runs so their caches stay warm (`views.py`). As root
  they are mounted here (trusted.* xattrs, redirects); for other users in the user namespace
  their `Holder` keeps (`userns.py`: `userxattr`, Linux >= 6.6), which their runs enter.
  Such a run reads only the user's folder and the shadow's store, never its mount, so runs of
  several manifests go at once (each with a view of its own), beside the mount's clients.
- "fuse": the shadow's live FUSE mount, bound over the user's own path in a private mount
  namespace; the manifest is activated first and the run's writes collected after. The
  mount is shared, so other clients (language servers) see the run's writes meanwhile, and
  the run holds the mount while it goes (`view_mode` tells the caller beforehand).
- "fuse-at-mountpoint": where bwrap cannot start (no user namespaces), the run works in the
  mount path itself (`path_transparent=False`: absolute paths of the user's folder reach the
  real folder), confined by Landlock (`landlock.py`: writes only in the mount, a private
  temporary directory and `writable=` paths; TCP refused offline), or unconfined where the
  kernel has no Landlock either and `sandbox=False` asks for it. The run's notes say which.

Either way the run's writes never reach the user's folder: they land in the upper layer or
in the shadow's override table, and the run cannot unmount its view (no capabilities). The
rest of the machine is read-only to it except its private /dev/shm and copy-on-write layers
over /tmp and /var/tmp, $HOME and `writable=` paths (`sandbox.py`, `layers.py`; their uppers
on a tmpfs of `max_disk` bytes), all thrown away when it ends;
`RunResult.written_outside` lists what it wrote in $HOME and `writable=` paths. Limits:
`max_processes` and `max_memory` (cgroups, `cgroup.py`), `max_disk` (each throwaway tmpfs),
`timeout` and `output_cap`.

Python code (`python=True`) runs with the workspace's own interpreter (`.venv/bin/python` in
the user's folder) when there is one, since that is what its code is written against, and
with `sys.executable` otherwise.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from ..errors import RunError
from ..overlay.detached import DetachedShadow
from ..overlay.store import (
    SPILL_PREFIX,
    SPILLS,
    BlobStore,
    Manifest,
    Override,
    freeze,
    patched,
)
from ..overlay.upper import read_upper
from ..paths import ROOT, RelPath, is_within, rel
from ..userdirs import state_home
from . import capabilities, seccomp
from .capabilities import Confinement
from .cgroup import RunCgroup, hierarchies
from .layers import Layers, check_writable, private_tmp, runs_home, with_tmp
from .process import OnOutput, Outcome, run_process
from .result import DEFAULT_OUTPUT_CAP, RunResult
from .sandbox import PRIVATE_TMPFS, Bind, Plan, command_line, confined, machine
from .userns import HOST, Mounter, mounter, userns_overlay_problem
from .views import HOME, View, views_of

MODES = ("auto", "fuse", "overlayfs")
DEFAULT_MAX_PROCESSES = 1024
DEFAULT_MAX_MEMORY = 4 * 2**30  # bytes, the whole run (cgroup), or each process (rlimit)
DEFAULT_MAX_DISK = 2 * 2**30  # bytes of each throwaway tmpfs: /dev/shm, the run's layers, ...
TMP_DIRS = ("/tmp", "/var/tmp")  # copy-on-write for runs; their writes go unlisted
BUSES = ("/run/user", "/run/dbus")  # session and system bus sockets: doors out of the sandbox


@dataclass(frozen=True)
class RunView:
    """Where and how the run sees the shadow."""

    mode: str
    root: str  # the path the run sees the view at
    bind: Bind | None  # what is bound at the user's path inside the run
    mounter: Mounter = HOST  # where the run's layers and view are mounted
    overlay: View | None = None  # overlayfs: the kept view the run binds


@dataclass(frozen=True)
class Limits:
    processes: int
    memory: int
    disk: int


def run_in_shadow(
    shadow, manifest: Mapping[RelPath, Override], command: str | Sequence[str], *,
    timeout: float = 60, network: bool = False, python: bool = False,
    output_cap: int = DEFAULT_OUTPUT_CAP, mode: str = "auto", env: Mapping[str, str] | None = None,
    cwd: str = ROOT, writable: Sequence[str] = (), max_processes: int = DEFAULT_MAX_PROCESSES,
    max_memory: int = DEFAULT_MAX_MEMORY, max_disk: int = DEFAULT_MAX_DISK,
    cancel: threading.Event | None = None, sandbox: bool = True, on_output: OnOutput | None = None,
    private: Sequence[str] = (),
) -> RunResult:  # fmt: skip
    """Run `command` (a shell string, an argv list, or Python code with `python=True`) in
    `manifest`'s view of `shadow.source`, and return its output and what it wrote.
    `writable` paths (absolute directories outside the project) are copy-on-write for the
    run, like $HOME: the run writes its own copies, which vanish with it (under Landlock,
    where bwrap cannot start, the run writes them for real). Setting `cancel` (from any
    thread) kills the run and all its processes. `network=True` gives the run the machine's
    network, nothing else; `sandbox=False` runs it unconfined, and is needed where neither
    bwrap nor Landlock can confine it. `on_output(stream, chunk)` hears the output as it
    arrives (from the thread reading it; keep it quick), e.g. to show a long run's tail.
    `private`: more directories the run must not see (a workspace's own state directory)."""
    environment = dict(os.environ if env is None else env)
    outside = check_writable(writable, shadow.source)
    request = Request(
        time.monotonic(), freeze(manifest), command, python, rel(cwd), network, mode, environment,
        _layered(environment, outside, shadow.source),
        Limits(max_processes, max_memory, max_disk), timeout, output_cap, cancel, outside,
        capabilities.confinement(sandbox, network), on_output, tuple(private),
    )  # fmt: skip
    return _strategy(shadow)(shadow, request)


class ShadowView(Protocol):
    """What a run needs of a shadow; `Shadow` (a FUSE mount) and `DetachedShadow` (no mount)
    both have it. Which of them it is chooses the run's strategy (`_strategy`)."""

    source: str
    mountpoint: str
    store: BlobStore

    def activate(self, manifest: Mapping[RelPath, Override]) -> Any: ...
    def collect(self) -> dict[RelPath, Override | None]: ...


def _strategy(shadow: ShadowView) -> Callable[[Any, Request], RunResult]:
    """A mounted shadow runs in its view; a detached one (documents mode) in a private copy."""
    if isinstance(shadow, DetachedShadow):
        from .copy import run_in_copy  # copy.py builds on this module

        return run_in_copy
    return _run_mounted


@dataclass(frozen=True)
class Request:
    """One run, its arguments checked and resolved (the mount and the copy both take it)."""

    start: float  # time.monotonic() when asked
    manifest: Manifest
    command: str | Sequence[str]
    python: bool
    workdir: RelPath
    network: bool
    mode: str
    environment: dict[str, str]
    layered: tuple[str, ...]  # the paths given copy-on-write layers
    limits: Limits
    timeout: float
    output_cap: int
    cancel: threading.Event | None
    writable: tuple[str, ...]  # the `writable=` paths, checked
    confinement: Confinement  # the layer that confines the run
    on_output: OnOutput | None = None  # hears the output as it arrives
    private: tuple[str, ...] = ()  # directories hidden from the run, besides shadowkernel's own


def _run_mounted(shadow, request: Request) -> RunResult:  # fmt: skip
    manifest, network, notes = request.manifest, request.network, list[str]()
    view = _prepare(shadow, manifest, _choose(request.mode, request.confinement, shadow, notes))
    notes.append(request.confinement.note(network))
    after = None  # the manifest the overlay view shows after the run, if it can be kept
    try:
        argv = command_argv(request.command, request.python, shadow.source, view.root)
        with Layers(request.layered if view.bind else (), request.limits.disk, scratch_parent(),
                    view.mounter, unlisted=frozenset(TMP_DIRS)) as layers, \
                private_tmp(request.confinement.layer == "landlock") as tmp:  # fmt: skip
            notes += _failed_notes(layers)
            plan = sandbox_plan(shadow, view, argv, request.workdir, network, layers,
                                request.limits.disk, request.private)  # fmt: skip
            plan = confine(plan, request, [view.root, tmp] if tmp else [])
            ended = execute(plan, with_tmp(request.environment, tmp), request.timeout,
                            request.output_cap, request.limits, request.cancel,
                            request.on_output)  # fmt: skip
            outside = layers.written()
        outcome, notes = ended.outcome, notes + ended.notes
        written = _harvest(shadow, manifest, view)
        if ended.clean and not (outcome.timed_out or outcome.cancelled or outcome.limited):
            after = patched(manifest, written)  # else something may still write to it
    finally:
        if view.overlay:
            views_of(shadow, views_home(), view.mounter).release(view.overlay, after)
    return run_result(argv, outcome, written, view, network, notes, outside, ended.oom_kills,
                      setup=time.monotonic() - request.start - outcome.duration)  # fmt: skip


def confine(plan: Plan, request: Request, own: Sequence[str]) -> Plan:
    """`plan` confined by the request's layer (`sandbox.confined`); under Landlock the run
    writes only in `own` (its view or copy, its private /tmp) and the `writable=` paths."""
    layer = request.confinement
    return confined(plan, layer.layer, layer.abi, [*own, *request.writable], sys.executable,
                    seccomp.program_file() if layer.layer == "bwrap" else None)  # fmt: skip


SHARED_MOUNT = ("fuse", "fuse-at-mountpoint")  # views that show the shared FUSE mount


def view_mode(shadow, mode: str = "auto", network: bool = False, sandbox: bool = True) -> str:
    """How a run with these arguments would see `shadow`'s folder: "overlayfs" or "copy" (a
    view of its own), or one of `SHARED_MOUNT` (the shadow's own mount, which the run then
    holds: it activates its manifest there). Raises RunError for a run that cannot be made."""
    if isinstance(shadow, DetachedShadow):
        return "copy"
    return _choose(mode, capabilities.confinement(sandbox, network), shadow, [])


def not_started(shadow, command: str | Sequence[str], *, python: bool = False,
                network: bool = False, mode: str = "auto", why: str) -> RunResult:  # fmt: skip
    """The result of a run cancelled before it started: nothing ran, nothing was written."""
    argv = command_argv(command, python, shadow.source, shadow.source)
    view = view_mode(shadow, mode, network)
    return RunResult(
        command=tuple(argv), exit_code=None, stdout="", stderr="", stdout_truncated=False,
        stderr_truncated=False, duration=0.0, timed_out=False, written={}, mode=view,
        path_transparent=view != "fuse-at-mountpoint", network=network, notes=(why,),
        cancelled=True,
    )  # fmt: skip


def _layered(env: Mapping[str, str], writable: tuple[str, ...], source: str) -> tuple[str, ...]:
    """The paths given copy-on-write layers: /tmp and /var/tmp, the run's $HOME (unless it is
    the root or the project itself) and `writable`."""
    tmp = [p for p in TMP_DIRS if os.path.isdir(p)]
    home = os.path.realpath(env.get("HOME") or os.path.expanduser("~"))
    homes = [home] if os.path.isdir(home) and home not in ("/", source, *tmp) else []
    return tuple(dict.fromkeys(tmp + homes + list(writable)))


def private_tmpfs(layers: Layers) -> tuple[str, ...]:
    """Where the run gets an empty tmpfs: /dev/shm, and /tmp and /var/tmp unless layered
    (a normal user's layer over /tmp fails where anything is mounted below it: overlayfs in
    a user namespace cannot take a lower holding mounts it may not reveal)."""
    layered = {bind.target for bind in layers.binds}
    return tuple(p for p in PRIVATE_TMPFS if p not in layered)


def _failed_notes(layers: Layers) -> list[str]:
    empty = private_tmpfs(layers)
    return [f"{path} {'an empty tmpfs' if path in empty else 'read-only'} in the run, not "
            f"copy-on-write: {why}" for path, why in layers.failed.items()]  # fmt: skip


# -- choosing and preparing the view ------------------------------------------------------------


def _choose(mode: str, confinement: Confinement, shadow, notes: list[str]) -> str:
    if mode not in MODES:
        raise RunError(f"mode={mode!r} is not one of {', '.join(MODES)}")
    if confinement.layer != "bwrap":
        if mode == "overlayfs":
            raise RunError("mode='overlayfs' needs the sandbox (bwrap); use mode='fuse'")
        notes.append("ran at the mount path without a private mount namespace, so absolute "
                     "paths of the user's folder were not redirected to the shadow")  # fmt: skip
        return "fuse-at-mountpoint"
    problem = _overlay_problem(shadow.source)
    if mode == "overlayfs" and problem:
        raise RunError(f"mode='overlayfs' is unavailable: {problem}; use mode='fuse'")
    if mode == "auto" and problem:
        notes.append(f"overlayfs unavailable ({problem}): ran through the FUSE mount")
        return "fuse"
    return "overlayfs" if mode == "auto" else mode


def _overlay_problem(source: str) -> str | None:
    m = machine()
    if not m.overlayfs:
        return "the kernel has no overlayfs"
    if not m.root and (problem := userns_overlay_problem()):
        return problem
    if any(c in source for c in ",:\\"):
        return f"the folder path {source!r} holds ',', ':' or '\\'"
    scratch = os.path.realpath(scratch_parent())
    if is_within(scratch, source):
        return f"the scratch directory {scratch} lies inside the folder"
    return None


def scratch_parent() -> str:
    """Where upper layers go: tmpfs if there is one (creating a file on a disk costs ~0.4 ms
    here, on tmpfs ~10 us), else the temporary directory."""
    shm = "/dev/shm"
    if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK):
        return shm
    return tempfile.gettempdir()


def views_home() -> str:
    """Where kept views live: one directory for root, one per uid for other users."""
    home = HOME if machine().root else f"{HOME}-{os.geteuid()}"
    return os.path.join(scratch_parent(), home)


def _prepare(shadow, manifest: Manifest, mode: str) -> RunView:
    if mode == "overlayfs":
        m = mounter()
        overlay = views_of(shadow, views_home(), m).acquire(manifest)
        return RunView("overlayfs", shadow.source, Bind(overlay.mnt, shadow.source), m, overlay)
    shadow.activate(manifest)  # exactly the manifest: drops writes not collected since
    if mode == "fuse":
        return RunView("fuse", shadow.source, Bind(shadow.mountpoint, shadow.source), mounter())
    return RunView("fuse-at-mountpoint", shadow.mountpoint, None)


# -- the command --------------------------------------------------------------------------------


def command_argv(command: str | Sequence[str], python: bool, source: str, root: str) -> list[str]:
    if python:
        if not isinstance(command, str):
            raise RunError("python=True takes the code as one string")
        return [interpreter(source, root), "-c", command]
    if isinstance(command, str):
        return [shutil.which("bash") or "sh", "-c", command]
    argv = [os.fspath(part) for part in command]
    if not argv:
        raise RunError("command is empty; give a shell string or a non-empty argv list")
    return argv


def interpreter(source: str, root: str) -> str:
    """The workspace's own Python (its .venv) as the run sees it, else ours."""
    if os.access(os.path.join(source, ".venv", "bin", "python"), os.X_OK):
        return os.path.join(root, ".venv", "bin", "python")
    return sys.executable


def outermost(paths: Iterable[str]) -> tuple[str, ...]:
    """`paths` less those inside another of them: an empty tmpfs over a folder leaves no
    folder below it to cover (bwrap would fail to make one on the read-only tmpfs)."""
    unique = list(dict.fromkeys(os.path.realpath(p) for p in paths))
    return tuple(p for p in unique if not any(q != p and is_within(p, q) for q in unique))


def branch_folders(shadow: ShadowView) -> list[str]:
    """Where shadowkernel keeps branches' bytes outside the project: the spill folders of
    blobs past the memory budget (this shadow's, every user's folder of them this user may
    read, and folders older versions made one per process, all beside this shadow's) and the
    durable branches of every folder (the state home). A run of one branch reads neither."""
    own = shadow.store.spill_dir
    parent = os.path.dirname(own)
    root = os.path.dirname(parent) if os.path.basename(parent).startswith(SPILLS) else parent
    spills = [os.path.join(root, n) for n in _spill_names(root)]
    readable = [p for p in spills if os.geteuid() == 0 or _owned(p)]  # others' are 0700
    return [own, *readable, str(state_home())]


_listed: dict[str, tuple[int, tuple[str, ...]]] = {}  # folder -> (its mtime, its spill names)


def _spill_names(root: str) -> tuple[str, ...]:
    """The spill folders' names in `root`, listed again only when it changed (its mtime; one
    less than a second old may change again within the same clock tick, as git's racy index
    knows): a run's setup asks, and a temporary directory may hold thousands of entries (0.6 ms
    to list 1,500 here, against 13 us)."""
    try:
        mtime = os.stat(root).st_mtime_ns
        settled = time.time_ns() - mtime > 10**9
        if (known := _listed.get(root)) is None or known[0] != mtime or not settled:
            names = tuple(n for n in os.listdir(root) if n.startswith((SPILLS, SPILL_PREFIX)))
            _listed[root] = known = (mtime, names)
    except OSError:
        return ()
    return known[1]


def _owned(path: str) -> bool:
    try:
        return os.lstat(path).st_uid == os.geteuid()
    except OSError:
        return False


def sandbox_plan(shadow, view: RunView, argv: list[str], workdir: RelPath, network: bool,
                 layers: Layers, disk: int, private: Sequence[str] = ()) -> Plan:  # fmt: skip
    # Kept views of other branches, run layers, the shared FUSE mount, what shadowkernel keeps
    # of every branch and the buses: out of reach (a /tmp layer shows what lies in /tmp,
    # mounts aside), unless under an empty tmpfs.
    hidden = [views_home(), runs_home(scratch_parent(), layers.privileged), shadow.mountpoint,
              *branch_folders(shadow), *private, *BUSES]  # fmt: skip
    tmpfs = private_tmpfs(layers)
    # The interpreter shadowkernel runs on (python=True runs it) stays visible where an empty
    # tmpfs would cover it: a venv made under /tmp, say.
    interpreter = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix)}
    keep = tuple(sorted(p for p in interpreter if any(is_within(p, t) for t in tmpfs)))
    return Plan(
        argv=tuple(argv),
        cwd=os.path.join(view.root, workdir) if workdir else view.root,
        namespaces=view.bind is not None,
        network=network,
        privileged=machine().root,
        binds=(*layers.binds, view.bind) if view.bind else (),
        enter=view.mounter.enter,
        ids=None if view.mounter.privileged else (os.getuid(), os.getgid()),
        hide=outermost(
            p
            for p in hidden
            if os.path.isdir(p)
            and not any(is_within(p, t) for t in tmpfs)
            and not is_within(shadow.source, p)  # a project kept in a state home stays seen
        ),  # fmt: skip
        tmpfs=tmpfs,
        tmp_size=disk,
        keep=keep,
    )


@dataclass
class _Ended:
    outcome: Outcome
    notes: list[str]  # on the limits
    oom_kills: int = 0  # processes the kernel killed at the memory cap
    clean: bool = True  # no process of the run can still be running


def execute(plan: Plan, env: dict[str, str], timeout: float, cap: int, limits: Limits,
            cancel: threading.Event | None,
            on_output: OnOutput | None = None) -> _Ended:  # fmt: skip
    env["PWD"] = plan.cwd
    places = hierarchies()
    plan = replace(plan, max_processes=None if "pids" in places else limits.processes,
                   max_memory=None if "memory" in places else limits.memory)  # fmt: skip
    notes = _fallback_notes(plan)
    if not places:  # the PID namespace still ends every process with the run
        return _Ended(_start(plan, env, timeout, cap, cancel=cancel, on_output=on_output),
                      notes)  # fmt: skip
    cgroup = RunCgroup(places, limits.processes, limits.memory)
    try:
        plan = replace(plan, cgroup_procs=cgroup.procs_files)
        outcome = _start(plan, env, timeout, cap, cgroup.kill_all, cancel,
                         stop_when=lambda: cgroup.oom_kills() > 0,
                         on_output=on_output)  # fmt: skip
        refused, oom = cgroup.limit_hit(), cgroup.oom_kills()
    finally:
        emptied = cgroup.close()
    if refused:
        notes.append(f"process limit {limits.processes} reached: {refused} forks refused")
    if oom:
        notes.append(f"memory limit {limits.memory // 2**20} MiB reached: the kernel killed "
                     f"{oom} process(es), and the run was stopped")  # fmt: skip
    if not emptied:
        notes.append(f"some processes of the run outlived the kill (cgroups {cgroup.paths})")
    return _Ended(outcome, notes, oom, emptied)


# The remount of a submount of `--ro-bind / /` that went meanwhile: ENOENT or EINVAL. The
# private copy of the mount table (sandbox.SNAPSHOT) keeps out the machine's unmounts, but not
# the removal of a mountpoint's folder, which detaches that mount in every namespace.
SETUP_RACE = re.compile(r"bwrap: Can't bind mount /oldroot/ on /newroot/: Unable to apply "
                        r"mount flags: remount ")  # fmt: skip
# A lost race costs a few ms (bwrap fails before the command starts), so setups are retried for
# up to this long: under the test's churn (40 mounts coming and going in a tight loop) most
# tries lose, and 20 tries in a row were seen to lose; a second of tries is still a bound.
SETUP_SECONDS = 2.0


def _start(plan: Plan, *args: Any, **kwargs: Any) -> Outcome:
    """run_process, again when bwrap lost a race with the machine's mounts: `--ro-bind / /`
    remounts every mount it copied, and one unmounted meanwhile (another shadow's view, a
    FUSE mount ending) fails the setup before the command ever started."""
    deadline = time.monotonic() + SETUP_SECONDS
    while True:
        outcome = run_process(command_line(plan), *args, **kwargs)
        raced = outcome.exit_code == 1 and outcome.stdout.total == 0
        if not (raced and SETUP_RACE.match(outcome.stderr.text())) or time.monotonic() > deadline:
            return outcome


def _fallback_notes(plan: Plan) -> list[str]:
    notes = []
    if plan.max_processes is not None:
        notes.append("no writable pids cgroup: processes bounded by RLIMIT_NPROC (per uid)")
    if plan.max_memory is not None:
        notes.append("no writable memory cgroup: memory bounded per process (RLIMIT_AS)")
    return notes


# -- after the run ------------------------------------------------------------------------------


def _harvest(shadow, manifest: Manifest, view: RunView) -> dict[RelPath, Override | None]:
    if view.overlay is None:
        return shadow.collect()
    # The upper also holds what earlier runs on the view wrote: `manifest` holds that too.
    upper = view.mounter.path(os.path.join(view.overlay.scratch, "upper"))
    return read_upper(upper, shadow.source, manifest, shadow.store, view.mounter.xattrs)


def run_result(argv: list[str], outcome: Outcome, written: dict, view: RunView, network: bool,
               notes: list[str], outside: tuple[str, ...], oom: int,
               setup: float) -> RunResult:  # fmt: skip
    for name, capture in (("stdout", outcome.stdout), ("stderr", outcome.stderr)):
        if capture.truncated:
            notes.append(f"{name} truncated: {capture.total} bytes, kept the first and last "
                         f"{capture.cap // 2}")  # fmt: skip
    if outcome.timed_out:
        notes.append("timed out: the run and all its processes were killed")
    if outcome.cancelled:
        notes.append("cancelled: the run and all its processes were killed")
    return RunResult(
        command=tuple(argv), exit_code=outcome.exit_code,
        stdout=outcome.stdout.text(), stderr=outcome.stderr.text(),
        stdout_truncated=outcome.stdout.truncated, stderr_truncated=outcome.stderr.truncated,
        duration=outcome.duration, timed_out=outcome.timed_out, written=written,
        mode=view.mode, path_transparent=view.mode != "fuse-at-mountpoint", network=network,
        notes=tuple(notes), setup_seconds=max(setup, 0.0),
        stdout_bytes=outcome.stdout.total, stderr_bytes=outcome.stderr.total,
        cancelled=outcome.cancelled, written_outside=outside, out_of_memory=oom > 0,
    )  # fmt: skip
