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
from ..overlay.store import File, Override
from ..paths import RelPath
from ..run import RunResult, run_in_shadow
from ..sched import Lane
from . import arguments, scratch
from .staging import Version, n_files

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
    with branch._lock:
        branch._check_open()
        version = branch._versions[-1]

    async def job(lane: Lane) -> tuple[RunResult, str]:
        with branch._lock:
            # Staging drops a path from the scratch layer, so what is left there is newer.
            manifest = branch._scratch.over(version.manifest)
        result = await asyncio.to_thread(
            run_in_shadow, lane.shadow, manifest, cmd, timeout=timeout, network=network,
            **options,
        )  # fmt: skip
        written = dict(result.written)
        with branch._lock:
            branch._scratch.absorb(written)
        lane.run_wrote(set(written))
        how = "timed out" if result.timed_out else f"exit {result.exit_code}"
        return result, f"{how}, {n_files(len(written))} written ({result.mode})"

    result: RunResult = await branch.workspace.submit(branch, version.number, "run", "run", job)
    kept = stage_kept(branch, result.written) if keep else None
    if kept is not None:
        result = dataclasses.replace(result, notes=(*result.notes, f"kept as version {kept}"))
    return result


def stage_kept(branch: Branch, written: Mapping[RelPath, Override | None]) -> int | None:
    """Stage what a run wrote as the branch's next version; None when nothing was keepable."""
    with branch._lock:
        version = branch._versions[-1]
        rules = scratch.ignore_rules(lambda p: _file_bytes(branch, version, p), written)
        data = scratch.kept(written, rules, lambda f: _override_bytes(branch, f))
        data = {p: d for p, d in data.items()
                if d is not None or _file_bytes(branch, version, p) is not None}  # fmt: skip
        if not data:
            return None
        return branch._stage(data, f"run kept ({n_files(len(data))})")


def _file_bytes(branch: Branch, version: Version, path: RelPath) -> bytes | None:
    try:
        return branch._current_bytes(version, path)
    except ShadowError:  # a directory or symlink there: not a file to keep or delete
        return None


def _override_bytes(branch: Branch, override: File) -> bytes:
    if override.blob is not None:
        return override.blob.bytes()
    data = branch.workspace.folder.content(override.origin) if override.origin else None
    return data or b""
