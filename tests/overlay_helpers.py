"""Shared pieces of the overlay tests: a sample project, folder snapshots, reference mounts."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from shadowkernel.overlay.store import Blob, File
from shadowkernel.workspace.staging import Version

FUSE_REASON = "needs /dev/fuse and fusermount3 (apt-get install fuse3)"
HAS_FUSE = os.path.exists("/dev/fuse") and shutil.which("fusermount3") is not None
# In the fallback child (test_fallback_child.py) the workspace tests run without FUSE on purpose.
FALLBACK_CHILD = os.environ.get("SHADOWKERNEL_FALLBACK_CHILD")
needs_fuse = pytest.mark.skipif(not HAS_FUSE and not FALLBACK_CHILD, reason=FUSE_REASON)
OFFLINE_NEEDS_NAMESPACES = "offline runs need the sandbox: refused where bwrap cannot run"
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="kernel overlayfs mounts need root")


def make_project(root: Path) -> Path:
    """A small project with the shapes real workspaces have."""
    files = {
        "README.md": "# demo\n",
        "pkg/__init__.py": "",
        "pkg/mod.py": "def add(a, b):\n    return a + b\n",
        "pkg/sub/deep.py": "X = 1\n" * 50,
        "pkg/sub/data.bin": bytes(range(256)) * 64,
        "docs/guide.txt": "guide\n",
        "empty_dir/.keep": "",
    }
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    (root / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (root / "run.sh").chmod(0o755)
    (root / "link_to_mod").symlink_to("pkg/mod.py")
    (root / "abs_link").symlink_to(root / "README.md")
    (root / "outside_link").symlink_to("/etc/hostname")
    return root


def snapshot(root: Path, with_times: bool = True) -> dict[str, tuple]:
    """Everything that must not change in the user's folder: names, types, modes, bytes, mtimes."""
    state: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(os.fsencode(root)):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, os.fsencode(root))
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                body: object = os.readlink(full)
            elif stat.S_ISREG(st.st_mode):
                body = hashlib.sha256(Path(os.fsdecode(full)).read_bytes()).hexdigest()
            else:
                body = None
            state[os.fsdecode(rel)] = (st.st_mode, body) + ((st.st_mtime_ns,) if with_times else ())
    return state


def version_blobs(version: Version) -> list[Blob]:
    """The blobs a branch version's manifest holds its files' bytes in."""
    return [o.blob for o in version.manifest.values() if isinstance(o, File) and o.blob]


@contextlib.contextmanager
def kernel_overlay(source: Path) -> Iterator[Path]:
    """A kernel overlayfs mount of `source` with its upper layer on tmpfs: the reference."""
    base = Path(tempfile.mkdtemp(prefix="sk-ovl-"))
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(base)], check=True)
    try:
        for sub in ("upper", "work", "mnt"):
            (base / sub).mkdir()
        # redirect_dir=on: renaming a lower directory is recorded, as in the shadow (no EXDEV).
        options = f"lowerdir={source},upperdir={base}/upper,workdir={base}/work,redirect_dir=on"
        subprocess.run(
            ["mount", "-t", "overlay", "overlay", "-o", options, str(base / "mnt")], check=True
        )
        try:
            yield base / "mnt"
        finally:
            subprocess.run(["umount", "-l", str(base / "mnt")], check=False)
    finally:
        subprocess.run(["umount", "-l", str(base)], check=False)
        shutil.rmtree(base, ignore_errors=True)
