"""Spill folders of killed processes: a SIGKILLed kernel runs no cleanup, so the next store
made on the machine removes the spill folders of dead processes, and only those."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from shadowkernel.overlay.store import BlobStore

# A process that spills one blob, says where, and waits to be killed.
SPILLER = """
import sys, time
from shadowkernel.overlay.store import BlobStore
store = BlobStore(memory_budget=0)
blob = store.make(b"x" * 4096)
print(store.spill_dir, flush=True)
time.sleep(600)
"""


def spiller(tmp: Path) -> tuple[subprocess.Popen[str], Path]:
    child = subprocess.Popen([sys.executable, "-c", SPILLER], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "TMPDIR": str(tmp)})  # fmt: skip
    assert child.stdout is not None
    return child, Path(child.stdout.readline().strip())


def test_a_killed_processs_spill_folder_goes_a_live_ones_stays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    killed, killed_dir = spiller(tmp_path)
    alive, alive_dir = spiller(tmp_path)
    parent = tmp_path / f"shadowkernel-spills-{os.geteuid()}"  # this user's, 0700
    try:
        assert killed_dir.parent == parent and any(killed_dir.iterdir())
        assert oct(parent.stat().st_mode & 0o777) == "0o700"
        killed.send_signal(signal.SIGKILL)
        killed.wait()
        assert killed_dir.exists()  # nothing removed it
        unrelated = parent / "shadowkernel-spill-notapid"  # not one of ours by name: kept
        unrelated.mkdir()
        older = tmp_path / f"shadowkernel-spill-{killed.pid}-old"  # an older version's place
        older.mkdir()
        store = BlobStore()
        try:
            assert not killed_dir.exists() and not older.exists()
            assert alive_dir.exists() and any(alive_dir.iterdir())
            assert unrelated.exists()
            assert Path(store.spill_dir).name.startswith(f"shadowkernel-spill-{os.getpid()}-")
        finally:
            store.close()
    finally:
        for child in (killed, alive):
            child.kill()
            child.wait()
