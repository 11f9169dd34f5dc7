"""`shadowkernel mount` in the foreground, as a user runs it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from overlay_helpers import needs_fuse, snapshot

from shadowkernel.overlay import fastpath, mounts


def shadowkernel(*args: str) -> list[str]:
    return [sys.executable, "-m", "shadowkernel.cli", *args]


@needs_fuse
def test_mount_serves_until_ctrl_c_and_unmounts(project: Path, tmp_path: Path) -> None:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    before = snapshot(project)
    proc = subprocess.Popen(
        shadowkernel("mount", str(project), str(mnt)), stdout=subprocess.PIPE, text=True
    )
    try:
        assert "mounted at" in proc.stdout.readline()
        assert (mnt / "pkg/mod.py").read_text().startswith("def add")
        (mnt / "pkg/mod.py").write_text("edited in the shadow\n")
        assert (mnt / "pkg/mod.py").read_text() == "edited in the shadow\n"
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0 and "unmounted" in out
    assert str(mnt) not in mounts.shadow_mounts()
    assert snapshot(project) == before


def test_mount_of_a_missing_folder_is_one_clear_line(tmp_path: Path) -> None:
    result = subprocess.run(
        shadowkernel("mount", str(tmp_path / "nope"), str(tmp_path / "mnt")),
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert (
        result.stderr.strip()
        == f"shadowkernel mount: source {str(tmp_path / 'nope')!r} is not a directory"
    )


def test_setup_fuse_names_the_debian_packages_it_misses(tmp_path: Path) -> None:
    """Without gcc, pkg-config and patch on PATH, setup-fuse says which packages to install
    (the headers it also checks for are installed here)."""
    bare = tmp_path / "bin"  # a PATH with nothing on it
    bare.mkdir()
    result = subprocess.run(shadowkernel("setup-fuse", "--force"), capture_output=True, text=True,
                            env={**os.environ, "PATH": str(bare)})  # fmt: skip
    assert result.returncode == 2, result.stderr
    message = result.stderr.strip()
    assert message.startswith("shadowkernel setup-fuse: building the fast pyfuse3 needs gcc, ")
    assert "pkg-config" in message and "patch" in message
    assert "apt-get install gcc pkg-config patch" in message


def test_setup_fuse_leaves_a_patched_build_alone() -> None:
    from shadowkernel.overlay import fastpath

    result = subprocess.run(shadowkernel("setup-fuse"), capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    patched = "already the patched build" in result.stdout
    assert patched == fastpath.is_patched()


def mount_once(python: str, project: Path, mnt: Path, env: dict[str, str]) -> str:
    """Mount with `python`, read one file through the mount, Ctrl-C; what it said on stderr."""
    mnt.mkdir(exist_ok=True)
    command = [python, "-m", "shadowkernel.cli", "mount", str(project), str(mnt)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)  # fmt: skip
    try:
        assert "mounted at" in proc.stdout.readline()  # type: ignore[union-attr]
        assert (mnt / "pkg/mod.py").read_text().startswith("def add")
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    return err


@pytest.mark.slow
@pytest.mark.timeout(900)  # compiles pyfuse3 beside the other workers when none is cached
@needs_fuse
@pytest.mark.skipif(shutil.which("uv") is None, reason="needs uv for a throwaway environment")
def test_setup_fuse_moves_a_fresh_environment_to_the_fast_path(project: Path, tmp_path: Path):
    """As a pip user: stock pyfuse3, and `shadowkernel mount` says it runs on the slow path;
    `shadowkernel setup-fuse` installs the patched pyfuse3 in an environment without pip
    (uv's), and the next mount says nothing. The build is the one `.ci/setup` made and cached
    (the same command): built for real if the cache is empty, reused otherwise."""
    import shadowkernel

    venv = tmp_path / "venv"
    subprocess.run(["uv", "venv", "-q", str(venv), "-p", sys.executable], check=True)
    python = str(venv / "bin/python")
    install = ["uv", "pip", "install", "-q", "--python", python, "pyfuse3==3.5.0", "inotify_simple"]
    # Stock pyfuse3 is an sdist only: the build `.ci/setup` made is in uv's cache, but some
    # registries answer uv's revalidation as modified, which compiles it again (a minute).
    if subprocess.run([*install, "--offline"], capture_output=True).returncode != 0:
        subprocess.run(install, check=True)
    env = {**os.environ, "PYTHONPATH": str(Path(shadowkernel.__file__).parent.parent)}
    assert "slow path" in mount_once(python, project, tmp_path / "mnt", env)
    cached = fastpath.cached_wheel(python)
    done = subprocess.run([python, "-m", "shadowkernel.cli", "setup-fuse"], env=env,
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "done: the shadow now runs on the fast path" in done.stdout
    assert ("made earlier" in done.stdout) == (cached is not None), done.stdout
    assert fastpath.cached_wheel(python) is not None  # kept for the next environment
    assert "slow path" not in mount_once(python, project, tmp_path / "mnt", env)
