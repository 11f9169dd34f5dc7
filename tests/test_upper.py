"""The manifest <-> overlayfs upper translation, held against the FUSE view.

Differential and seeded: a random user folder, a random manifest made by random operations
through the FUSE mount, then

1. the FUSE mount (after `activate`) and a kernel overlayfs with `write_upper`'s upper list,
   read and stat identically;
2. the same random operations applied in both views leave identical views, and the
   overlay's harvest (`read_upper`) activated on the FUSE mount shows that same view again.

Overlayfs is mounted inside a private mount namespace (`unshare`), so nothing is left
mounted if a test dies. Needs root (trusted.* xattrs, overlayfs) and FUSE.
"""

from __future__ import annotations

import json
import os
import random
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from overlay_helpers import needs_fuse, needs_root

from shadowkernel.overlay.store import WHITEOUT, BlobStore, Dir, File, Symlink, patched
from shadowkernel.overlay.upper import TRUSTED, USER, mount_options, read_upper, write_upper
from shadowkernel.paths import RelPath

pytestmark = [needs_root, needs_fuse]

# Lists a tree as JSON: path -> [type, mode, size, mtime, bytes-or-target]. Run as a program so
# it reads the overlay from inside the namespace that mounted it. Without `dir_times`, only
# regular files keep their mtimes: overlayfs bumps a directory's on every child change, and
# the FUSE view ignores lutimes() on a symlink (reported to overlay/).
DUMP = r"""
import json, os, stat, sys, time
root, dir_times, extended = sys.argv[1], sys.argv[2] == "1", sys.argv[3:] == ["1"]
out, first_name = {}, {}
for dirpath, dirs, files in os.walk(root):
    dirs.sort()
    for name in sorted(dirs + files):
        full = os.path.join(dirpath, name)
        st = os.lstat(full)
        rel = os.path.relpath(full, root)
        if stat.S_ISDIR(st.st_mode):
            body, size = sorted(os.listdir(full)), 0
        elif stat.S_ISLNK(st.st_mode):
            body, size = os.readlink(full), st.st_size
        elif stat.S_ISREG(st.st_mode):
            body, size = open(full, "rb").read().hex(), st.st_size
        else:  # a FIFO, a socket's node, a device node: never opened
            body, size = st.st_rdev, 0
        keep_time = dir_times or stat.S_ISREG(st.st_mode)
        out[rel] = [stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), size,
                    st.st_mtime_ns if keep_time else 0, body]
        if extended and not stat.S_ISDIR(st.st_mode):
            # Reads move atimes (relatime, and the dump reads): only one set on purpose in the
            # future is stable. The names of one inode name its first path.
            atime = st.st_atime_ns if st.st_atime_ns > time.time_ns() + 86400 * 10**9 else 0
            inode = first_name.setdefault(st.st_ino, rel) if st.st_nlink > 1 else rel
            out[rel] += [st.st_uid, st.st_gid, st.st_nlink, atime, inode]
top = os.stat(root)
out["."] = [0, stat.S_IMODE(top.st_mode), 0, top.st_mtime_ns if dir_times else 0,
            sorted(os.listdir(root))]
print(json.dumps(out, sort_keys=True))
"""

# Random operations, deterministic given the seed and the view: the same program run in two
# views that list identically must leave them identical. Every change gets an explicit mtime.
OPS = r"""
import errno, os, random, shutil, stat, sys
root, seed, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
stamp = lambda: rng.randrange(10**18, 2 * 10**18)

def walk():
    dirs, files = [""], []
    for dirpath, dnames, fnames in os.walk(root):
        dnames.sort()
        rel = os.path.relpath(dirpath, root)
        rel = "" if rel == "." else rel + "/"
        dirs += [rel + d for d in sorted(dnames)]
        files += [rel + f for f in sorted(fnames)]
    return dirs, files

def at(rel):
    return os.path.join(root, rel) if rel else root

def fresh(dirs):
    return (rng.choice(dirs) + "/" if dirs else "").lstrip("/") + "n%d" % rng.randrange(10**6)

def move(src, dst):
    try:
        os.rename(at(src), at(dst))
    except OSError as exc:  # EXDEV without redirect_dir: what mv does
        if exc.errno != errno.EXDEV:
            raise
        shutil.copytree(at(src), at(dst), symlinks=True, copy_function=shutil.copy2)
        shutil.rmtree(at(src))

for _ in range(count):
    dirs, files = walk()
    regular = [f for f in files if stat.S_ISREG(os.lstat(at(f)).st_mode)]
    op = rng.choice(["new", "over", "append", "chmod", "touch", "mkdir", "rm", "rmtree",
                     "mvfile", "mvdir", "link", "replace"])
    t = stamp()
    try:
        if op == "new":
            p = fresh(dirs); open(at(p), "wb").write(rng.randbytes(rng.randrange(50)))
            os.utime(at(p), ns=(t, t))
        elif op == "over" and regular:
            p = rng.choice(regular); open(at(p), "wb").write(rng.randbytes(rng.randrange(50)))
            os.utime(at(p), ns=(t, t))
        elif op == "append" and regular:
            p = rng.choice(regular); open(at(p), "ab").write(b"more")
            os.utime(at(p), ns=(t, t))
        elif op == "chmod" and regular:
            p = rng.choice(regular); os.chmod(at(p), rng.choice([0o600, 0o755, 0o644]))
            os.utime(at(p), ns=(t, t))
        elif op == "touch" and regular:
            p = rng.choice(regular); os.utime(at(p), ns=(t, t))
        elif op == "mkdir":
            p = fresh(dirs); os.mkdir(at(p)); os.chmod(at(p), rng.choice([0o755, 0o700]))
        elif op == "rm" and files:
            os.unlink(at(rng.choice(files)))
        elif op == "rmtree" and len(dirs) > 1:
            shutil.rmtree(at(rng.choice(dirs[1:])))
        elif op == "mvfile" and files:
            move(rng.choice(files), fresh(dirs))
        elif op == "mvdir" and len(dirs) > 1:
            src = rng.choice(dirs[1:])
            targets = [d for d in dirs if d != src and not d.startswith(src + "/")]
            dst = fresh(targets)
            move(src, dst)
        elif op == "link":
            p = fresh(dirs); os.symlink(rng.choice(files + ["missing", "/etc/hostname"]), at(p))
        elif op == "replace" and len(regular) > 1:
            a, b = rng.sample(regular, 2); os.rename(at(a), at(b))
    except OSError as exc:
        print("op", op, "failed:", exc, file=sys.stderr)
"""


def make_lower(root: Path, rng: random.Random) -> None:
    """A random user folder: nested directories, files of several modes, symlinks."""
    dirs = [root]
    for i in range(rng.randrange(3, 7)):
        d = rng.choice(dirs) / f"d{i}"
        d.mkdir()
        dirs.append(d)
    for i in range(rng.randrange(6, 14)):
        f = rng.choice(dirs) / f"f{i}.txt"
        f.write_bytes(rng.randbytes(rng.randrange(0, 200)))
        f.chmod(rng.choice([0o644, 0o755, 0o600]))
    (root / "rel_link").symlink_to("d0")
    (root / "abs_link").symlink_to(root / "d0")
    for d in sorted(dirs, key=lambda p: -len(p.parts)):
        for child in d.iterdir():
            t = rng.randrange(10**17, 10**18)
            os.utime(child, ns=(t, t), follow_symlinks=False)


def dump(
    root: str, *, dir_times: bool, prefix: list[str] | None = None, full: bool = False
) -> dict:
    """The tree as DUMP lists it; `full` adds owners, link counts, atimes and inode groups."""
    command = [*(prefix or []), sys.executable, "-c", DUMP, root, "1" if dir_times else "0",
               "1" if full else "0"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    return json.loads(out)


def in_overlay(source: Path, upper: Path, redirects: bool, *program: str,
               xattrs=TRUSTED) -> list[str]:  # fmt: skip
    """A command prefix running `program` with the overlay mounted at the user's own path;
    with USER xattrs, the `userxattr` overlayfs of a user namespace (root mapped to root)."""
    work = upper.parent / "work"
    work.mkdir(exist_ok=True)
    options = mount_options(str(source), str(upper), str(work), redirects, xattrs)
    script = 'mount -t overlay overlay -o "$1" "$2" && shift 2 && exec "$@"'
    userns = ["--user", "--map-root-user"] if xattrs == USER else []
    return ["unshare", *userns, "--mount", "--propagation", "private", "sh", "-c", script, "sh",
            options, str(source), *program]  # fmt: skip


def run_ops(root: str, seed: int, prefix: list[str] | None = None) -> None:
    command = [*(prefix or []), sys.executable, "-c", OPS, root, str(seed), "25"]
    subprocess.run(command, check=True, capture_output=True)


def unalias(view: dict, mountpoint: str, source: str) -> dict:
    """FUSE shows links into the user's folder redirected to the mount; undo that to compare."""
    out = {}
    for path, (kind, mode, size, mtime, body, *more) in view.items():
        if isinstance(body, str) and body.startswith(mountpoint):
            body = source + body[len(mountpoint) :]
            size = len(os.fsencode(body))
        out[path] = [kind, mode, size, mtime, body, *more]
    return out


@pytest.fixture
def workspace(tmp_path: Path):
    """A fresh user folder per seed; the shadow is started by the test."""
    return tmp_path


@pytest.mark.parametrize(("redirects", "xattrs"), [(True, TRUSTED), (False, TRUSTED), (False, USER)],
                         ids=["redirect", "copy", "userxattr"])  # fmt: skip
@pytest.mark.parametrize("seed", range(3))
def test_views_agree_on_random_manifests(tmp_path: Path, seed: int, redirects: bool,
                                         xattrs) -> None:  # fmt: skip
    """userxattr: what a normal user's runs mount (user.overlay.* xattrs, in a user namespace)."""
    from shadowkernel.overlay.shadow import Shadow

    def mounted(upper: Path) -> list[str]:
        return in_overlay(source, upper, redirects, xattrs=xattrs)

    rng = random.Random(seed)
    source = tmp_path / "src"
    source.mkdir()
    make_lower(source, rng)
    before = dump(str(source), dir_times=True)
    with Shadow(source) as shadow:
        mnt = shadow.mountpoint
        run_ops(mnt, seed)  # a realistic manifest: what programs doing these ops leave behind
        manifest = shadow.collect()
        assert all(o is not None for o in manifest.values())
        shadow.activate(manifest)
        fuse_view = unalias(dump(mnt, dir_times=True), mnt, str(source))

        upper = tmp_path / f"layer-{seed}" / "upper"
        upper.mkdir(parents=True)
        write_upper(manifest, str(source), str(upper), redirects=redirects, xattrs=xattrs)
        overlay_view = dump(str(source), dir_times=True,
                            prefix=mounted(upper))  # fmt: skip
        assert overlay_view == fuse_view

        # The same operations in both views, then the harvest shown through FUSE.
        run_ops(mnt, seed + 1000)
        run_ops(str(source), seed + 1000, prefix=mounted(upper))
        fuse_after = unalias(dump(mnt, dir_times=False), mnt, str(source))
        overlay_after = dump(str(source), dir_times=False,
                             prefix=mounted(upper))  # fmt: skip
        assert overlay_after == fuse_after

        delta = read_upper(str(upper), str(source), manifest, shadow.store, xattrs)
        harvested = patched(manifest, delta)
        shadow.activate(harvested)
        assert unalias(dump(mnt, dir_times=False), mnt, str(source)) == overlay_after

        # And the harvest written as a fresh upper shows the same view again.
        again = tmp_path / f"again-{seed}" / "upper"
        again.mkdir(parents=True)
        write_upper(harvested, str(source), str(again), redirects=redirects, xattrs=xattrs)
        assert dump(str(source), dir_times=False,
                    prefix=mounted(again)) == overlay_after  # fmt: skip
    assert dump(str(source), dir_times=True) == before  # the user's folder never changed


def test_untouched_upper_harvests_nothing(tmp_path: Path) -> None:
    """A run that changes nothing reports nothing, though overlayfs copied parents up."""
    source = tmp_path / "src"
    (source / "a" / "b").mkdir(parents=True)
    (source / "a" / "b" / "f").write_text("one")
    (source / "g").write_text("two")
    store = BlobStore()
    manifest = {
        RelPath("a/b/new"): File(blob=store.make(b"x"), mode=0o600, mtime_ns=10**18),
        RelPath("moved"): File(origin=RelPath("g"), mode=0o644, mtime_ns=10**18),
        RelPath("g"): WHITEOUT,
        RelPath("fresh"): Dir(origin=None, mode=0o700, mtime_ns=10**18),
        RelPath("fresh/link"): Symlink(target=b"../a", mtime_ns=10**18),
    }
    for redirects in (True, False):
        upper = Path(tempfile.mkdtemp(dir=tmp_path)) / "upper"
        upper.mkdir()
        write_upper(manifest, str(source), str(upper), redirects=redirects)
        # Open for writing without writing: overlayfs copies the file up.
        touch = "import sys; open(sys.argv[1] + '/a/b/f', 'r+b').close()"
        prefix = in_overlay(source, upper, redirects)
        subprocess.run([*prefix, sys.executable, "-c", touch, str(source)], check=True)
        assert read_upper(str(upper), str(source), manifest, store) == {}


def test_rename_of_a_lower_directory_comes_back_as_a_recorded_rename(tmp_path: Path) -> None:
    source = tmp_path / "src"
    (source / "big" / "inner").mkdir(parents=True)
    (source / "big" / "inner" / "data").write_bytes(b"x" * 10000)
    upper = tmp_path / "layer" / "upper"
    upper.mkdir(parents=True)
    write_upper({}, str(source), str(upper))
    rename = "import os, sys; os.rename(sys.argv[1] + '/big', sys.argv[1] + '/moved')"
    subprocess.run([*in_overlay(source, upper, True), sys.executable, "-c", rename, str(source)],
                   check=True)  # fmt: skip
    delta = read_upper(str(upper), str(source), {}, BlobStore())
    assert delta == {
        RelPath("big"): WHITEOUT,
        RelPath("moved"): Dir(origin=RelPath("big"), mode=0o755,
                              mtime_ns=delta[RelPath("moved")].mtime_ns),  # type: ignore[union-attr]
    }  # fmt: skip


# What a run makes beyond files and directories: special files, hard links, owners, times.
RUN_MAKES = r"""
import os, stat, sys
root = sys.argv[1]
at = lambda rel: os.path.join(root, rel)
os.mkfifo(at("fifo2"), 0o600)
os.link(at("pkg/mod.py"), at("pkg/mod2"))  # a link to a lower file
os.link(at("pkg/plain.txt"), at("plain2"))  # ... that the run changes in no other way
os.link(at("made"), at("made3"))  # a third name for a linked file of the shadow
os.unlink(at("made2"))
os.chown(at("pkg/mod.py"), 1, 2)
os.utime(at("fifo"), ns=(4 * 10**18, 3 * 10**18))
os.rename(at("hard"), at("pkg/hard"))
"""


def test_special_files_links_and_owners_survive_both_paths(tmp_path: Path) -> None:
    """Made in the shadow, shown by a run's overlayfs; made in a run, harvested into the shadow
    and into the next run's upper: FIFOs, socket and device nodes, hard links, owners, atimes."""
    from shadowkernel.overlay.shadow import Shadow

    source = tmp_path / "src"
    (source / "pkg").mkdir(parents=True)
    (source / "README.md").write_text("# readme\n")
    (source / "pkg/mod.py").write_text("x = 1\n")
    (source / "pkg/plain.txt").write_text("plain\n")
    with Shadow(source) as shadow:
        mnt = Path(shadow.mountpoint)
        os.mkfifo(mnt / "fifo", 0o640)
        os.mknod(mnt / "sock", stat.S_IFSOCK | 0o755)
        os.mknod(mnt / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
        os.link(mnt / "README.md", mnt / "hard")
        (mnt / "made").write_text("made in the shadow\n")
        os.link(mnt / "made", mnt / "made2")
        os.chown(mnt / "made", 65534, 65534)
        os.utime(mnt / "made", ns=(2 * 10**18, 10**18))
        manifest = shadow.collect()
        shadow.activate(manifest)
        fuse_view = dump(str(mnt), dir_times=False, full=True)
        assert fuse_view["made2"][5:] == [65534, 65534, 2, 2 * 10**18, "made"]

        upper = tmp_path / "layer" / "upper"
        upper.mkdir(parents=True)
        write_upper(manifest, str(source), str(upper))
        prefix = in_overlay(source, upper, True)
        assert dump(str(source), dir_times=False, full=True, prefix=prefix) == fuse_view
        assert read_upper(str(upper), str(source), manifest, shadow.store) == {}  # read only

        subprocess.run([*prefix, sys.executable, "-c", RUN_MAKES, str(source)], check=True)
        after_run = dump(str(source), dir_times=False, full=True, prefix=prefix)
        assert after_run["pkg/mod2"][5:] == [1, 2, 2, 0, "pkg/mod.py"]
        assert after_run["pkg/plain.txt"][5:] == [0, 0, 2, 0, "plain2"]  # plain2 is listed first
        harvested = patched(manifest, read_upper(str(upper), str(source), manifest, shadow.store))
        shadow.activate(harvested)
        assert dump(str(mnt), dir_times=False, full=True) == after_run

        again = tmp_path / "again" / "upper"
        again.mkdir(parents=True)
        write_upper(harvested, str(source), str(again))
        next_run = in_overlay(source, again, True)
        assert dump(str(source), dir_times=False, full=True, prefix=next_run) == after_run


def test_redirects_need_trusted_xattrs(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="redirects=True needs trusted"):
        write_upper({}, str(tmp_path), str(tmp_path), redirects=True, xattrs=USER)
    with pytest.raises(ValueError, match="redirects=True needs trusted"):
        mount_options("/a", "/b", "/c", True, USER)
    assert mount_options("/a", "/b", "/c", False, USER).endswith(",userxattr")
