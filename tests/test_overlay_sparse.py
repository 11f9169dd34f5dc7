"""Sparse sizes cost the overlay process nothing: a 2 GB truncate through the mount allocates
no zeros (the overlay's resident memory barely moves), reads as zeros, and a branch that keeps
it stores a sparse blob whose bytes read back exactly."""

from __future__ import annotations

import os
from pathlib import Path

from overlay_helpers import make_project, needs_fuse, snapshot

from shadowkernel.overlay.shadow import Shadow

GB = 2**30


def resident_bytes(pid: int) -> int:
    """The process's resident set (anonymous and file pages), from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


@needs_fuse
def test_a_two_gigabyte_truncate_costs_the_overlay_next_to_no_memory(tmp_path: Path) -> None:
    folder = make_project(tmp_path / "folder")
    before_folder = snapshot(folder)
    with Shadow(folder) as shadow:
        assert shadow.pid is not None
        path = Path(shadow.mountpoint) / "pkg/big.dat"
        path.write_bytes(b"start")
        idle = resident_bytes(shadow.pid)
        os.truncate(path, 2 * GB)
        grown = resident_bytes(shadow.pid) - idle
        assert path.stat().st_size == 2 * GB
        with open(path, "rb") as f:
            assert f.read(5) == b"start"
            f.seek(GB)
            assert f.read(4096) == bytes(4096)
        assert grown < 32 * 2**20, f"the overlay grew by {grown} bytes for a sparse truncate"

        written = shadow.collect()  # freezing copies the data, not the hole
        blob = written["pkg/big.dat"].blob  # type: ignore[union-attr]
        assert blob.size == 2 * GB
        assert blob.read(0, 5) == b"start" and blob.read(GB, 8) == bytes(8)
        assert resident_bytes(shadow.pid) - idle < 32 * 2**20
    assert snapshot(folder) == before_folder
