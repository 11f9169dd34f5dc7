"""A workspace left open by a script that ends, or dies, is closed at exit: no hang, no mount."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from kernel_helpers import RECEIVERS, default_sigint, interrupt
from overlay_helpers import needs_fuse
from waiting import wait_for

from shadowkernel.overlay import mounts

pytestmark = needs_fuse

SCRIPT = """
import sys
import shadowkernel as sk
ws = sk.Workspace(sys.argv[1], servers=["ruff"])
b = ws.branch("a")
b.write("m.py", "import os\\n")
assert list(b.lint()["code"]) == ["F401"]
print(ws.shadows[0].mountpoint, flush=True)
if sys.argv[2] == "raise":
    raise RuntimeError("the agent script crashed")
"""


@pytest.mark.parametrize("ending", ["return", "raise"])
def test_an_open_workspace_is_closed_when_the_script_ends(tmp_path: Path, ending: str) -> None:
    (tmp_path / "m.py").write_text("x = 1\n")
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path), ending],
        capture_output=True,
        text=True,
        timeout=60,
    )
    mountpoint = done.stdout.strip()
    assert mountpoint, done.stderr
    assert done.returncode == (1 if ending == "raise" else 0), done.stderr
    assert mountpoint not in mounts.shadow_mounts()
    assert (tmp_path / "m.py").read_text() == "x = 1\n"


CTRL_C_SCRIPT = """
import sys
import shadowkernel as sk
with sk.Workspace(sys.argv[1], servers=["ruff"]) as ws:
    print("running", flush=True)
    try:
        ws.branch("a").run("exec -a sk-ctrl-c-sleeper sleep 1000", timeout=600)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
"""


def _sleepers() -> list[int]:
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            if Path(f"/proc/{entry}/cmdline").read_bytes().startswith(b"sk-ctrl-c-sleeper"):
                found.append(int(entry))
        except OSError:
            continue
    return found


@pytest.mark.parametrize("receiver", RECEIVERS)
def test_ctrl_c_in_a_script_kills_the_run_it_was_waiting_for(tmp_path: Path, receiver: str) -> None:
    script = subprocess.Popen([sys.executable, "-c", CTRL_C_SCRIPT, str(tmp_path)],
                              stdout=subprocess.PIPE, text=True, preexec_fn=default_sigint)  # fmt: skip
    try:
        assert script.stdout.readline() == "running\n"
        wait_for(_sleepers, 60, "the run to start")
        interrupt(script.pid, receiver)
        out, _ = script.communicate(timeout=60)
    finally:
        script.kill()
    assert "interrupted" in out
    assert _sleepers() == []
