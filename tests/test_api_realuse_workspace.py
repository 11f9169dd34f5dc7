"""The Python API used as a researcher uses it, on a real library (more-itertools from PyPI):
an accept killed with SIGKILL mid-write, and names too long for any file system.

- An accept writes each file as a temp file beside it, then renames it. A process killed in
  between left the temp file (`.NAME.XXXXXXXX.sk`) in the user's folder for good: a write
  to the folder that no accept asked for. The temp now carries its writer's pid, and the
  next restore (or accept of that file) removes it once that process is gone.
- A path with a name over 255 bytes was a raw `OSError` (ENAMETOOLONG) from `write`,
  `read` and `delete`, and `write_bytes` under a missing folder staged it: a version no
  accept, run or view could ever hold. It is a `PathError` naming the path, staging nothing.
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import shadowkernel as sk

pytestmark = pytest.mark.timeout(600)

FILES = 12
SIZE = 24 * 1024 * 1024  # each file's write takes long enough to be caught mid-way

CHILD = """
import os, sys
import shadowkernel as sk
root, state, files, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
ws = sk.Workspace(root, servers=[], state=state, mode="documents")
branch = ws.branch("big")
for i in range(files):
    branch.write_bytes(f"more_itertools/blob_{i}.bin", bytes([i]) * size)
branch.replace("more_itertools/recipes.py", "def take(", "def take_(")
os.write(1, b"staged\\n")
branch.accept()
os.write(1, b"accepted\\n")
"""


def _temps(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob(".*.sk"))


def _until_stopped(pid: int) -> None:
    """Wait until every thread of `pid` is stopped (state T in /proc): what the folder holds
    then is what a kill leaves."""
    while any(_state(task) not in ("T", "t") for task in Path(f"/proc/{pid}/task").iterdir()):
        time.sleep(0.001)


def _state(task: Path) -> str:
    try:
        return (task / "stat").read_text().rpartition(")")[2].split()[0]
    except OSError:  # the thread ended
        return "T"


def _kill_mid_accept(root: Path, state: Path) -> int:
    """Start a child that stages big files and accepts them; SIGKILL it while a temp file of
    the accept is in the folder (it is stopped first, so the check and the kill see one
    state). Returns how many temp files the kill left; 0 when the accept ended first."""
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(root), str(state), str(FILES), str(SIZE)],
        stdout=subprocess.PIPE,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == b"staged\n"
        while child.poll() is None:
            if _temps(root / "more_itertools"):
                os.kill(child.pid, signal.SIGSTOP)
                _until_stopped(child.pid)  # a signal lands later than kill() returns
                left = _temps(root / "more_itertools")
                if left:
                    child.kill()
                    child.wait()
                    return len(left)
                os.kill(child.pid, signal.SIGCONT)
        return 0
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()


def test_an_accept_killed_mid_write_leaves_no_temp_file_in_the_folder(
    library: Path, tmp_path: Path
) -> None:
    for attempt in range(5):
        root = tmp_path / f"project{attempt}"
        shutil.copytree(library, root)
        state = tmp_path / f"state{attempt}"
        if _kill_mid_accept(root, state):
            break
    else:
        pytest.fail("the accept always ended before a temp file could be seen")
    assert _temps(root), "the kill came mid-write"
    with sk.Workspace(root, servers=[], state=state, mode="documents") as ws:
        assert _temps(root) == []  # the restore removed the dead writer's temp
        branch = ws.branches["big"]
        branch.accept()  # the rest of the accept, as acknowledged before the kill
        assert str(branch.diff()) == ""
    for i in range(FILES):
        assert (root / f"more_itertools/blob_{i}.bin").read_bytes() == bytes([i]) * SIZE
    assert "def take_(" in (root / "more_itertools/recipes.py").read_text()
    assert _temps(root) == []


def test_a_live_writers_temp_file_is_left_alone(library: Path, tmp_path: Path) -> None:
    """Another process's accept in progress (its pid alive) keeps its temp file."""
    root = tmp_path / "project"
    shutil.copytree(library, root)
    sleeper = subprocess.Popen(["sleep", "600"])
    try:
        live = root / "more_itertools" / f".recipes.py.{sleeper.pid}.abcdefgh.sk"
        live.write_bytes(b"half")
        with sk.Workspace(root, servers=[], state=None, mode="documents") as ws:
            branch = ws.branch("a")
            branch.replace("more_itertools/recipes.py", "def take(", "def take_(")
            branch.accept()
        assert live.read_bytes() == b"half"
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_name_too_long_is_a_path_error_naming_it_and_stages_nothing(
    library: Path, tmp_path: Path
) -> None:
    root = tmp_path / "project"
    shutil.copytree(library, root)
    listing = sorted(os.listdir(root))
    long = "a" * 300 + ".py"
    deep = "/".join(["more_itertools"] * 300) + "/x.py"  # short names, a path over 4096 bytes
    with sk.Workspace(root, servers=[], state=None, mode="documents") as ws:
        branch = ws.branch("a")
        calls = [
            (long, lambda: branch.write(long, "x = 1\n")),
            (long, lambda: branch.read(long)),
            (long, lambda: branch.delete(long)),
            ("new/" + long, lambda: branch.write_bytes("new/" + long, b"x")),
            ("é" * 128, lambda: branch.write("é" * 128, "x")),  # 256 bytes in UTF-8
            (
                long,
                lambda: branch.apply_patch(f"--- /dev/null\n+++ b/{long}\n@@ -0,0 +1 @@\n+x\n"),
            ),
            (deep[:40], lambda: branch.write(deep, "x")),
        ]
        for named, call in calls:
            with pytest.raises(sk.PathError) as raised:
                call()
            assert named[:40] in str(raised.value)
        assert branch.version == 0
        assert dict(branch.files) == {}
    assert sorted(os.listdir(root)) == listing


def test_a_name_of_255_bytes_is_accepted_and_its_killed_temp_swept(
    library: Path, tmp_path: Path
) -> None:
    root = tmp_path / "project"
    shutil.copytree(library, root)
    name = "b" * 251 + ".txt"  # 255 bytes: the longest a name may be
    dead = subprocess.Popen(["true"])
    dead.wait()
    with sk.Workspace(root, servers=[], state=None, mode="documents") as ws:
        branch = ws.branch("a")
        branch.write(f"docs/{name}", "long\n")
        stem = name[: 255 - 23]
        left = root / "docs" / f".{stem}.{dead.pid}.abcdefgh.sk"  # a killed accept's temp
        left.write_bytes(b"half")
        assert branch.accept().written == (f"docs/{name}",)
    assert (root / "docs" / name).read_text() == "long\n"
    assert _temps(root) == []


def test_calls_cut_off_by_close_end_in_closed_error(library: Path, tmp_path: Path) -> None:
    """Agent threads write and lint in a loop and the workspace closes under them, five
    times: each agent ends with ClosedError saying so, whether its request was queued,
    served or not yet made (a queued one was a bare concurrent.futures.CancelledError)."""
    import threading

    root = tmp_path / "lib"
    shutil.copytree(library, root)
    ended: list[BaseException] = []
    for _ in range(5):
        answered = threading.Semaphore(0)

        def agent(branch: sk.Branch, answered: threading.Semaphore = answered) -> None:
            try:
                for i in itertools.count():
                    branch.write("more_itertools/recipes.py", f"import os  # {i}\n")
                    branch.lint(["more_itertools/recipes.py"])
                    answered.release()
            except BaseException as error:  # noqa: BLE001 - what the agent hears is the point
                ended.append(error)

        ws = sk.Workspace(root, servers=["ruff"], state=None)
        agents = [threading.Thread(target=agent, args=(ws.branch(f"agent-{i}"),))
                  for i in range(3)]  # fmt: skip
        for thread in agents:
            thread.start()
        for _ in range(12):  # the agents are in their loops
            answered.acquire(timeout=120)
        ws.close()
        for thread in agents:
            thread.join(60)
    assert [type(e).__name__ for e in ended] == ["ClosedError"] * 15, ended
    assert all("this Workspace is closed" in str(e) for e in ended)
