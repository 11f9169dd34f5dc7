"""`shadowkernel mount` in the foreground, as a user runs it."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from overlay_helpers import needs_fuse, snapshot

from shadowkernel.overlay import mounts


def shadowkernel(*args: str) -> list[str]:
    return [sys.executable, "-m", "shadowkernel.cli", *args]


@needs_fuse
def test_mount_serves_until_ctrl_c_and_unmounts(project: Path, tmp_path: Path) -> None:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    before = snapshot(project)
    proc = subprocess.Popen(
        shadowkernel("mount", str(project), str(mnt)), stdout=subprocess.PIPE, text=True
    )
    try:
        assert "mounted at" in proc.stdout.readline()
        assert (mnt / "pkg/mod.py").read_text().startswith("def add")
        (mnt / "pkg/mod.py").write_text("edited in the shadow\n")
        assert (mnt / "pkg/mod.py").read_text() == "edited in the shadow\n"
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0 and "unmounted" in out
    assert str(mnt) not in mounts.shadow_mounts()
    assert snapshot(project) == before


def test_mount_of_a_missing_folder_is_one_clear_line(tmp_path: Path) -> None:
    result = subprocess.run(
        shadowkernel("mount", str(tmp_path / "nope"), str(tmp_path / "mnt")),
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert (
        result.stderr.strip()
        == f"shadowkernel mount: source {str(tmp_path / 'nope')!r} is not a directory"
    )
