"""A branch's runs: a command at the branch's version plus its scratch layer, and what
`keep=True` makes of the run's writes.

The scratch layer (`scratch.Scratch`) holds what runs wrote that no version holds; later runs
see it, lints, diff() and accept() do not. With `keep=True` what the run wrote under the
project becomes the next version instead (see `scratch.kept` for what is kept).

A run waits for its turn in the workspace's `RunQueue` (other branches' runs at once, this
branch's in turn), then goes in a view of its own (an overlayfs view, or a private copy in
documents mode) on a thread of its own, and is put on the timeline outside the lanes. Only a
run through the FUSE mount (`mode="fuse"`, or no overlayfs here) is a lane job: the mount
shows its manifest while it goes. What a run wrote joins the scratch layer when it ends, less
the paths staged meanwhile: the staged edit is the newer word on those.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import threading
from collections.abc import Callable, Mapping, Sequence, Set
from typing import TYPE_CHECKING, Any

from ..errors import ArgumentError, ClosedError, PathError, ShadowError, StagingError
from ..overlay.store import Dir, File, Override, changed_paths
from ..paths import RelPath
from ..run import RunResult, run_in_shadow
from ..run.runner import MODES, SHARED_MOUNT, not_started, view_mode
from ..sched import Answer, Lane
from . import arguments, scratch
from .folder import Folder
from .runqueue import in_thread
from .staging import LINK, Version, n_files
from .state import file_bytes

if TYPE_CHECKING:
    from .branch import Branch


# Linux refuses one argument over MAX_ARG_STRLEN (32 pages, 128 KiB) with E2BIG, its NUL
# included; a command string is one argument of `bash -c` (or `python -c`).
ARGUMENT_LIMIT = 32 * os.sysconf("SC_PAGE_SIZE") - 1  # bytes of UTF-8


def check(
    cmd: Any, timeout: Any, network: Any, keep: Any, options: dict[str, Any]
) -> tuple[str | list[str], float, bool, bool]:
    """The run's arguments, checked before anything is queued: each of `options` too (an
    ArgumentError naming the option, its value and what it takes), normalized in place
    (`cancel` None: a new event, `writable` a tuple)."""
    arguments.options(run_in_shadow, options, taken={"timeout", "network"})
    for name, value in list(options.items()):
        options[name] = _OPTIONS[name](name, value)
    if options.get("cancel") is None:
        options["cancel"] = threading.Event()
    command = arguments.command(cmd)
    for word in [command] if isinstance(command, str) else command:
        if (size := len(word.encode("utf-8", "surrogatepass"))) > ARGUMENT_LIMIT:
            raise ArgumentError(f"cmd: an argument of {size} bytes, over the {ARGUMENT_LIMIT} "
                                "bytes Linux takes in one (a command string is one, for bash "
                                "-c); stage the script with write() and run it, e.g. 'bash "
                                "gen.sh'")  # fmt: skip
    return (command, arguments.seconds("timeout", timeout),
            arguments.flag("network", network), arguments.flag("keep", keep))  # fmt: skip


def _environment(name: str, value: object) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ArgumentError(f"{name}={arguments.show(value)}: give a dict of str to str (the "
                            "run's whole environment), or None for the kernel's")  # fmt: skip
    for key, item in value.items():
        if not isinstance(key, str) or not isinstance(item, str) or not key or "=" in key \
                or "\0" in key or "\0" in item:  # fmt: skip
            raise ArgumentError(f"{name}: the entry {key!r}: {item!r} is not a variable; give "
                                "a dict of str to str (names without '=', e.g. "
                                "{'FOO': '1'})")  # fmt: skip
    return dict(value)


def _writable(name: str, value: object) -> tuple[str, ...]:
    if isinstance(value, str | bytes | os.PathLike) or not isinstance(value, Sequence | Set):
        raise ArgumentError(f"{name}={arguments.show(value)}: give a list of absolute paths "
                            f"of directories, e.g. [{arguments.show(value)}]")  # fmt: skip
    for path in value:
        if not isinstance(path, str | os.PathLike):
            raise ArgumentError(f"{name}: {arguments.show(path)} is not a path; give a list "
                                "of absolute paths of directories (str)")  # fmt: skip
    return tuple(os.fspath(p) for p in value)


def _cancel(name: str, value: object) -> Any:
    if value is None or (callable(getattr(value, "set", None))
                         and callable(getattr(value, "is_set", None))):  # fmt: skip
        return value
    raise ArgumentError(f"{name}={arguments.show(value)}: give a threading.Event (set it to "
                        "cancel the run), or leave it out")  # fmt: skip


def _on_output(name: str, value: object) -> Any:
    if value is None or callable(value):
        return value
    raise ArgumentError(f"{name}={arguments.show(value)}: give a function on_output(stream, "
                        "chunk) (stream 'stdout' or 'stderr', chunk bytes), or None")  # fmt: skip


def _cwd(name: str, value: object) -> object:
    """A folder of the project to run in, relative to it ('.' or '': the project itself)."""
    if isinstance(value, str | os.PathLike) and os.fspath(value) in ("", "."):
        return value
    return arguments.path(name, value)


def _mode(name: str, value: object) -> str:
    if not isinstance(value, str):  # which names: `view_mode` says, a RunError
        raise ArgumentError(f"{name}={arguments.show(value)}: give one of "
                            f"{', '.join(map(repr, MODES))}")  # fmt: skip
    return value


def _amount(what: str, least: int = 1) -> Callable[[str, object], int]:
    return lambda name, value: arguments.count(name, value, least, what)


# Each option of `run_in_shadow` a run takes, and its check (the value it passes on).
_OPTIONS: dict[str, Callable[[str, Any], Any]] = {
    "python": arguments.flag,
    "sandbox": arguments.flag,  # False: unconfined, asked for by name (never implied)
    "mode": _mode,
    "env": _environment,
    "cwd": _cwd,
    "writable": _writable,
    "output_cap": _amount("the bytes of each stream to keep, e.g. 2**20", least=0),
    "max_processes": _amount("the most processes the run may have at once, e.g. 256"),
    "max_memory": _amount("the bytes of memory for the whole run, e.g. 2 * 2**30"),
    "max_disk": _amount("the bytes of each of the run's throwaway tmpfs, e.g. 2**30"),
    "cancel": _cancel,
    "on_output": _on_output,
}


async def run(branch: Branch, cmd: str | list[str], timeout: float, network: bool, keep: bool,
              options: dict[str, Any]) -> RunResult:  # fmt: skip
    """Run at the branch's current version once it is the run's turn (see `runqueue`); its
    writes go to the scratch layer (or the next version, with `keep`)."""
    state = branch.state
    with state.lock:
        state.check_open()
        version = state.head
    options.setdefault("cancel", threading.Event())
    one = _Run(branch, version, cmd, timeout, network, options)
    workspace = branch.workspace
    result = await workspace.run_queue.run(state.key, options["cancel"], one.turn)
    if workspace.closed:
        raise ClosedError(f"the workspace was closed while branch {branch.name!r}'s run was "
                          "queued or running; its processes were killed")  # fmt: skip
    if result is None:  # cancelled while queued
        result = one.unstarted()
        one.began = workspace.now()
        _record(branch, version, one.queued, one.began, result)
    result = dataclasses.replace(result, queue_seconds=max(one.began - one.queued, 0.0))
    # A cancelled run's writes stay in the scratch layer: half a codemod is no version.
    if keep and not result.cancelled:
        kept, refused, unkept = stage_kept(branch, result.written)
        notes = [f"kept as version {kept}"] if kept is not None else []
        if refused:
            notes.append(refused_note(refused))
        if unkept:
            notes.append(unkept_note(unkept))
        result = dataclasses.replace(result, notes=(*result.notes, *notes))
    return result


class _Run:
    """One run of a branch at a version, from its turn to its record on the timeline."""

    def __init__(self, branch: Branch, version: Version, cmd: str | list[str], timeout: float,
                 network: bool, options: dict[str, Any]) -> None:  # fmt: skip
        self.branch, self.version, self.cmd = branch, version, cmd
        self.timeout, self.network, self.options = timeout, network, options
        self.shadow = branch.workspace.shadows[0]  # any lane's: its own view reads the folder
        self.mode = view_mode(self.shadow, options.get("mode", "auto"), network,
                              options.get("sandbox", True))  # fmt: skip
        self.queued = self.began = branch.workspace.now()  # its queue time: began - queued

    async def turn(self) -> RunResult:
        self.began = self.branch.workspace.now()
        if self.mode in SHARED_MOUNT:  # the shared FUSE mount shows its manifest: hold a lane
            submit = self.branch.workspace.submit
            return await submit(self.branch, self.version.number, "run", "run", self.on_a_lane)  # type: ignore[no-any-return]
        try:
            result = await in_thread(lambda: self.execute(self.shadow))
        except Exception as error:
            _record(self.branch, self.version, self.queued, self.began, error)
            raise
        _record(self.branch, self.version, self.queued, self.began, result)
        return result

    async def on_a_lane(self, lane: Lane) -> Answer[RunResult]:
        self.began = self.branch.workspace.now()
        if self.options["cancel"].is_set():  # while it waited for the lane
            return Answer(self.unstarted(), "cancelled while queued")
        result = await asyncio.to_thread(self.execute, lane.shadow)
        lane.run_wrote(set(result.written))
        return Answer(result, _outcome(result), exit_code=result.exit_code)

    def execute(self, shadow: Any) -> RunResult:
        with self.branch.state.lock:
            # Staging drops a path from the scratch layer, so what is left there is newer.
            manifest = self.branch.state.scratch.over(self.version.manifest)
        state_dir = self.branch.workspace.state_dir  # the branches kept there: none to see
        result = run_in_shadow(shadow, manifest, self.cmd, timeout=self.timeout,
                               network=self.network, private=(state_dir,) if state_dir else (),
                               **self.options)  # fmt: skip
        _absorb(self.branch, self.version, result.written)
        return result

    def unstarted(self) -> RunResult:
        return not_started(self.shadow, self.cmd, python=self.options.get("python", False),
                           network=self.network, mode=self.options.get("mode", "auto"),
                           why=QUEUED_NOTE)  # fmt: skip


QUEUED_NOTE = "cancelled while queued: nothing ran"


def _absorb(branch: Branch, version: Version, written: Mapping[RelPath, Override | None]) -> None:
    """Put what a run wrote in the branch's scratch layer, less what was staged since the run
    was asked for (a staged edit wins over a run's write, as staging's `discard` says)."""
    state = branch.state
    with state.lock:
        if state.status != "open":
            return
        staged = set(changed_paths(version.manifest, state.head.manifest))
        state.absorb({p: o for p, o in written.items() if p not in staged})


def _record(branch: Branch, version: Version, queued: float, started: float,
            answer: RunResult | Exception) -> None:  # fmt: skip
    """Put a run served outside the lanes on the timeline; preparing its view is its switch."""
    if isinstance(answer, Exception):
        outcome = f"{type(answer).__name__}: {answer}"[:200]
        branch.workspace.record(branch.name, version.number, "run", "run", queued, started,
                                ok=False, outcome=outcome)  # fmt: skip
    else:
        branch.workspace.record(branch.name, version.number, "run", "run", queued, started,
                                switch=answer.setup_seconds, outcome=_outcome(answer),
                                exit_code=answer.exit_code)  # fmt: skip


def _outcome(result: RunResult) -> str:
    how = ("timed out" if result.timed_out else "cancelled" if result.cancelled
           else f"exit {result.exit_code}")  # fmt: skip
    return f"{how}, {n_files(len(result.written))} written ({result.mode})"


def stage_kept(
    branch: Branch, written: Mapping[RelPath, Override | None]
) -> tuple[int | None, list[RelPath], dict[RelPath, str]]:
    """Stage what a run wrote as the branch's next version (None when nothing was keepable),
    the protected paths it wrote, which are never kept (DESIGN invariant 7), and the writes
    a version cannot hold, with why (a file where the user's folder has a directory, say).
    The last two stay in the scratch layer; the run's result is never lost to them."""
    state, folder = branch.state, branch.workspace.folder
    with state.lock:
        version = state.head
        rules = scratch.ignore_rules(lambda p: _file_bytes(folder, version, p), written)
        protection = branch.workspace.protection
        allowed, refused = protection.allowed(p for p, o in written.items()
                                              if not isinstance(o, Dir))  # fmt: skip
        data, modes = scratch.kept({p: written[p] for p in allowed}, rules,
                                   lambda f: _override_bytes(folder, f))  # fmt: skip
        links = [p for p in data if modes.get(p) == LINK
                 and protection.link_reason(p, data[p] or b"") is not None]  # fmt: skip
        allowed, refused = [p for p in data if p not in links], sorted([*refused, *links])
        data = {p: data[p] for p in allowed
                if data[p] is not None or _file_bytes(folder, version, p) is not None}  # fmt: skip
        unkept = _unkeepable(state.bases, folder, data)
        data = {p: d for p, d in data.items() if p not in unkept}
        if not data:
            return None, refused, unkept
        modes = {p: m for p, m in modes.items() if p in data}
        branch.workspace.check_open()
        try:
            kept = state.stage(data, f"run kept ({n_files(len(data))})", folder,
                               branch.workspace.store.make, None, modes)  # fmt: skip
        except (StagingError, PathError) as error:  # all or none: the rest may need them
            return None, refused, {**unkept, **dict.fromkeys(data, str(error))}
        return kept, refused, unkept


def _unkeepable(bases: Mapping[RelPath, Any], folder: Folder,
                data: Mapping[RelPath, bytes | None]) -> dict[RelPath, str]:  # fmt: skip
    """The paths of `data` staging would refuse, and why: a path first touched takes its base
    from the user's folder, which must hold a file, a symlink or nothing there."""
    unkept = {}
    for path in data:
        if path not in bases:
            try:
                folder.entry(path)
            except ShadowError as error:
                unkept[path] = ("a file where the user's folder has a directory"
                                if folder.is_dir(path) else str(error))  # fmt: skip
    return unkept


def unkept_note(unkept: Mapping[RelPath, str], shown: int = 5) -> str:
    paths = sorted(unkept)
    more = f"; and {len(paths) - shown} more" if len(paths) > shown else ""
    listed = "; ".join(f"{unkept[p]}" if unkept[p].startswith(p) else f"{p}: {unkept[p]}"
                       for p in paths[:shown])  # fmt: skip
    return (f"not kept as a version: {n_files(len(paths))} a version cannot hold (they stay "
            f"in the run's scratch, which later runs see; scratch() lists it): "
            f"{listed}{more}")  # fmt: skip


def refused_note(paths: list[RelPath], shown: int = 10) -> str:
    more = f" and {len(paths) - shown} more" if len(paths) > shown else ""
    listed = ", ".join(paths[:shown])
    return (f"not kept: {n_files(len(paths))} in version-control metadata, protect= globs or "
            f"links to them (they stay in the run's scratch): {listed}{more}")  # fmt: skip


def _file_bytes(folder: Folder, version: Version, path: RelPath) -> bytes | None:
    try:
        return file_bytes(version, path, folder)
    except ShadowError:  # a directory or symlink there: not a file to keep or delete
        return None


def _override_bytes(folder: Folder, override: File) -> bytes:
    if override.blob is not None:
        return override.blob.bytes()
    data = folder.content(override.origin) if override.origin else None
    return data or b""
