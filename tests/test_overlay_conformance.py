"""A battery of POSIX behaviours, run on the shadow and on a kernel overlayfs mount of the
same folder; each scenario returns what a program observes, and the two must agree.

Where they legitimately differ, the scenario is listed in DIFFERENCES with the reason.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import mmap
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from overlay_helpers import kernel_overlay, needs_fuse, needs_root, snapshot

Scenario = Callable[[Path], object]
SCENARIOS: dict[str, Scenario] = {}

_libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD = -100
RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2


def scenario(fn: Scenario) -> Scenario:
    SCENARIOS[fn.__name__] = fn
    return fn


def attempt(action: Callable[[], object]) -> object:
    """The result of `action`, or the errno name it failed with."""
    try:
        return action()
    except OSError as exc:
        return errno.errorcode.get(exc.errno or 0, str(exc))


def renameat2(old: Path, new: Path, flags: int) -> None:
    if _libc.renameat2(AT_FDCWD, bytes(old), AT_FDCWD, bytes(new), flags) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def listing(root: Path) -> list[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            out.append(os.path.relpath(os.path.join(dirpath, name), root))
    return sorted(out)


# -- reading -----------------------------------------------------------------------------------


@scenario
def read_everything(root: Path) -> object:
    def describe(p: Path) -> object:
        st = p.lstat()
        if stat.S_ISLNK(st.st_mode):
            return ("link", stat.S_IMODE(st.st_mode))
        if stat.S_ISDIR(st.st_mode):
            return ("dir", stat.S_IMODE(st.st_mode), sorted(os.listdir(p)))
        return ("file", stat.S_IMODE(st.st_mode), st.st_size, p.read_bytes())

    return {rel: describe(root / rel) for rel in listing(root)}


@scenario
def relative_symlinks_resolve(root: Path) -> object:
    return [os.readlink(root / "link_to_mod"), (root / "link_to_mod").read_text()]


@scenario
def missing_paths(root: Path) -> object:
    return [attempt(lambda: (root / "nope").stat()), attempt(lambda: (root / "README.md/x").stat())]


# -- writing files ------------------------------------------------------------------------------


@scenario
def create_write_read(root: Path) -> object:
    (root / "new.txt").write_text("fresh\n")
    (root / "pkg/mod.py").write_text("changed\n")
    return [(root / "new.txt").read_text(), (root / "pkg/mod.py").read_text(), listing(root)]


@scenario
def exclusive_create(root: Path) -> object:
    flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY
    first = attempt(lambda: os.close(os.open(root / "excl", flags)) or "created")
    second = attempt(lambda: os.open(root / "excl", flags))
    lower = attempt(lambda: os.open(root / "README.md", flags))
    return [first, second, lower]


@scenario
def append_mode(root: Path) -> object:
    for _ in range(3):
        with open(root / "README.md", "a") as f:
            f.write("more\n")
    fd = os.open(root / "README.md", os.O_WRONLY | os.O_APPEND)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, b"end\n")  # O_APPEND ignores the seek
    os.close(fd)
    return (root / "README.md").read_text()


@scenario
def truncate_shrink_grow(root: Path) -> object:
    os.truncate(root / "pkg/sub/deep.py", 10)
    small = (root / "pkg/sub/deep.py").read_bytes()
    with open(root / "pkg/sub/deep.py", "r+b") as f:
        f.truncate(20)
    return [
        small,
        (root / "pkg/sub/deep.py").read_bytes(),
        (root / "pkg/sub/deep.py").stat().st_size,
    ]


@scenario
def open_with_o_trunc(root: Path) -> object:
    with open(root / "pkg/sub/data.bin", "wb") as f:
        f.write(b"short")
    return (root / "pkg/sub/data.bin").read_bytes()


@scenario
def sparse_write(root: Path) -> object:
    with open(root / "sparse", "wb") as f:
        f.seek(100_000)
        f.write(b"tail")
    data = (root / "sparse").read_bytes()
    return [len(data), data[:10], data[-4:], data.count(0)]


@scenario
def mmap_shared_write(root: Path) -> object:
    with open(root / "pkg/sub/data.bin", "r+b") as f, mmap.mmap(f.fileno(), 0) as m:
        m[0:5] = b"HELLO"
        m.flush()
    return (root / "pkg/sub/data.bin").read_bytes()[:8]


@scenario
def chmod_and_utime(root: Path) -> object:
    os.chmod(root / "README.md", 0o600)
    os.chmod(root / "pkg", 0o700)
    os.utime(root / "docs/guide.txt", ns=(1_000_000_000, 2_000_000_000))
    return [
        stat.S_IMODE((root / "README.md").stat().st_mode),
        stat.S_IMODE((root / "pkg").stat().st_mode),
        (root / "docs/guide.txt").stat().st_mtime_ns,
        (root / "README.md").read_text(),
    ]


@scenario
def fsync_and_fstat_after_unlink(root: Path) -> object:
    fd = os.open(root / "pkg/mod.py", os.O_RDWR)
    os.unlink(root / "pkg/mod.py")
    os.write(fd, b"XX")
    os.fsync(fd)
    size = os.fstat(fd).st_size
    os.lseek(fd, 0, os.SEEK_SET)
    data = os.read(fd, 100)
    os.close(fd)
    return [size, data, attempt(lambda: (root / "pkg/mod.py").stat())]


# -- directories and names ----------------------------------------------------------------------


@scenario
def mkdir_rmdir(root: Path) -> object:
    (root / "a/b/c").mkdir(parents=True)
    (root / "a/b/c/f").write_text("x")
    return [
        attempt(lambda: (root / "a/b").rmdir()),
        attempt(lambda: (root / "README.md").rmdir()),
        attempt(lambda: os.mkdir(root / "pkg")),
        attempt(lambda: ((root / "a/b/c/f").unlink(), (root / "a/b/c").rmdir(), "ok")[-1]),
        listing(root / "a"),
    ]


@scenario
def remove_lower_tree(root: Path) -> object:
    for dirpath, dirnames, filenames in os.walk(root / "pkg", topdown=False):
        for name in filenames:
            os.unlink(os.path.join(dirpath, name))
        for name in dirnames:
            os.rmdir(os.path.join(dirpath, name))
    os.rmdir(root / "pkg")
    os.mkdir(root / "pkg")  # recreated: must be empty, nothing of the old tree shows through
    return [listing(root), attempt(lambda: os.unlink(root / "docs"))]


@scenario
def rename_file_over_file(root: Path) -> object:
    os.rename(root / "README.md", root / "docs/guide.txt")
    return [listing(root), (root / "docs/guide.txt").read_text()]


@scenario
def rename_lower_directory(root: Path) -> object:
    os.rename(root / "pkg", root / "library")
    (root / "library/sub/deep.py").write_text("edited after the move\n")
    (root / "library/added.py").write_text("new\n")
    return [
        listing(root),
        (root / "library/mod.py").read_text(),
        (root / "library/sub/deep.py").read_text(),
        attempt(lambda: (root / "pkg").stat()),
    ]


@scenario
def rename_then_back(root: Path) -> object:
    os.rename(root / "pkg", root / "tmp")
    os.rename(root / "tmp", root / "pkg")
    return [listing(root), (root / "pkg/mod.py").read_text()]


@scenario
def rename_errors(root: Path) -> object:
    (root / "full").mkdir()
    (root / "full/f").write_text("x")
    return [
        attempt(lambda: os.rename(root / "pkg", root / "pkg/sub/inside")),
        attempt(lambda: os.rename(root / "docs", root / "full")),
        attempt(lambda: os.rename(root / "README.md", root / "docs")),
        attempt(lambda: os.rename(root / "docs", root / "README.md")),
        attempt(lambda: os.rename(root / "missing", root / "x")),
    ]


@scenario
def rename_noreplace(root: Path) -> object:
    return [
        attempt(lambda: renameat2(root / "README.md", root / "run.sh", RENAME_NOREPLACE)),
        attempt(lambda: renameat2(root / "README.md", root / "fresh.md", RENAME_NOREPLACE) or "ok"),
        listing(root),
    ]


@scenario
def symlinks(root: Path) -> object:
    os.symlink("pkg/mod.py", root / "mine")
    os.symlink("dangling", root / "dangling_link")
    return [
        os.readlink(root / "mine"),
        (root / "mine").read_text(),
        attempt(lambda: (root / "dangling_link").read_text()),
        stat.S_ISLNK((root / "dangling_link").lstat().st_mode),
        attempt(lambda: os.symlink("x", root / "README.md")),
    ]


@scenario
def symlink_times(root: Path) -> object:
    os.utime(root / "link_to_mod", ns=(3_000_000_000, 4_000_000_000), follow_symlinks=False)
    os.symlink("x", root / "mine")
    os.utime(root / "mine", ns=(5_000_000_000, 6_000_000_000), follow_symlinks=False)
    return [(root / n).lstat().st_mtime_ns for n in ("link_to_mod", "mine", "pkg/mod.py")]


@scenario
def odd_names(root: Path) -> object:
    names = [b"caf\xc3\xa9.txt", b"bad\xff\xfe.txt", b"sp ace", b"-dash", b"a" * 255]
    for name in names:
        with open(os.path.join(bytes(root), name), "wb") as f:
            f.write(name)
    too_long = attempt(lambda: open(os.path.join(bytes(root), b"b" * 256), "wb"))
    found = sorted(n for n in os.listdir(bytes(root)) if n in names)
    return [
        found,
        [Path(os.fsdecode(os.path.join(bytes(root), n))).read_bytes() for n in found],
        too_long,
    ]


@scenario
def statfs_works(root: Path) -> object:
    return os.statvfs(root).f_namemax >= 255


# -- locks -----------------------------------------------------------------------------------------

LOCKER = """
import fcntl, sys
f = open(sys.argv[1], "r+")
try:
    fcntl.{call}(f, {flags})
    print("locked")
except OSError as e:
    print("busy", e.errno)
"""


def lock_from_other_process(path: Path, call: str, flags: str) -> str:
    code = LOCKER.format(call=call, flags=flags)
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True)
    return out.stdout.strip()


@scenario
def flock_excludes_others(root: Path) -> object:
    with open(root / "README.md", "r+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        held = lock_from_other_process(root / "README.md", "flock", "fcntl.LOCK_EX | fcntl.LOCK_NB")
    free = lock_from_other_process(root / "README.md", "flock", "fcntl.LOCK_EX | fcntl.LOCK_NB")
    return [held.split()[0], free]


@scenario
def fcntl_lock_excludes_others(root: Path) -> object:
    with open(root / "README.md", "r+") as f:
        fcntl.lockf(f, fcntl.LOCK_EX)
        held = lock_from_other_process(root / "README.md", "lockf", "fcntl.LOCK_EX | fcntl.LOCK_NB")
    return held.split()[0]


@scenario
def sqlite_database(root: Path) -> object:
    import sqlite3

    db = sqlite3.connect(root / "app.db")
    db.execute("create table t (x)")
    db.executemany("insert into t values (?)", [(i,) for i in range(100)])
    db.commit()
    db.close()
    again = sqlite3.connect(root / "app.db")
    total = again.execute("select sum(x) from t").fetchone()[0]
    again.close()
    return total


@scenario
def rename_exchange(root: Path) -> object:
    result = attempt(lambda: renameat2(root / "README.md", root / "docs", RENAME_EXCHANGE) or "ok")
    return [result, listing(root), (root / "docs").read_text()]


# -- legitimate differences -----------------------------------------------------------------------


@scenario
def hard_links(root: Path) -> object:
    return attempt(lambda: os.link(root / "README.md", root / "hard") or "linked")


@scenario
def set_xattr(root: Path) -> object:
    return attempt(lambda: os.setxattr(root / "README.md", "user.k", b"v") or "set")


DIFFERENCES = {
    "hard_links": "the shadow refuses hard links (EPERM) so tools fall back to copying; a link "
    "shared between versions of a branch has no representation in the override store",
    "set_xattr": "extended attributes are read-only in the shadow (ENOTSUP); overlayfs stores them "
    "in its upper layer",
}


# -- the runner -----------------------------------------------------------------------------------


# The overlay serves the kernel two ways: without open calls (the patched pyfuse3 that
# .ci/setup builds) and with them (stock pyfuse3; forced here by SHADOWKERNEL_FUSE_OPEN).
@pytest.fixture(scope="module", params=["no-open", "open-calls"])
def both_results(request: pytest.FixtureRequest,
                 tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[object, object]]:  # fmt: skip
    from overlay_helpers import make_project

    from shadowkernel.overlay.shadow import Shadow

    results: dict[str, tuple[object, object]] = {}
    for name, fn in SCENARIOS.items():
        project = make_project(tmp_path_factory.mktemp(name) / "project")
        before = snapshot(project)
        with pytest.MonkeyPatch.context() as env:
            if request.param == "open-calls":
                env.setenv("SHADOWKERNEL_FUSE_OPEN", "1")
            with Shadow(project) as shadow:
                ours = fn(Path(shadow.mountpoint))
        with kernel_overlay(project) as mnt:
            reference = fn(mnt)
        assert snapshot(project) == before, f"{name} changed the user's folder"
        results[name] = (_portable(ours, shadow.mountpoint), _portable(reference, str(mnt)))
    return results


def _portable(value: object, mountpoint: str) -> object:
    """Mount paths differ between the two views; everything else must be equal."""
    return repr(value).replace(mountpoint, "<mnt>")


@needs_fuse
@needs_root
@pytest.mark.parametrize("name", [n for n in SCENARIOS if n not in DIFFERENCES])
def test_agrees_with_kernel_overlayfs(both_results: dict, name: str) -> None:
    ours, reference = both_results[name]
    assert ours == reference


@needs_fuse
@needs_root
@pytest.mark.parametrize("name", sorted(DIFFERENCES))
def test_known_differences_are_still_different(both_results: dict, name: str) -> None:
    ours, reference = both_results[name]
    assert ours != reference, f"{name} now agrees with overlayfs; drop it from DIFFERENCES"


@needs_fuse
def test_hard_links_are_refused_clearly(shadow) -> None:
    with pytest.raises(PermissionError):
        os.link(Path(shadow.mountpoint) / "README.md", Path(shadow.mountpoint) / "hard")
