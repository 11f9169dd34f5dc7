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
    try:
        assert killed_dir.parent == tmp_path and any(killed_dir.iterdir())
        killed.send_signal(signal.SIGKILL)
        killed.wait()
        assert killed_dir.exists()  # nothing removed it
        unrelated = tmp_path / "shadowkernel-spill-notapid"  # not one of ours by name: kept
        unrelated.mkdir()
        store = BlobStore()
        try:
            assert not killed_dir.exists()
            assert alive_dir.exists() and any(alive_dir.iterdir())
            assert unrelated.exists()
            assert Path(store.spill_dir).name.startswith(f"shadowkernel-spill-{os.getpid()}-")
        finally:
            store.close()
    finally:
        for child in (killed, alive):
            child.kill()
            child.wait()
