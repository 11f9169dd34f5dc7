"""`run_in_shadow`: run a command in a manifest's view of the user's folder.

Two ways to show the view, chosen per run (`mode`):

- "overlayfs" (heavy runs, near native speed): a kernel overlayfs view (lower = the user's
  folder, upper = `write_upper(manifest)` in a private scratch directory), bound over the
  user's own path in a private mount namespace; afterwards `read_upper` harvests what the run
  wrote. Views stay mounted between runs so their caches stay warm (`views.py`). Needs root
  (the upper holds trusted.* xattrs and whiteout devices).
- "fuse": the shadow's live FUSE mount, bound over the user's own path in a private mount
  namespace; the manifest is activated first and the run's writes collected after. The
  mount is shared, so other clients (language servers) see the run's writes meanwhile.
- "fuse-at-mountpoint": where no mount namespace can be made, the run works in the mount
  path itself (`path_transparent=False`): absolute paths of the user's folder then reach the
  real folder, so this mode is only chosen when nothing better exists, and says so.

Either way the run's writes never reach the user's folder: they land in the upper layer or
in the shadow's override table, and the run cannot unmount its view (no CAP_SYS_ADMIN).

Python code (`python=True`) runs with the workspace's own interpreter (`.venv/bin/python` in
the user's folder) when there is one, since that is what its code is written against, and
with `sys.executable` otherwise.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..errors import RunError
from ..overlay.store import Manifest, Override, freeze, patched
from ..overlay.upper import read_upper
from ..paths import ROOT, RelPath, is_within, rel
from .cgroup import PidsCgroup, pids_hierarchy
from .process import Outcome, run_process
from .result import DEFAULT_OUTPUT_CAP, RunResult
from .sandbox import Plan, command_line, machine, offline_netns
from .views import HOME, View, views_of

MODES = ("auto", "fuse", "overlayfs")
DEFAULT_MAX_PROCESSES = 1024


@dataclass(frozen=True)
class _View:
    """Where and how the run sees the shadow."""

    mode: str
    root: str  # the path the run sees the view at
    mount: tuple[str, ...]
    overlay: View | None = None  # overlayfs: the kept view the run binds
    hide: str | None = None  # covered in the run's namespace once the view is bound


def run_in_shadow(
    shadow, manifest: Mapping[RelPath, Override], command: str | Sequence[str], *,
    timeout: float = 60, network: bool = False, python: bool = False,
    output_cap: int = DEFAULT_OUTPUT_CAP, mode: str = "auto", env: Mapping[str, str] | None = None,
    cwd: str = ROOT, max_processes: int = DEFAULT_MAX_PROCESSES,
    cancel: threading.Event | None = None,
) -> RunResult:  # fmt: skip
    """Run `command` (a shell string, an argv list, or Python code with `python=True`) in
    `manifest`'s view of `shadow.source`, and return its output and what it wrote.
    Setting `cancel` (from any thread) kills the run and all its processes."""
    start = time.monotonic()
    manifest = freeze(manifest)
    workdir, notes = rel(cwd), []
    view = _prepare(shadow, manifest, _choose(mode, network, shadow, notes))
    after = None  # the manifest the overlay view shows after the run, if it can be kept
    try:
        argv = _argv(command, python, shadow.source, view.root)
        plan = _plan(view, argv, workdir, network)
        outcome, cgroup_notes = _execute(plan, env, timeout, output_cap, max_processes, cancel)
        notes += cgroup_notes
        written = _harvest(shadow, manifest, view)
        if not (outcome.timed_out or outcome.cancelled or cgroup_notes):
            after = patched(manifest, written)  # else something may still write to it
    finally:
        if view.overlay:
            views_of(shadow, views_home()).release(view.overlay, after)
    return _result(argv, outcome, written, view, network, notes,
                   setup=time.monotonic() - start - outcome.duration)  # fmt: skip


# -- choosing and preparing the view ------------------------------------------------------------


def _choose(mode: str, network: bool, shadow, notes: list[str]) -> str:
    if mode not in MODES:
        raise RunError(f"mode={mode!r} is not one of {', '.join(MODES)}")
    m = machine()
    if not m.namespaces:
        if not network:
            raise RunError("this machine cannot make a private network namespace (needs "
                           "root or user namespaces, unshare and ip); pass network=True to "
                           "run with the network anyway")  # fmt: skip
        if mode == "overlayfs":
            raise RunError("mode='overlayfs' needs private mount namespaces; use mode='fuse'")
        notes.append("no private mount namespace here: ran at the mount path, so absolute "
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
    if not m.root:
        return "the upper layer needs root (trusted.* xattrs)"
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
    return os.path.join(scratch_parent(), HOME)


def _prepare(shadow, manifest: Manifest, mode: str) -> _View:
    if mode == "overlayfs":
        overlay = views_of(shadow, views_home()).acquire(manifest)
        return _View("overlayfs", shadow.source, ("mount", "--bind", overlay.mnt, shadow.source),
                     overlay, hide=views_home())  # fmt: skip
    shadow.activate(manifest)  # exactly the manifest: drops writes not collected since
    if mode == "fuse":
        return _View("fuse", shadow.source, ("mount", "--bind", shadow.mountpoint, shadow.source))
    return _View("fuse-at-mountpoint", shadow.mountpoint, ())


# -- the command --------------------------------------------------------------------------------


def _argv(command: str | Sequence[str], python: bool, source: str, root: str) -> list[str]:
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


def _plan(view: _View, argv: list[str], workdir: RelPath, network: bool) -> Plan:
    m = machine()
    return Plan(
        argv=tuple(argv),
        cwd=os.path.join(view.root, workdir) if workdir else view.root,
        namespaces=view.mode != "fuse-at-mountpoint",
        network=network,
        privileged=m.root,
        mount=view.mount,
        hide=view.hide,
        drop_caps=m.setpriv,
        netns=None if network or view.mode == "fuse-at-mountpoint" else _netns(),
    )


_offline: list[str | None] = []


def _netns() -> str | None:
    if not _offline or (_offline[0] and not os.path.exists(_offline[0])):
        _offline[:] = [offline_netns()]  # once per process: `ip` costs milliseconds
    return _offline[0]


def _execute(plan: Plan, env: Mapping[str, str] | None, timeout: float, cap: int,
             max_processes: int,
             cancel: threading.Event | None) -> tuple[Outcome, list[str]]:  # fmt: skip
    environment = dict(os.environ if env is None else env)
    environment["PWD"] = plan.cwd
    parent = pids_hierarchy()
    if parent is None:
        notes = ["no writable pids cgroup: the run's process count was not bounded"]
        return run_process(command_line(plan), environment, timeout, cap, cancel=cancel), notes
    cgroup = PidsCgroup(parent, max_processes)
    try:
        plan = Plan(**{**plan.__dict__, "cgroup_procs": cgroup.procs_file})
        outcome = run_process(command_line(plan), environment, timeout, cap, cgroup.kill_all,
                              cancel)  # fmt: skip
        refused = cgroup.limit_hit()
    finally:
        emptied = cgroup.close()
    notes = [f"process limit {max_processes} reached: {refused} forks refused"] if refused else []
    if not emptied:
        notes.append(f"some processes of the run outlived the kill (cgroup {cgroup.path})")
    return outcome, notes


# -- after the run ------------------------------------------------------------------------------


def _harvest(shadow, manifest: Manifest, view: _View) -> dict[RelPath, Override | None]:
    if view.overlay is None:
        return shadow.collect()
    # The upper also holds what earlier runs on the view wrote: `manifest` holds that too.
    upper = os.path.join(view.overlay.scratch, "upper")
    return read_upper(upper, shadow.source, manifest, shadow.store)


def _result(argv: list[str], outcome: Outcome, written: dict, view: _View, network: bool,
            notes: list[str], setup: float) -> RunResult:  # fmt: skip
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
        cancelled=outcome.cancelled,
    )  # fmt: skip
