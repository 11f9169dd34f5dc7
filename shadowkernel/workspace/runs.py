"""A branch's runs: a command at the branch's version plus its scratch layer, and what
`keep=True` makes of the run's writes.

The scratch layer (`scratch.Scratch`) holds what runs wrote that no version holds; later runs
see it, lints, diff() and accept() do not. With `keep=True` what the run wrote under the
project becomes the next version instead (see `scratch.kept` for what is kept).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import ShadowError
from ..overlay.store import Dir, File, Override
from ..paths import RelPath
from ..run import RunResult, run_in_shadow
from ..sched import Lane
from . import arguments, scratch
from .folder import Folder
from .staging import LINK, Version, n_files
from .state import file_bytes

if TYPE_CHECKING:
    from .branch import Branch


def check(
    cmd: Any, timeout: Any, network: Any, keep: Any, options: Mapping[str, Any]
) -> tuple[str | list[str], float, bool, bool]:
    """The run's arguments, checked before anything is queued."""
    arguments.options(run_in_shadow, options, taken={"timeout", "network"})
    if "sandbox" in options:  # False: unconfined, asked for by name (never implied)
        arguments.flag("sandbox", options["sandbox"])
    return (arguments.command(cmd), arguments.seconds("timeout", timeout),
            arguments.flag("network", network), arguments.flag("keep", keep))  # fmt: skip


async def run(branch: Branch, cmd: str | list[str], timeout: float, network: bool, keep: bool,
              options: dict[str, Any]) -> RunResult:  # fmt: skip
    """Queue the run on the scheduler; its writes go to the scratch layer (or the next version)."""
    state = branch.state
    with state.lock:
        state.check_open()
        version = state.head

    async def job(lane: Lane) -> tuple[RunResult, str]:
        with state.lock:
            # Staging drops a path from the scratch layer, so what is left there is newer.
            manifest = state.scratch.over(version.manifest)
        result = await asyncio.to_thread(
            run_in_shadow, lane.shadow, manifest, cmd, timeout=timeout, network=network,
            **options,
        )  # fmt: skip
        written = dict(result.written)
        state.absorb(written)
        lane.run_wrote(set(written))
        how = "timed out" if result.timed_out else f"exit {result.exit_code}"
        return result, f"{how}, {n_files(len(written))} written ({result.mode})"

    result: RunResult = await branch.workspace.submit(branch, version.number, "run", "run", job)
    if keep:
        kept, refused = stage_kept(branch, result.written)
        notes = [f"kept as version {kept}"] if kept is not None else []
        if refused:
            notes.append(refused_note(refused))
        result = dataclasses.replace(result, notes=(*result.notes, *notes))
    return result


def stage_kept(
    branch: Branch, written: Mapping[RelPath, Override | None]
) -> tuple[int | None, list[RelPath]]:
    """Stage what a run wrote as the branch's next version (None when nothing was keepable),
    and the protected paths it wrote, which are never kept (DESIGN invariant 7)."""
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
        if not data:
            return None, refused
        modes = {p: m for p, m in modes.items() if p in data}
        branch.workspace.check_open()
        kept = state.stage(data, f"run kept ({n_files(len(data))})", folder,
                           branch.workspace.store.make, None, modes)  # fmt: skip
        return kept, refused


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
