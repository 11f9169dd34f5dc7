"""A workspace left open by a script that ends, or dies, is closed at exit: no hang, no mount."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from overlay_helpers import needs_fuse

from shadowkernel.overlay import mounts

pytestmark = needs_fuse

SCRIPT = """
import sys
import shadowkernel as sk
ws = sk.Workspace(sys.argv[1], servers=["ruff"])
b = ws.branch("a")
b.write("m.py", "import os\\n")
assert list(b.lint()["code"]) == ["F401"]
print(ws._shadows[0].mountpoint, flush=True)
if sys.argv[2] == "raise":
    raise RuntimeError("the agent script crashed")
"""


@pytest.mark.parametrize("ending", ["return", "raise"])
def test_an_open_workspace_is_closed_when_the_script_ends(tmp_path: Path, ending: str) -> None:
    (tmp_path / "m.py").write_text("x = 1\n")
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path), ending], capture_output=True, text=True, timeout=60
    )
    mountpoint = done.stdout.strip()
    assert mountpoint, done.stderr
    assert done.returncode == (1 if ending == "raise" else 0), done.stderr
    assert mountpoint not in mounts.shadow_mounts()
    assert (tmp_path / "m.py").read_text() == "x = 1\n"
