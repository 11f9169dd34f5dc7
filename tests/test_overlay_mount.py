"""The shadow mounted for real: the user's folder is never written, switches are exact,
bad input fails clearly, and a dead overlay leaves no mount behind."""

from __future__ import annotations

import errno
import hashlib
import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest
from overlay_helpers import needs_fuse, snapshot
from waiting import wait_for

from shadowkernel.errors import OverlayError, PathError
from shadowkernel.overlay import mounts
from shadowkernel.overlay.shadow import Shadow
from shadowkernel.overlay.store import WHITEOUT, Dir, File
from shadowkernel.text.ends import ends

pytestmark = needs_fuse


# -- the storm ----------------------------------------------------------------------------------


class Storm:
    """Seeded random filesystem operations, applied identically to any root."""

    def __init__(self, seed: int, count: int) -> None:
        rng = random.Random(seed)
        self.ops = [self._op(rng) for _ in range(count)]

    @staticmethod
    def _op(rng: random.Random) -> tuple:
        names = ["a", "b", "c", "README.md", "pkg", "docs", "mod.py", "guide.txt", "sub", "deep.py"]
        dirs = ["", "pkg", "pkg/sub", "docs", "new", "new/inner"]
        path = f"{rng.choice(dirs)}/{rng.choice(names)}".lstrip("/")
        other = f"{rng.choice(dirs)}/{rng.choice(names)}".lstrip("/")
        kind = rng.choice(
            ["write", "write", "append", "truncate", "chmod", "mkdir", "unlink", "rmdir",
             "rename", "symlink", "utime", "read"]
        )  # fmt: skip
        return (kind, path, other, rng.randbytes(rng.randint(0, 3000)), rng.randint(0, 4000))

    def apply(self, root: Path) -> list[str]:
        outcomes = []
        for kind, path, other, data, number in self.ops:
            try:
                outcomes.append(self._apply(root, kind, root / path, root / other, data, number))
            except OSError as exc:
                outcomes.append(errno.errorcode.get(exc.errno or 0, "?"))
        return outcomes

    @staticmethod
    def _apply(root: Path, kind: str, p: Path, q: Path, data: bytes, n: int) -> str:
        if kind == "write":
            p.write_bytes(data)
        elif kind == "append":
            with open(p, "ab") as f:
                f.write(data)
        elif kind == "truncate":
            os.truncate(p, n)
        elif kind == "chmod":
            os.chmod(p, 0o600 | (n & 0o155))
        elif kind == "mkdir":
            p.mkdir()
        elif kind == "unlink":
            p.unlink()
        elif kind == "rmdir":
            p.rmdir()
        elif kind == "rename":
            os.rename(p, q)
        elif kind == "symlink":
            os.symlink(os.path.relpath(q, p.parent), p)
        elif kind == "utime":
            os.utime(p, ns=(n * 10**9, n * 10**9))
        elif kind == "read":
            return hashlib.sha256(p.read_bytes()).hexdigest()[:8]
        return "ok"


def test_a_storm_through_the_shadow_never_writes_the_user_folder(
    project: Path, tmp_path: Path
) -> None:
    storm = Storm(seed=20261130, count=3000)
    reference = tmp_path / "reference"
    shutil.copytree(project, reference, symlinks=True)
    before = snapshot(project)
    with Shadow(project) as shadow:
        ours = storm.apply(Path(shadow.mountpoint))
        seen = snapshot(Path(shadow.mountpoint), with_times=False)
        written = shadow.collect()
    # Links into the user's folder read as links into the shadow, by design (see confine_link).
    mnt, src = os.fsencode(shadow.mountpoint), bytes(project)
    seen = {
        k: (m, b.replace(mnt, src) if isinstance(b, bytes) else b) for k, (m, b) in seen.items()
    }
    native = storm.apply(reference)

    assert snapshot(project) == before  # names, modes, bytes and mtimes
    assert ours == native  # every operation had the outcome it has on a plain folder
    assert seen == snapshot(reference, with_times=False)  # and the mount shows its effects
    assert seen != snapshot(project, with_times=False)  # a read-only mount would fail here
    assert sum(o == "ok" for o in ours) > 500 and len(written) > 10


# -- switching -----------------------------------------------------------------------------------


def text(shadow: Shadow, rel: str) -> str:
    return (Path(shadow.mountpoint) / rel).read_text()


def test_switch_shows_the_new_bytes_after_a_cached_read(shadow: Shadow) -> None:
    blob = shadow.store.make
    a = {"pkg/mod.py": File(blob=blob(b"branch a\n"), mtime_ns=1)}
    b = {"pkg/mod.py": File(blob=blob(b"branch b, longer\n"), mtime_ns=2)}
    assert text(shadow, "pkg/mod.py").startswith("def add")
    shadow.activate(a)
    assert text(shadow, "pkg/mod.py") == "branch a\n"
    shadow.activate(b)
    assert text(shadow, "pkg/mod.py") == "branch b, longer\n"
    assert (Path(shadow.mountpoint) / "pkg/mod.py").stat().st_size == len("branch b, longer\n")
    shadow.activate({})
    assert text(shadow, "pkg/mod.py").startswith("def add")


def test_a_blob_kept_as_its_change_from_a_newer_one_shows_whole(shadow: Shadow) -> None:
    """An older version's blob that keeps only its change (`Blob.shrink`) reaches the overlay
    as its bytes: the overlay never gets the chain."""
    old = b"".join(b"line %d\n" % i for i in range(5_000))
    new = old.replace(b"line 2500\n", b"line 2500 edited\n")
    older, newer = shadow.store.make(old), shadow.store.make(new)
    older.shrink(newer, *ends(old, new))
    assert older.data is None and older.bytes() == old
    mod = Path(shadow.mountpoint) / "pkg/mod.py"
    for blob, content in [(older, old), (newer, new), (older, old)]:
        shadow.activate({"pkg/mod.py": File(blob=blob, mtime_ns=1)})
        assert mod.read_bytes() == content and mod.stat().st_size == len(content)


def test_switch_of_a_file_that_differs_only_in_size(shadow: Shadow) -> None:
    short = {"README.md": File(blob=shadow.store.make(b"# demo"), mtime_ns=5)}
    long = {"README.md": File(blob=shadow.store.make(b"# demo\n" * 3), mtime_ns=5)}
    readme = Path(shadow.mountpoint) / "README.md"
    for _ in range(3):
        shadow.activate(short)
        assert readme.stat().st_size == 6 and readme.read_bytes() == b"# demo"
        shadow.activate(long)
        assert readme.stat().st_size == 21 and readme.read_bytes() == b"# demo\n" * 3


def test_a_directory_that_exists_in_one_branch_only(shadow: Shadow) -> None:
    root = Path(shadow.mountpoint)
    with_dir = {
        "extra": Dir(mtime_ns=1),
        "extra/tool.py": File(blob=shadow.store.make(b"print(1)\n"), mtime_ns=1),
        "docs": WHITEOUT,
    }
    shadow.activate(with_dir)
    assert (root / "extra/tool.py").read_text() == "print(1)\n"
    assert not (root / "docs").exists()
    shadow.activate({})
    assert not (root / "extra").exists()
    assert not (root / "extra/tool.py").exists()
    assert (root / "docs/guide.txt").read_text() == "guide\n"
    assert "extra" not in os.listdir(root)


def test_readers_during_switches_see_one_branch_or_the_other(shadow: Shadow) -> None:
    versions = [b"A" * 5000, b"B" * 7000]
    manifests = [{"pkg/mod.py": File(blob=shadow.store.make(v), mtime_ns=1)} for v in versions]
    path = Path(shadow.mountpoint) / "pkg/mod.py"
    shadow.activate(manifests[0])
    seen: list[bytes] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def reader() -> None:
        try:
            while not stop.is_set():
                seen.append(path.read_bytes())
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    thread = threading.Thread(target=reader)
    thread.start()
    for i in range(60):
        shadow.activate(manifests[i % 2])
    stop.set()
    thread.join(10)
    assert not errors
    assert seen and set(seen) <= set(versions)


def test_switch_cost_follows_the_changed_paths(shadow: Shadow) -> None:
    many = {f"gen/f{i}.py": File(blob=shadow.store.make(b"x"), mtime_ns=1) for i in range(500)}
    many["gen"] = Dir(mtime_ns=1)
    shadow.activate(many)
    assert len(os.listdir(Path(shadow.mountpoint) / "gen")) == 500  # the kernel now caches them
    one_more = dict(many, **{"gen/f0.py": File(blob=shadow.store.make(b"y"), mtime_ns=1)})
    switch = shadow.activate(one_more)
    assert switch.changed == switch.invalidated == 1  # only the differing path, not all 500
    assert (Path(shadow.mountpoint) / "gen/f0.py").read_bytes() == b"y"


def test_collect_returns_what_programs_wrote(shadow: Shadow) -> None:
    root = Path(shadow.mountpoint)
    (root / "pkg/mod.py").write_text("rewritten\n")
    (root / "made").mkdir()
    (root / "made/out.txt").write_text("out\n")
    (root / "docs/guide.txt").unlink()
    delta = shadow.collect()
    assert delta["pkg/mod.py"].blob.bytes() == b"rewritten\n"
    assert isinstance(delta["made"], Dir) and delta["made/out.txt"].blob.bytes() == b"out\n"
    assert delta["docs/guide.txt"] is WHITEOUT
    # The collected writes, activated as a version, show the same tree again.
    shadow.activate({p: o for p, o in delta.items() if o is not None})
    assert (root / "made/out.txt").read_text() == "out\n"
    assert not (root / "docs/guide.txt").exists()


# -- bad input -------------------------------------------------------------------------------------


def test_symlinks_into_the_user_folder_resolve_inside_the_shadow(
    shadow: Shadow, project: Path
) -> None:
    root = Path(shadow.mountpoint)
    before = snapshot(project)
    assert os.readlink(root / "abs_link") == f"{root}/README.md"
    (root / "abs_link").write_text("through the link\n")
    os.symlink(str(project / "pkg/mod.py"), root / "agent_link")
    (root / "agent_link").write_text("agent wrote\n")
    os.symlink(
        f"../{project.name}/docs/guide.txt", root / "sneaky"
    )  # leaves the root and comes back
    (root / "sneaky").write_text("sneaky\n")
    assert os.readlink(root / "outside_link") == "/etc/hostname"  # outside targets stay as they are
    assert snapshot(project) == before
    assert (root / "README.md").read_text() == "through the link\n"
    assert (root / "pkg/mod.py").read_text() == "agent wrote\n"
    assert (root / "docs/guide.txt").read_text() == "sneaky\n"


def test_a_mountpoint_inside_the_user_folder_is_refused(project: Path) -> None:
    with pytest.raises(PathError, match="inside the source folder"):
        Shadow(project, mountpoint=project / "mnt")


def test_a_refused_shadow_leaves_no_mountpoint_behind(project: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    inside = project / "tmp"
    inside.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(inside))  # where its own mountpoint is made
    with pytest.raises(PathError, match="inside the source folder"):
        Shadow(project)
    assert list(inside.iterdir()) == []
    blocked = tmp_path / "a-file"  # a mountpoint the overlay cannot mount on
    blocked.write_text("")
    with pytest.raises(PathError, match="is not a directory; give an empty directory"):
        Shadow(project, mountpoint=blocked)
    assert blocked.read_text() == ""


def test_a_source_that_is_not_a_directory_is_refused(project: Path) -> None:
    with pytest.raises(PathError, match="is not a directory"):
        Shadow(project / "README.md")


def test_invalid_utf8_names_in_the_user_folder_round_trip(project: Path) -> None:
    odd = bytes(project) + b"/bad\xff\xfename.py"
    with open(odd, "wb") as f:
        f.write(b"odd\n")
    with Shadow(project) as shadow:
        names = os.listdir(os.fsencode(shadow.mountpoint))
        assert b"bad\xff\xfename.py" in names
        with open(os.fsencode(shadow.mountpoint) + b"/bad\xff\xfename.py", "rb") as f:
            assert f.read() == b"odd\n"
        with open(os.fsencode(shadow.mountpoint) + b"/bad\xff\xfename.py", "ab") as f:
            f.write(b"more\n")
        delta = shadow.collect()
    assert delta["bad\udcff\udcfename.py"].blob.bytes() == b"odd\nmore\n"
    assert Path(os.fsdecode(odd)).read_bytes() == b"odd\n"


def test_a_100_mb_write_spills_and_loses_nothing(project: Path) -> None:
    chunk = hashlib.sha256(b"seed").digest() * 32768  # 1 MiB, not compressible
    digest = hashlib.sha256(chunk * 100).hexdigest()
    with Shadow(project, memory_budget=16 * 2**20) as shadow:
        with open(Path(shadow.mountpoint) / "big.bin", "wb") as f:
            for _ in range(100):
                f.write(chunk)
        stats = shadow.statistics()
        big = shadow.collect()["big.bin"]
        assert stats["memory_bytes"] <= 16 * 2**20  # the overlay kept it on disk
        assert big.blob.spill is not None and big.blob.size == 100 * 2**20
        assert hashlib.sha256(big.blob.bytes()).hexdigest() == digest
        shadow.activate({"big.bin": big})
        with open(Path(shadow.mountpoint) / "big.bin", "rb") as f:
            assert hashlib.sha256(f.read()).hexdigest() == digest
    assert not (project / "big.bin").exists()


def test_killing_the_overlay_mid_write_fails_clearly_and_leaves_no_mount(
    shadow: Shadow, project: Path
) -> None:
    before = snapshot(project)
    shadow.activate({"pkg/mod.py": File(blob=shadow.store.make(b"staged\n"), mtime_ns=1)})
    mountpoint = shadow.mountpoint
    failures: list[int] = []
    writing = threading.Event()

    def writer() -> None:
        try:
            with open(Path(mountpoint) / "stream.bin", "wb") as f:
                while True:
                    f.write(b"x" * 65536)
                    f.flush()
                    writing.set()
        except OSError as exc:
            failures.append(exc.errno or 0)
            writing.set()

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    writing.wait(10)
    os.kill(shadow.pid, signal.SIGKILL)
    thread.join(10)
    assert failures and failures[0] in (errno.ENOTCONN, errno.ECONNABORTED, errno.ENOENT)
    with pytest.raises(OverlayError, match="died .*signal 9.*no branch data was lost"):
        shadow.collect()
    assert mountpoint not in mounts.shadow_mounts()  # no stale mount
    assert snapshot(project) == before
    shadow.restart()  # comes back showing the same staged version
    assert (Path(shadow.mountpoint) / "pkg/mod.py").read_text() == "staged\n"


STARTER = """
import sys, time
from shadowkernel.overlay.shadow import Shadow
shadow = Shadow(sys.argv[1])
print(shadow.mountpoint, shadow.pid, flush=True)
time.sleep(600)
"""


def test_the_overlay_unmounts_when_its_parent_dies(project: Path) -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", STARTER, str(project)], stdout=subprocess.PIPE, text=True
    )
    mountpoint, overlay_pid = parent.stdout.readline().split()
    assert mountpoint in mounts.shadow_mounts()
    parent.kill()
    parent.wait()
    wait_for(lambda: mountpoint not in mounts.shadow_mounts(), 10, "the overlay to unmount")
    wait_for(lambda: not Path(f"/proc/{overlay_pid}").exists(), 10, "the overlay to exit")


def test_startup_clears_stale_mounts_of_dead_overlays(project: Path) -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", STARTER, str(project)], stdout=subprocess.PIPE, text=True
    )
    mountpoint, overlay_pid = parent.stdout.readline().split()
    os.kill(int(overlay_pid), signal.SIGKILL)  # dies without unmounting: a stale mount
    wait_for(lambda: mounts.is_stale(mountpoint), 10, "the mount to go stale")
    try:
        with Shadow(project):
            assert mountpoint not in mounts.shadow_mounts()
    finally:
        parent.kill()
        parent.wait()


def test_file_modes_and_exec_bits_show_through(shadow: Shadow) -> None:
    run = Path(shadow.mountpoint) / "run.sh"
    assert stat.S_IMODE(run.stat().st_mode) == 0o755
    out = subprocess.run([str(run)], capture_output=True, text=True, check=True)
    assert out.stdout == "hi\n"


SEEN = 5  # seconds: the overlay learns of the user's edits through inotify, in milliseconds


def test_edits_the_user_makes_meanwhile_show_at_once(shadow: Shadow, project: Path) -> None:
    mod = Path(shadow.mountpoint) / "docs/guide.txt"
    assert mod.read_text() == "guide\n"  # now cached by the kernel: attributes and pages
    for saved in ["GUIDE\n", "a longer guide\n", "g\n"]:  # same size, longer, shorter
        (project / "docs/guide.txt").write_text(saved)  # the user's editor saves
        wait_for(lambda: mod.read_text() == saved, SEEN, f"the edit {saved!r}")  # noqa: B023
        assert mod.stat().st_size == len(saved)
    saved = project / "docs/guide.txt.tmp"  # an editor that saves by rename: a new inode
    saved.write_text("renamed into place\n")
    saved.rename(project / "docs/guide.txt")
    wait_for(lambda: mod.read_text() == "renamed into place\n", SEEN, "the renamed save")


def test_files_the_user_creates_and_deletes_show_at_once(shadow: Shadow, project: Path) -> None:
    docs = Path(shadow.mountpoint) / "docs"
    assert sorted(os.listdir(docs)) == ["guide.txt"]  # the listing is cached now
    assert not (docs / "new.txt").exists()  # and so is the miss
    (project / "docs/new.txt").write_text("new\n")
    wait_for(lambda: (docs / "new.txt").exists(), SEEN, "the created file")
    assert sorted(os.listdir(docs)) == ["guide.txt", "new.txt"]
    (project / "docs/new.txt").unlink()
    wait_for(lambda: not (docs / "new.txt").exists(), SEEN, "the deleted file to go")
    assert sorted(os.listdir(docs)) == ["guide.txt"]
    (project / "docs/sub").mkdir()  # a directory made later is watched too
    wait_for(lambda: (docs / "sub").is_dir(), SEEN, "the created directory")
    assert os.listdir(docs / "sub") == []
    (project / "docs/sub/inner.txt").write_text("inner\n")
    wait_for(lambda: os.listdir(docs / "sub") == ["inner.txt"], SEEN, "the file in it")


def test_a_name_cached_as_missing_appears_when_a_switch_brings_it(shadow: Shadow) -> None:
    root = Path(shadow.mountpoint)
    for _ in range(2):  # the kernel now remembers the misses
        assert not (root / "pkg/new.py").exists() and not (root / "newdir").exists()
    shadow.activate({
        "pkg/new.py": File(blob=shadow.store.make(b"new\n"), mtime_ns=1),
        "newdir": Dir(mtime_ns=1),
    })  # fmt: skip
    assert (root / "pkg/new.py").read_text() == "new\n"
    assert (root / "newdir").is_dir()
    (root / "made.txt").write_text("x")  # creating through the mount replaces a cached miss
    assert (root / "made.txt").read_text() == "x"
