"""Overlay processes are forks of one zygote that imported their modules once.

Real mounts, real processes: the forks are the zygote's children and serve their mounts; the
environment and umask a fork runs with are the kernel's at the fork, not the zygote's at its
start; a fork killed is reported with its signal and comes back; a zygote killed is replaced
at the next start, and its fork ends; a forked kernel process starts a zygote of its own;
`SHADOWKERNEL_OVERLAY_FORK=0` starts each overlay as a process of its own, the way it was
before; a zygote prepared ahead serves the first shadow.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from kernel_helpers import alive
from overlay_helpers import needs_fuse
from waiting import wait_for

from shadowkernel.errors import OverlayError
from shadowkernel.overlay import fastpath, zygote
from shadowkernel.overlay.shadow import Shadow, failure
from shadowkernel.overlay.store import File

pytestmark = needs_fuse


def parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(") ", 1)[1].split()[1])


def command_of(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def test_overlays_are_forks_of_one_zygote_and_serve_their_mounts(project: Path) -> None:
    with Shadow(project) as one, Shadow(project) as two:
        assert one.pid is not None and two.pid is not None and one.pid != two.pid
        zygote_pid = parent_of(one.pid)
        assert parent_of(two.pid) == zygote_pid != os.getpid()
        assert "shadowkernel.overlay.zygote" in command_of(zygote_pid)
        assert parent_of(zygote_pid) == os.getpid()
        two.activate({"pkg/new.py": File(blob=two.store.make(b"only two\n"), mtime_ns=1)})
        assert (Path(two.mountpoint) / "pkg/new.py").read_text() == "only two\n"
        assert not (Path(one.mountpoint) / "pkg/new.py").exists()
        assert sorted(os.listdir(one.mountpoint)) == sorted(os.listdir(project))


def test_a_fork_runs_in_the_environment_of_the_moment(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Shadow(project):  # the zygote is running before the variable is set
        pass
    monkeypatch.setenv("SHADOWKERNEL_FUSE_OPEN", "1")
    with Shadow(project) as shadow:
        assert shadow.fuse_path != fastpath.FAST  # the server read the variable
        assert b"SHADOWKERNEL_FUSE_OPEN=1" not in Path(
            f"/proc/{parent_of(shadow.pid or 0)}/environ").read_bytes()  # fmt: skip


def umask_of(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return next(int(line.split()[1], 8) for line in status.splitlines() if line.startswith("Umask"))


def test_a_fork_runs_with_the_umask_of_the_moment(project: Path) -> None:
    with Shadow(project):  # the zygote is running before the umask changes
        pass
    before = os.umask(0o027)
    try:
        with Shadow(project) as shadow:
            assert shadow.pid is not None and umask_of(shadow.pid) == 0o027
            assert umask_of(parent_of(shadow.pid)) == before  # the zygote's stays its own
        assert zygote.current_umask() == 0o027  # read, not set
    finally:
        os.umask(before)


def test_a_killed_fork_is_reported_and_comes_back(project: Path) -> None:
    with Shadow(project) as shadow:
        shadow.activate({"a.py": File(blob=shadow.store.make(b"kept\n"), mtime_ns=1)})
        first = shadow.pid or 0
        os.kill(first, signal.SIGKILL)
        with pytest.raises(OverlayError, match=r"died \(signal 9\)"):
            shadow.collect()
        shadow.restart()
        assert shadow.pid != first
        assert (Path(shadow.mountpoint) / "a.py").read_text() == "kept\n"


def test_a_killed_zygote_is_replaced_and_its_fork_ends(project: Path) -> None:
    """The fork's status comes from its zygote: with the zygote gone the shadow counts its
    overlay as dead, restarts it from a new zygote, and the old fork ends as its control
    channel closes (its parent-death signal may come before it listens for it)."""
    with Shadow(project) as shadow:
        fork = shadow.pid or 0
        old = parent_of(fork)
        os.kill(old, signal.SIGKILL)
        wait_for(lambda: not shadow.alive, 10, "the shadow to see its zygote gone")
        with pytest.raises(OverlayError, match="its zygote ended first.*no branch data was lost"):
            shadow.collect()
        shadow.restart()
        wait_for(lambda: not alive(fork), 10, "the old fork to end")
        assert parent_of(shadow.pid or 0) not in (old, os.getpid())
        assert sorted(os.listdir(shadow.mountpoint)) == sorted(os.listdir(project))


FORKED = """
import os, sys
from shadowkernel.overlay.shadow import Shadow, failure

def zygote_of(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(") ", 1)[1].split()[1])

with Shadow(sys.argv[1]) as ours:
    child = os.fork()
    if child == 0:  # as multiprocessing's fork start does, after the parent's zygote started
        with Shadow(sys.argv[1]) as theirs:
            served = sorted(os.listdir(theirs.mountpoint)) == sorted(os.listdir(sys.argv[1]))
            other = zygote_of(theirs.pid) not in (zygote_of(ours.pid), os.getpid())
        os._exit(0 if served and other else 3)
    _, status = os.waitpid(child, 0)
    print(os.waitstatus_to_exitcode(status), sorted(os.listdir(ours.mountpoint)) == sorted(os.listdir(sys.argv[1])))
"""


def test_a_forked_process_starts_its_own_zygote(project: Path) -> None:
    """A fork of a process whose zygote runs (multiprocessing's default start on Linux) must
    not talk on its parent's channel: it starts a zygote of its own, and the parent's shadow
    still serves. In a child process of its own: this test's worker has threads."""
    done = subprocess.run([sys.executable, "-c", FORKED, str(project)], capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "True"], done.stderr


PREPARED = """
import os, sys
from shadowkernel import Workspace
from shadowkernel.overlay import zygote
from shadowkernel.overlay.shadow import Shadow

Workspace(sys.argv[1], mode="documents", state=None).close()
print(zygote._zygote is None)  # a workspace that mounts nothing starts no zygote
Shadow.prepare()
Shadow.prepare()
started = zygote._zygote.process.pid
with Shadow(sys.argv[1]) as shadow:
    # Read once it served a fork: just after Popen its arguments may not be set up yet.
    with open(f"/proc/{started}/cmdline", "rb") as f:
        print(b"shadowkernel.overlay.zygote" in f.read())
    with open(f"/proc/{shadow.pid}/stat") as f:
        parent = int(f.read().rsplit(") ", 1)[1].split()[1])
    print(parent == started, sorted(os.listdir(shadow.mountpoint)) == sorted(os.listdir(sys.argv[1])))
"""


def test_a_prepared_zygote_serves_the_first_shadow(project: Path) -> None:
    """`Shadow.prepare` starts the zygote without waiting for it (twice: still one), and the
    first shadow is its fork. In a process of its own, where no zygote ran yet."""
    done = subprocess.run([sys.executable, "-c", PREPARED, str(project)], capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True", "True", "True"], done.stderr


def test_without_the_zygote_each_overlay_is_our_own_child(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHADOWKERNEL_OVERLAY_FORK", "0")
    monkeypatch.setattr(zygote, "_zygote", None)  # as in a process that started none yet
    zygote.prestart()
    assert zygote._zygote is None
    assert zygote.spawn(["unused"], 0, 0) is None
    with Shadow(project) as shadow:
        assert parent_of(shadow.pid or 0) == os.getpid()
        assert "shadowkernel.overlay.server" in command_of(shadow.pid or 0)
        assert sorted(os.listdir(shadow.mountpoint)) == sorted(os.listdir(project))


BESIDE = """
import os, sys
from shadowkernel.overlay.shadow import Shadow, failure
with Shadow(sys.argv[1]) as shadow:
    print(sorted(os.listdir(shadow.mountpoint)) == sorted(os.listdir(sys.argv[1])))
"""


@pytest.mark.parametrize("fork", ["1", "0"])
def test_a_module_in_the_working_directory_shadows_nothing(
    project: Path, tmp_path: Path, fork: str
) -> None:
    """A notebook folder holding `outcome.py` (a name trio imports) still mounts: the zygote
    and the overlay process do not put the working directory on sys.path. In a process of its
    own, whose zygote starts in that folder."""
    folder = tmp_path / "notebooks"
    folder.mkdir()
    (folder / "outcome.py").write_text("raise ImportError('the user\\'s outcome.py')\n")
    env = {**os.environ, "SHADOWKERNEL_OVERLAY_FORK": fork}
    done = subprocess.run([sys.executable, "-c", BESIDE, str(project)], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True"], done.stderr


def test_a_failed_mount_names_the_exception_first() -> None:
    log = (
        'Traceback (most recent call last):\n  File "x.py", line 1, in <module>\n'
        "    import outcome\nImportError: the user's outcome.py\n"
    )
    first = failure(log).splitlines()[0]
    assert first == "ImportError: the user's outcome.py"
    assert failure(log).endswith(log.strip())
    assert failure("fusermount3: mount failed\n") == "fusermount3: mount failed"
