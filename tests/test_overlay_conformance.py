"""A battery of POSIX behaviours, run on the shadow and on a kernel overlayfs mount of the
same folder; each scenario returns what a program observes, and the two must agree.

Where they legitimately differ, the scenario is listed in DIFFERENCES with the reason.
The POSIX scenarios follow pjdfstest's checks (which cannot be reached from here): file
types, owners and permissions as another uid, link counts and each timestamp.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import functools
import mmap
import os
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from overlay_helpers import kernel_overlay, needs_fuse, needs_root, snapshot
from waiting import wait_for

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


# -- POSIX fidelity, written as pjdfstest checks it --------------------------------------------
#
# pjdfstest (github.com/pjd/pjdfstest) cannot be reached from these machines; these scenarios
# follow its checks instead: every file type, owners and permissions as another uid, link
# counts, each timestamp. Another uid is a forked child that drops to it (pjdfstest's -u/-g).

NOBODY = 65534


def as_user(uid: int, gid: int, action: Callable[[], object]) -> object:
    """What `action` returns (or the errno name it fails with) in a child running as uid/gid."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop to uid/gid, act, report, exit without cleanup
        try:
            os.close(read_end)
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
            result = repr(attempt(action))
        except BaseException as exc:  # noqa: BLE001 (reported to the parent, which fails)
            result = f"child failed: {exc!r}"
        os.write(write_end, result.encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as f:
        out = f.read().decode()
    os.waitpid(pid, 0)
    return out


class Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


UTIME_NOW, UTIME_OMIT = (1 << 30) - 1, (1 << 30) - 2
CLOCK_REALTIME_COARSE = 5  # Linux; the clock tmpfs stamps with (Python does not name it)
AT_SYMLINK_NOFOLLOW = 0x100


def utimensat(path: Path, atime: tuple[int, int], mtime: tuple[int, int]) -> None:
    """utimensat(2) with (seconds, nanoseconds) pairs; nanoseconds may be UTIME_NOW/OMIT."""
    times = (Timespec * 2)(Timespec(*atime), Timespec(*mtime))
    if _libc.utimensat(AT_FDCWD, bytes(path), times, 0) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def times(path: Path) -> tuple[int, int]:
    st = path.lstat()
    return st.st_atime_ns, st.st_mtime_ns


def recent(ns: int) -> bool:
    return abs(time.time_ns() - ns) < 60 * 10**9


def changes_ctime(path: Path, action: Callable[[], object], then: Path | None = None) -> bool:
    """Whether `action` moves `path`'s ctime. The clock is let pass the old ctime first (by
    a bounded wait, not a sleep): tmpfs stamps with the coarse clock, a tick of a few ms.
    `then`: where the entry is after `action` (a rename)."""
    before = path.lstat().st_ctime_ns
    wait_for(lambda: time.clock_gettime_ns(CLOCK_REALTIME_COARSE) > before, 5, "a clock tick")
    action()
    return (then or path).lstat().st_ctime_ns > before


def kind(path: Path) -> tuple[int, int, int, int, int]:
    st = path.lstat()
    return (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), os.major(st.st_rdev),
            os.minor(st.st_rdev), st.st_nlink)  # fmt: skip


def owner(path: Path) -> tuple[int, int]:
    st = path.lstat()
    return st.st_uid, st.st_gid


def unix_socket_round_trip(root: Path) -> object:
    """bind(2) makes the socket's node in the folder; connect through the same name."""
    here = os.getcwd()
    os.chdir(root)  # a relative name: socket paths are limited to 108 bytes
    server, client = socket.socket(socket.AF_UNIX), socket.socket(socket.AF_UNIX)
    try:
        server.bind("sock")
        server.listen(1)
        client.connect("sock")
        connection, _ = server.accept()
        client.sendall(b"ping")
        got = connection.recv(4)
        connection.close()
        return got
    finally:
        client.close()
        server.close()
        os.chdir(here)


@scenario
def file_types(root: Path) -> object:
    os.mkfifo(root / "fifo", 0o640)
    os.mknod(root / "chr", stat.S_IFCHR | 0o600, os.makedev(1, 3))
    os.mknod(root / "blk", stat.S_IFBLK | 0o600, os.makedev(7, 0))
    os.mknod(root / "reg", stat.S_IFREG | 0o600)
    sent = unix_socket_round_trip(root)
    fd = os.open(root / "fifo", os.O_RDWR | os.O_NONBLOCK)  # a FIFO is a pipe in the kernel
    os.write(fd, b"through")
    piped = os.read(fd, 100)
    os.close(fd)
    return [
        {name: kind(root / name) for name in ("fifo", "chr", "blk", "reg", "sock")},
        sent, piped, listing(root),
        attempt(lambda: os.mknod(root / "whiteout", stat.S_IFCHR, 0)),
        attempt(lambda: os.mkfifo(root / "fifo")),
        attempt(lambda: os.mknod(root / "pkg/mod.py", stat.S_IFIFO)),
    ]  # fmt: skip


@scenario
def special_files_rename_chmod_unlink(root: Path) -> object:
    os.mkfifo(root / "fifo")
    os.mknod(root / "chr", stat.S_IFCHR | 0o644, os.makedev(1, 5))
    os.rename(root / "fifo", root / "pkg/moved_fifo")
    os.chmod(root / "pkg/moved_fifo", 0o600)
    os.chmod(root / "chr", 0o640)
    os.unlink(root / "chr")
    return [kind(root / "pkg/moved_fifo"), listing(root), attempt(lambda: kind(root / "chr"))]


@scenario
def open_device_node(root: Path) -> object:
    os.mknod(root / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
    return attempt(lambda: (root / "null").read_bytes())


@scenario
def chown_as_root(root: Path) -> object:
    os.chown(root / "README.md", NOBODY, NOBODY)
    first = owner(root / "README.md")
    os.chown(root / "README.md", -1, 100)
    os.lchown(root / "link_to_mod", 1, 2)
    os.chown(root / "pkg", 3, 4)
    (root / "new").write_text("x")
    os.chmod(root / "new", 0o6755)
    os.chown(root / "new", 5, 6)
    return [
        first, owner(root / "README.md"), owner(root / "link_to_mod"), owner(root / "pkg/mod.py"),
        owner(root / "pkg"), owner(root / "new"), stat.S_IMODE((root / "new").stat().st_mode),
        (root / "README.md").read_text(),
    ]  # fmt: skip


@scenario
def created_by_another_uid(root: Path) -> object:
    (root / "shared").mkdir()
    os.chmod(root / "shared", 0o777)
    shared = root / "shared"

    def make() -> object:
        (shared / "file").write_text("mine")
        (shared / "dir").mkdir()
        os.mkfifo(shared / "fifo")
        os.symlink("file", shared / "link")
        return "made"

    made = as_user(NOBODY, NOBODY, make)
    return [made, {n: owner(shared / n) for n in ("file", "dir", "fifo", "link")}]


@scenario
def permissions_as_another_uid(root: Path) -> object:
    secret, public = root / "secret", root / "public"
    secret.write_text("s")
    os.chmod(secret, 0o600)
    public.write_text("p")
    os.chmod(public, 0o644)
    nobody = functools.partial(as_user, NOBODY, NOBODY)
    denied = [
        nobody(lambda: secret.read_text()),
        nobody(lambda: public.read_text()),
        nobody(lambda: public.write_text("no")),
        nobody(lambda: os.chmod(public, 0o666)),
        nobody(lambda: os.chown(public, NOBODY, NOBODY)),
        nobody(lambda: os.utime(public, ns=(1, 1))),
        nobody(lambda: os.utime(public)),
    ]
    os.chown(public, NOBODY, NOBODY)
    owned = [
        nobody(lambda: public.write_text("yes") or public.read_text()),
        nobody(lambda: os.chmod(public, 0o600) or "chmod"),
        nobody(lambda: os.utime(public, ns=(1, 1)) or "utime"),
        nobody(lambda: os.chown(public, -1, 0)),
        nobody(lambda: os.chown(public, 0, -1)),
    ]
    (root / "sticky").mkdir()
    os.chmod(root / "sticky", 0o1777)
    (root / "sticky/roots").write_text("r")
    (root / "locked").mkdir()
    (root / "locked/inside").write_text("i")
    os.chmod(root / "locked", 0o700)
    places = [
        nobody(lambda: os.unlink(root / "sticky/roots")),
        nobody(lambda: ((root / "sticky/own").write_text("o"), os.unlink(root / "sticky/own"))),
        nobody(lambda: (root / "locked/inside").stat()),
        nobody(lambda: os.listdir(root / "locked")),
        nobody(lambda: os.mkdir(root / "pkg/not_mine")),
    ]
    return [denied, owned, places, stat.S_IMODE(public.stat().st_mode), owner(public)]


@scenario
def permission_rules_of_the_kernel(root: Path) -> object:
    """The checks `default_permissions` leaves to the kernel, seen through each filesystem."""
    nobody = functools.partial(as_user, NOBODY, NOBODY)
    (root / "theirs").write_text("t")
    os.chown(root / "theirs", NOBODY, 0)  # owned by nobody, group root (not nobody's)
    (root / "open").write_text("o")
    os.chmod(root / "open", 0o666)
    (root / "sticky").mkdir()
    os.chmod(root / "sticky", 0o1777)
    (root / "sticky/roots").write_text("r")
    return [
        nobody(lambda: os.chmod(root / "theirs", 0o2755) or "chmod"),
        stat.S_IMODE((root / "theirs").stat().st_mode),  # setgid dropped: not in the group
        nobody(lambda: os.utime(root / "open") or "now"),  # UTIME_NOW needs write permission
        nobody(lambda: os.utime(root / "open", ns=(1, 1))),  # explicit times need ownership
        nobody(lambda: os.link(root / "README.md", root / "sticky/mine")),  # protected_hardlinks
        nobody(lambda: os.rename(root / "sticky/roots", root / "sticky/moved")),
        nobody(lambda: os.truncate(root / "README.md", 0)),
        nobody(lambda: os.open(root / "new_in_root", os.O_CREAT | os.O_WRONLY, 0o644)),
    ]


@scenario
def setgid_directory(root: Path) -> object:
    group = root / "group"
    group.mkdir()
    os.chown(group, 0, 1234)
    os.chmod(group, 0o2775)
    (group / "f").write_text("x")
    (group / "sub").mkdir()
    os.mkfifo(group / "fifo")
    return [owner(group / n) for n in ("f", "sub", "fifo")] + [
        stat.S_IMODE((group / "sub").stat().st_mode) & stat.S_ISGID
    ]


@scenario
def hard_links(root: Path) -> object:
    return attempt(lambda: os.link(root / "README.md", root / "hard") or "linked")


@scenario
def hard_link_counts(root: Path) -> object:
    readme, hard = root / "README.md", root / "hard"
    os.link(readme, hard)  # a link to a lower file: one copy-up for both names
    after_link = [
        readme.stat().st_nlink,
        hard.stat().st_nlink,
        readme.stat().st_ino == hard.stat().st_ino,
    ]
    with open(hard, "a") as f:
        f.write("through the other name\n")
    os.chmod(hard, 0o600)
    shared = [readme.read_text(), stat.S_IMODE(readme.stat().st_mode)]
    os.rename(hard, root / "docs/moved")
    moved = root / "docs/moved"
    after_rename = [moved.stat().st_nlink, moved.stat().st_ino == readme.stat().st_ino]
    os.rename(readme, moved)  # two names of one inode: rename does nothing
    same = [readme.exists(), moved.exists()]
    os.unlink(readme)
    left = [moved.stat().st_nlink, moved.read_text()]
    fd = os.open(moved, os.O_RDONLY)
    os.unlink(moved)
    unlinked = os.fstat(fd).st_nlink
    os.close(fd)
    return [after_link, shared, after_rename, same, left, unlinked, listing(root / "docs")]


@scenario
def hard_link_kinds_and_errors(root: Path) -> object:
    (root / "new").write_text("n")
    os.link(root / "new", root / "new2")
    os.link(root / "new2", root / "pkg/new3")
    os.mkfifo(root / "fifo")
    os.link(root / "fifo", root / "fifo2")
    os.link(root / "link_to_mod", root / "hlink", follow_symlinks=False)
    os.unlink(root / "new")
    return [
        [(root / n).lstat().st_nlink for n in ("new2", "pkg/new3", "fifo", "fifo2", "hlink")],
        stat.S_ISLNK((root / "hlink").lstat().st_mode), os.readlink(root / "hlink"),
        attempt(lambda: os.link(root / "pkg", root / "pkg_link")),
        attempt(lambda: os.link(root / "run.sh", root / "README.md")),
        attempt(lambda: os.link(root / "missing", root / "x")),
        (root / "pkg/new3").read_text(),
    ]  # fmt: skip


@scenario
def symlink_edge_cases(root: Path) -> object:
    os.symlink("x" * 4095, root / "long")  # PATH_MAX - 1, as pjdfstest's symlink/03.t
    os.symlink("pkg", root / "to_dir")
    os.lchown(root / "to_dir", 7, 8)
    return [
        len(os.readlink(root / "long")),
        attempt(lambda: os.symlink("y" * 4096, root / "too_long")),
        attempt(lambda: os.symlink("x", root / ("n" * 256))),
        owner(root / "to_dir"), owner(root / "pkg"), sorted(os.listdir(root / "to_dir")),
        attempt(lambda: os.rmdir(root / "to_dir")),
        attempt(lambda: os.unlink(root / "to_dir") or "unlinked"), listing(root / "pkg"),
    ]  # fmt: skip


@scenario
def directory_link_counts(root: Path) -> object:
    (root / "a/b").mkdir(parents=True)
    (root / "a/c").mkdir()
    (root / "a/f").write_text("x")
    made = [(root / "a").stat().st_nlink, (root / "a/b").stat().st_nlink]
    os.rmdir(root / "a/c")
    os.rename(root / "docs", root / "renamed")
    return [made, (root / "a").stat().st_nlink, (root / "pkg").stat().st_nlink,
            (root / "renamed").stat().st_nlink, root.stat().st_nlink]  # fmt: skip


@scenario
def merged_directory_link_count(root: Path) -> object:
    (root / "pkg/new").mkdir()
    return (root / "pkg").stat().st_nlink


@scenario
def timestamps(root: Path) -> object:
    readme = root / "README.md"
    os.utime(readme, ns=(1_000_000_000, 2_000_000_000))
    out: list[object] = [times(readme)]
    utimensat(readme, (0, UTIME_OMIT), (3, 0))
    out.append(times(readme))
    utimensat(readme, (4, 5), (0, UTIME_OMIT))
    out.append(times(readme))
    utimensat(readme, (0, UTIME_OMIT), (0, UTIME_OMIT))
    out.append(times(readme))
    utimensat(readme, (0, UTIME_NOW), (0, UTIME_OMIT))
    atime, mtime = times(readme)
    out.append((recent(atime), mtime))
    os.utime(root / "link_to_mod", ns=(6, 7), follow_symlinks=False)
    os.utime(root / "docs", ns=(8, 9))
    out += [times(root / "link_to_mod"), times(root / "docs")]
    os.utime(root / "pkg/mod.py", ns=(10, 11))
    with open(root / "pkg/mod.py", "a") as f:
        f.write("# appended\n")
    atime, mtime = times(root / "pkg/mod.py")
    out.append((atime, recent(mtime)))
    os.utime(root / "run.sh")  # times None: UTIME_NOW for both
    out.append(tuple(recent(t) for t in times(root / "run.sh")))
    return out


@scenario
def ctime_changes(root: Path) -> object:
    readme = root / "README.md"
    (root / "other").write_text("o")
    os.link(root / "other", root / "other2")
    return {
        "read": changes_ctime(readme, readme.read_bytes),
        "chmod": changes_ctime(readme, lambda: os.chmod(readme, 0o600)),
        "chown": changes_ctime(readme, lambda: os.chown(readme, 1, 1)),
        "utime": changes_ctime(readme, lambda: os.utime(readme, ns=(1, 1))),
        "write": changes_ctime(readme, lambda: readme.open("a").write("w")),
        "truncate": changes_ctime(readme, lambda: os.truncate(readme, 1)),
        "link": changes_ctime(readme, lambda: os.link(readme, root / "linked")),
        "rename": changes_ctime(
            root / "run.sh", lambda: os.rename(root / "run.sh", root / "ran"), then=root / "ran"
        ),
        "unlink other name": changes_ctime(root / "other2", lambda: os.unlink(root / "other")),
        "failed chmod": changes_ctime(
            root / "pkg/mod.py",
            lambda: as_user(NOBODY, NOBODY, lambda: os.chmod(root / "pkg/mod.py", 0o777)),
        ),
    }


@scenario
def directory_times_follow_entries(root: Path) -> object:
    """Making or removing an entry moves its directory's mtime and ctime (pjdfstest checks
    this after every create, mkdir, mknod, link, symlink, unlink, rmdir and rename)."""
    (root / "made").mkdir()
    (root / "docs/old").write_text("o")
    (root / "docs/gone").mkdir()

    def moves(directories: list[Path], action: Callable[[], object]) -> list[tuple[bool, bool]]:
        before = [(d.stat().st_mtime_ns, d.stat().st_ctime_ns) for d in directories]
        latest = max(t for pair in before for t in pair)
        wait_for(lambda: time.clock_gettime_ns(CLOCK_REALTIME_COARSE) > latest, 5, "a clock tick")
        action()
        return [(d.stat().st_mtime_ns > m, d.stat().st_ctime_ns > c)
                for d, (m, c) in zip(directories, before, strict=True)]  # fmt: skip

    docs, made = root / "docs", root / "made"
    return {
        "create in a folder directory": moves([docs], lambda: (docs / "new").write_text("n")),
        "create at the root": moves([root], lambda: (root / "top").write_text("t")),
        "create in a new directory": moves([made], lambda: (made / "f").write_text("f")),
        "mkdir": moves([docs], lambda: (docs / "sub").mkdir()),
        "mkfifo": moves([docs], lambda: os.mkfifo(docs / "fifo")),
        "symlink": moves([docs], lambda: os.symlink("new", docs / "link")),
        "link": moves([docs], lambda: os.link(docs / "new", docs / "new2")),
        "unlink": moves([docs], lambda: os.unlink(docs / "old")),
        "rmdir": moves([docs], lambda: os.rmdir(docs / "gone")),
        "rename within": moves([docs], lambda: os.rename(docs / "new", docs / "renamed")),
        "rename across": moves([docs, made], lambda: os.rename(docs / "new2", made / "moved")),
        "write leaves it": moves([docs], lambda: (docs / "renamed").write_text("w")),
    }


@scenario
def dot_entries_are_listed(root: Path) -> object:
    """Every directory lists "." and ".." (what `ls -a` shows), a new one too."""
    (root / "made/sub").mkdir(parents=True)

    def names(directory: Path) -> list[str]:
        out = subprocess.run(["ls", "-a1", str(directory)], capture_output=True, text=True)
        return out.stdout.split()

    return {name: names(root / name) for name in ("", "docs", "made", "made/sub")}


@scenario
def huge_sparse_truncates(root: Path) -> object:
    """A size past any write is a hole that reads as zeros and costs nothing, up to sizes
    no disk holds (pjdfstest's 999,999,999,999,999 bytes)."""
    path = root / "sparse"
    path.write_bytes(b"head")
    out: list[object] = []
    for size in (2 * 2**30, 999_999_999_999_999, 2 * 2**30, 6):
        out.append(attempt(lambda size=size: os.truncate(path, size) or path.stat().st_size))
        with open(path, "rb") as f:
            f.seek(max(0, path.stat().st_size - 3))
            out.append(f.read(8))
    with open(path, "r+b") as f:
        f.seek(2**20)
        f.write(b"far")
    out += [path.stat().st_size, path.read_bytes()[:6], path.read_bytes()[-3:]]
    return out


# -- legitimate differences -----------------------------------------------------------------------


@scenario
def set_xattr(root: Path) -> object:
    return attempt(lambda: os.setxattr(root / "README.md", "user.k", b"v") or "set")


DIFFERENCES = {
    "set_xattr": "extended attributes are read-only in the shadow (ENOTSUP); overlayfs stores them "
    "in its upper layer",
    "merged_directory_link_count": "overlayfs counts 1 link for a lower directory once anything "
    "below it changed (merged); the shadow keeps the lower directory's own count, which the "
    "kernel's cached attributes of that directory would not see change",
    "open_device_node": "the shadow is mounted nodev (libfuse's default, kept on purpose): a device "
    "node can be made and listed, not opened; the reference overlayfs sits on a tmpfs without nodev",
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
