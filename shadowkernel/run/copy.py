"""Runs without a mount ("documents" mode): in a private copy of the project at a version.

`run_in_copy` materialises the manifest's view of the user's folder in a fresh temporary
directory, runs the command there, and harvests what the run wrote as the same delta of
overrides a FUSE run gives (`RunResult.written`), by comparing the copy after the run with
what was materialised. Then the copy is removed.

What the copy holds, and what it does not:

- The project's files: in a git repository, what `git ls-files --cached --others
  --exclude-standard` lists (so every .gitignore is honoured); elsewhere a walk that skips
  what the root .gitignore and the usual caches exclude. Each file is a reflink where the
  filesystem has them (FICLONE: btrfs, xfs, ...; then the copy goes to the temporary
  directory, on the project's filesystem), else a plain copy on tmpfs (/dev/shm) when the
  files fit there twice over, else in the temporary directory. Ignored
  files (build outputs, a local .env) and `.git` are not in the copy: a run sees no
  repository.
- Environments (`.venv`, `venv`, `node_modules` and any top-level folder with a
  `pyvenv.cfg`) are never copied. In the sandbox (bwrap, as for FUSE runs) the copy holds an
  empty folder for each, where the run gets a copy-on-write layer of the real one: it reads
  the user's environment, and what it writes there is thrown away (listed in
  `written_outside`). Without bwrap the copy holds a symlink to the real path, read-only to
  a run Landlock confines (a `pip install` there fails), writable to an unconfined one
  (`sandbox=False`: it changes the user's environment); the run's notes say which.
- Path transparency where the sandbox can be had: the copy is bound over the user's own
  path, so venvs, editable installs and absolute paths see the branch's version
  (`path_transparent=True`). Without bwrap the run works at the copy's path and absolute
  paths of the user's folder still reach the user's files (`path_transparent=False`); code
  imported from the working directory (`python -m pytest`, pytest's rootdir) is the copy's.
- Confinement without bwrap (an unprivileged container): Landlock (`landlock.py`) lets the
  run write only in the copy, a private temporary directory (its TMPDIR) and `writable=`
  paths; the user's folder, its environments and the machine are read-only to it, and
  offline runs cannot make TCP connections. Where the kernel has no Landlock either, runs
  are refused unless `sandbox=False` (then the environments' symlinks are writable).

Caveat: the harvest compares (type, size, mtime,
ctime, inode, mode) of each entry, so it costs a walk of the copy (not of the environments).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import functools
import os
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import pathspec

from ..errors import RunError
from ..overlay.detached import DetachedShadow
from ..overlay.store import WHITEOUT, Dir, File, Manifest, Override, Symlink, lower_source
from ..paths import ROOT, RelPath, is_within, join, parent, rel
from .layers import Layers, private_tmp, with_tmp
from .result import RunResult
from .runner import (
    TMP_DIRS,
    Request,
    RunView,
    command_argv,
    confine,
    execute,
    run_result,
    sandbox_plan,
    scratch_parent,
)
from .sandbox import Bind, Plan
from .userns import mounter

ENVIRONMENTS = (".venv", "venv", "node_modules")
FICLONE = 0x40049409  # linux/fs.h: _IOW(0x94, 9, int)

Signature = tuple[str, int, int, int, int, int, bytes]  # kind, size, mtime, ctime, ino, mode, link


@dataclass
class Copy:
    """A materialised view: its root, the environments it links, and what it held."""

    root: str
    linked: tuple[str, ...]  # real paths of the environments the copy links to
    before: dict[RelPath, Signature]


def run_in_copy(shadow: DetachedShadow, request: Request) -> RunResult:
    """`run_in_shadow` for a shadow without a mount (see the module docstring)."""
    if request.mode not in ("auto", "copy"):
        raise RunError(f"mode={request.mode!r} needs a mount, and this workspace has none "
                       "(documents mode); use mode='auto'")  # fmt: skip
    manifest, network, disk = request.manifest, request.network, request.limits.disk
    layer = request.confinement.layer
    sandboxed = layer == "bwrap"
    copy = materialise(shadow.source, manifest, shadow.store, shadow.skip, link=not sandboxed)
    try:
        view = _copy_view(copy, shadow.source, sandboxed)
        argv = command_argv(request.command, request.python, shadow.source, view.root)
        layered = (*request.layered, *copy.linked) if sandboxed else ()
        with Layers(layered, disk, scratch_parent(), view.mounter,
                    unlisted=frozenset(TMP_DIRS)) as layers, \
                private_tmp(layer == "landlock") as tmp:  # fmt: skip
            plan = sandbox_plan(shadow, view, argv, request.workdir, network, layers, disk,
                                request.private)  # fmt: skip
            plan = confine(_in_order(plan, view, copy.linked, shadow.source), request,
                           [copy.root, tmp] if tmp else [])  # fmt: skip
            ended = execute(plan, with_tmp(request.environment, tmp), request.timeout,
                            request.output_cap, request.limits, request.cancel,
                            request.on_output)  # fmt: skip
            outside = layers.written()
        written = harvest(copy, shadow.source, manifest, shadow.store)
    finally:
        shutil.rmtree(copy.root, ignore_errors=True)
    notes = [*_notes(copy, layer), request.confinement.note(network), *ended.notes]
    setup = time.monotonic() - request.start - ended.outcome.duration
    result = run_result(argv, ended.outcome, written, view, network, notes, outside,
                        ended.oom_kills, setup)  # fmt: skip
    return dataclasses.replace(result, path_transparent=sandboxed)


def _copy_view(copy: Copy, source: str, sandboxed: bool) -> RunView:
    """Sandboxed, the copy is bound over the user's own path (path transparency); else the
    run works at the copy's path (confined by Landlock, or not at all)."""
    if sandboxed:  # the layers (and so the run) go where this user can mount: the Holder
        return RunView("copy", source, Bind(copy.root, source), mounter=mounter())
    return RunView("copy", copy.root, None)


def _in_order(plan: Plan, view: RunView, linked: Sequence[str], source: str) -> Plan:
    """The copy goes over the user's path before the environments' copy-on-write layers go
    over their mount points in it; the user's folder is not hidden (it is the detached
    shadow's "mountpoint"), since the copy covers it anyway."""
    if view.bind is None:
        return plan
    envs = [b for b in plan.binds if b.target in linked]
    rest = [b for b in plan.binds if b.target not in linked and b != view.bind]
    hide = tuple(h for h in plan.hide if h != source)
    return dataclasses.replace(plan, binds=(*rest, view.bind, *envs), hide=hide)


def _notes(copy: Copy, layer: str) -> list[str]:
    if layer == "bwrap":
        notes = ["no mount here (documents mode): ran in a private copy of the project, shown "
                 "at the folder's own path"]  # fmt: skip
    else:
        notes = [f"no mount here (documents mode) and no sandbox: ran in a private copy at "
                 f"{copy.root}; absolute paths of the user's folder still lead to it"]  # fmt: skip
    linked = ", ".join(copy.linked)
    if linked and layer == "none":
        notes.append(f"{linked} reached at the real path, writable: nothing confined the run, "
                     "and the machine was writable")  # fmt: skip
    elif linked and layer == "landlock":
        notes.append(f"{linked} reached at the real path, read-only (Landlock)")
    elif linked:
        notes.append(f"{linked} shown copy-on-write (not copied): what the run wrote there was "
                     "thrown away")  # fmt: skip
    return notes


# -- materialising ------------------------------------------------------------------------------


def materialise(
    source: str, manifest: Manifest, store, skip: Sequence[str] = (), link: bool = True
) -> Copy:
    """A fresh private copy of `manifest`'s view of `source` (see the module docstring).
    Environments become symlinks to their real paths (`link`), or empty folders where the
    sandbox mounts them."""
    files = project_files(source, skip)
    root = tempfile.mkdtemp(prefix="shadowkernel-copy-", dir=_copy_parent(source, files))
    try:
        linked = []
        for name in environments(source):
            if link:
                os.symlink(os.path.join(source, name), os.path.join(root, name))
            else:
                os.mkdir(os.path.join(root, name))
            linked.append(os.path.join(source, name))
        for path in files:
            _clone(os.path.join(source, path), os.path.join(root, path))
        for path in sorted(manifest):
            _apply(root, source, path, manifest[path])
        return Copy(root, tuple(linked), snapshot(root))
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise


def _copy_parent(source: str, files: Sequence[RelPath]) -> str:
    """The temporary directory where it can reflink the project's files; else tmpfs when the
    files fit there twice over (creating a file on tmpfs costs ~10 us, on a disk ~0.4 ms);
    else the temporary directory."""
    temp = os.path.realpath(tempfile.gettempdir())
    shm = os.path.realpath(scratch_parent())
    sample = next((os.path.join(source, p) for p in files if _is_file(source, p)), None)
    if sample and _reflinks(sample, temp):
        choice = temp
    elif shm != temp and _free(shm) > 2 * sum(os.lstat(os.path.join(source, p)).st_size
                                               for p in files):  # fmt: skip
        choice = shm
    else:
        choice = temp
    if is_within(choice, source):
        raise RunError(f"the temporary directory {choice} lies inside the project; set TMPDIR "
                       "to a folder outside it")  # fmt: skip
    return choice


def _is_file(source: str, path: RelPath) -> bool:
    return stat.S_ISREG(os.lstat(os.path.join(source, path)).st_mode)


@functools.cache
def _reflinks(sample: str, directory: str) -> bool:
    """Whether `directory` can reflink `sample` (one try per project file and directory)."""
    if os.stat(sample).st_dev != os.stat(directory).st_dev:
        return False
    with open(sample, "rb") as fin, tempfile.TemporaryFile(dir=directory) as fout:
        try:
            fcntl.ioctl(fout.fileno(), FICLONE, fin.fileno())
        except OSError:
            return False
    return True


def _free(directory: str) -> int:
    st = os.statvfs(directory)
    return st.f_bavail * st.f_frsize


def environments(source: str) -> list[str]:
    """Top-level folders a copy links instead of copying (venvs, node_modules)."""
    with os.scandir(source) as entries:
        return sorted(
            e.name for e in entries if e.is_dir(follow_symlinks=False)
            and (e.name in ENVIRONMENTS or os.path.exists(os.path.join(e.path, "pyvenv.cfg")))
        )  # fmt: skip


def project_files(source: str, skip: Sequence[str] = ()) -> list[RelPath]:
    """Files (and symlinks) of the project that a copy holds, less ignored ones and the
    environments it links."""
    linked = environments(source)
    listed = _git_files(source, linked)
    ignored = _ignore_spec(source, [*skip, *(f"/{name}/" for name in linked)])
    if listed is None:
        listed = _walk(source, ignored)
    return [p for p in listed if not ignored.match_file(p) and os.path.lexists(
        os.path.join(source, p))]  # fmt: skip


def _git_files(source: str, linked: Sequence[str]) -> list[RelPath] | None:
    git = shutil.which("git")
    if git is None:
        return None
    done = subprocess.run(
        [git, "-C", source, "ls-files", "-z", "--cached", "--others", "--exclude-standard",
         "--", ".", *(f":(exclude){name}" for name in linked)],
        capture_output=True, env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
    )  # fmt: skip
    if done.returncode != 0:
        return None
    return sorted({rel(os.fsdecode(p)) for p in done.stdout.split(b"\0") if p})


def _ignore_spec(source: str, skip: Sequence[str]) -> pathspec.PathSpec:
    lines = [*skip, ".git/"]
    with contextlib.suppress(OSError), open(os.path.join(source, ".gitignore"), "rb") as f:
        lines += f.read().decode("utf-8", errors="replace").splitlines()
    return pathspec.GitIgnoreSpec.from_lines(lines)


def _walk(source: str, ignored: pathspec.PathSpec) -> list[RelPath]:
    found: list[RelPath] = []
    for folder, dirs, files in os.walk(source):
        here = rel(os.path.relpath(folder, source)) if folder != source else ROOT
        dirs[:] = [d for d in dirs if not ignored.match_file(join(here, d) + "/")]
        found += [join(here, f) for f in files]
        found += [join(here, d) for d in dirs if os.path.islink(os.path.join(folder, d))]
    return found


def _clone(src: str, dst: str) -> None:
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    st = os.lstat(src)
    if stat.S_ISLNK(st.st_mode):
        os.symlink(os.readlink(src), dst)
        return
    if not stat.S_ISREG(st.st_mode):
        return  # fifos, sockets, devices: not part of a copy
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        try:
            fcntl.ioctl(fout.fileno(), FICLONE, fin.fileno())
        except OSError:  # no reflinks here (another filesystem, ext4, tmpfs)
            shutil.copyfileobj(fin, fout, 1 << 20)
    os.chmod(dst, stat.S_IMODE(st.st_mode))
    os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))


def _apply(root: str, source: str, path: RelPath, override: Override) -> None:
    """Make `path` in the copy what `override` says (the manifest is applied in path order)."""
    target = os.path.join(root, path)
    _check_inside(root, path)
    _remove(target)
    if override is WHITEOUT:
        return
    os.makedirs(os.path.dirname(target), exist_ok=True)
    if isinstance(override, Symlink):
        os.symlink(os.fsdecode(override.target), target)
    elif isinstance(override, Dir):
        _make_dir(target, source, override)
    elif isinstance(override, File):
        _make_file(target, source, override)


def _check_inside(root: str, path: RelPath) -> None:
    above = os.path.realpath(os.path.join(root, parent(path)))
    if not is_within(above, root):
        raise RunError(f"{path!r}: the branch changes a file inside a linked environment "
                       f"({above}); a copy cannot hold it without a mount")  # fmt: skip


def _make_dir(target: str, source: str, override: Dir) -> None:
    if override.origin is None:
        os.mkdir(target, override.mode)  # a new or opaque folder: nothing shows through
        return
    # A renamed folder: the user's tree under its origin (files only, ignored ones too).
    shutil.copytree(os.path.join(source, override.origin), target, symlinks=True)


def _make_file(target: str, source: str, override: File) -> None:
    if override.blob is not None:
        with open(target, "wb") as f:
            f.write(override.blob.bytes())
    elif override.origin is not None:
        _clone(os.path.join(source, override.origin), target)
    else:
        open(target, "wb").close()
    os.chmod(target, override.mode)
    if override.mtime_ns:
        os.utime(target, ns=(override.mtime_ns, override.mtime_ns))


def _remove(target: str) -> None:
    if os.path.isdir(target) and not os.path.islink(target):
        shutil.rmtree(target)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(target)


# -- harvesting ---------------------------------------------------------------------------------


def snapshot(root: str) -> dict[RelPath, Signature]:
    """Every entry under `root` (links are not followed), with what a write would change."""
    found: dict[RelPath, Signature] = {}
    for folder, dirs, files in os.walk(root):
        here = rel(os.path.relpath(folder, root)) if folder != root else ROOT
        for name in [*dirs, *files]:
            full = os.path.join(folder, name)
            found[join(here, name)] = _signature(full, os.lstat(full))
    return found


def _signature(full: str, st: os.stat_result) -> Signature:
    if stat.S_ISLNK(st.st_mode):
        return ("link", 0, 0, 0, 0, 0, os.fsencode(os.readlink(full)))
    if stat.S_ISDIR(st.st_mode):
        return ("dir", 0, 0, 0, 0, stat.S_IMODE(st.st_mode), b"")  # children speak for it
    kind = "file" if stat.S_ISREG(st.st_mode) else "other"
    return (kind, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino,
            stat.S_IMODE(st.st_mode), b"")  # fmt: skip


def harvest(copy: Copy, source: str, manifest: Manifest, store) -> dict[RelPath, Override | None]:
    """What the run wrote, as a delta on `manifest` (None: back to the manifest's absence)."""
    after = snapshot(copy.root)
    written: dict[RelPath, Override | None] = {}
    for path in sorted(after):
        was = copy.before.get(path)
        if was != after[path] and after[path][0] != "other":
            kept = lower_source(manifest, path) if was and was[0] == "dir" else None
            written[path] = _override(os.path.join(copy.root, path), after[path], store, kept)
    for path in _removed(copy.before, after):
        if not _under_file(written, path):
            written[path] = WHITEOUT if _user_has(source, manifest, path) else None
    return written


def _override(full: str, signature: Signature, store, origin: RelPath | None) -> Override:
    """The override for an entry of the copy; `origin`: where an existing folder's children
    come from (a folder whose mode changed keeps showing them)."""
    kind, _, mtime, _, _, mode, link = signature
    if kind == "link":
        return Symlink(link)
    if kind == "dir":
        return Dir(origin=origin, mode=mode)
    with open(full, "rb") as f:
        return File(blob=store.make(f.read()), origin=None, mode=mode, mtime_ns=mtime)


def _removed(
    before: Mapping[RelPath, Signature], after: Mapping[RelPath, Signature]
) -> Iterable[RelPath]:
    gone = {p for p in before if p not in after}
    return sorted(p for p in gone if parent(p) not in gone)  # a removed folder covers its tree


def _under_file(written: Mapping[RelPath, Override | None], path: RelPath) -> bool:
    """Whether a folder above `path` became a file or link (its old tree needs no entries)."""
    while path:
        path = parent(path)
        if path in written and not isinstance(written[path], Dir):
            return True
    return False


def _user_has(source: str, manifest: Manifest, path: RelPath) -> bool:
    """Whether, without an override at `path`, the view would show something of the user's."""
    entries = {p: o for p, o in manifest.items() if p != path}
    below = lower_source(entries, path)
    return below is not None and os.path.lexists(os.path.join(source, below))
