"""Unpacking sdists (`setup-fuse`'s pyfuse3, `evals.pypi`, notebook 04) on every Python the
package allows: 3.11.4 and later filter the members ('data'), Debian 12's own 3.11.2 lacks the
filter, and `paths.extract_tar` checks the same by hand there. Both run for real: this
environment's Python in-process, the system's python3.11 (when older) in a child."""

from __future__ import annotations

import io
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from shadowkernel.errors import PathError
from shadowkernel.paths import extract_tar

REPO = Path(__file__).resolve().parent.parent
SYSTEM_PYTHON = shutil.which("python3.11", path="/usr/bin")


def archive(path: Path, evil: str | None = None) -> Path:
    """An sdist-like tar.gz; `evil`: one more member that would land outside ('dotdot',
    'absolute', 'symlink' out, 'hardlink' out)."""
    with tarfile.open(path, "w:gz") as tar:
        add(tar, "proj-1.0/pkg/mod.py", b"X = 1\n")
        link = tarfile.TarInfo("proj-1.0/pkg/here")
        link.type, link.linkname = tarfile.SYMTYPE, "mod.py"
        tar.addfile(link)
        if evil == "dotdot":
            add(tar, "proj-1.0/../../escaped.txt", b"out\n")
        elif evil == "absolute":
            add(tar, "/tmp/escaped-by-absolute.txt", b"out\n")
        elif evil in ("symlink", "hardlink"):
            out = tarfile.TarInfo("proj-1.0/out")
            out.type = tarfile.SYMTYPE if evil == "symlink" else tarfile.LNKTYPE
            out.linkname = "/etc/passwd" if evil == "symlink" else "../../etc/passwd"
            tar.addfile(out)
    return path


def add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


EVIL = ["dotdot", "absolute", "symlink", "hardlink"]
# The 'data' filter unpacks an absolute name below the folder (its leading / stripped); the
# others it refuses, as the checks by hand refuse all four.
STRIPPED = Path("/tmp/escaped-by-absolute.txt")


def test_a_clean_archive_unpacks_and_an_escaping_member_is_refused(tmp_path: Path) -> None:
    with tarfile.open(archive(tmp_path / "ok.tar.gz")) as tar:
        extract_tar(tar, tmp_path / "ok")
    assert (tmp_path / "ok/proj-1.0/pkg/here").read_text() == "X = 1\n"
    for evil in EVIL:
        with tarfile.open(archive(tmp_path / f"{evil}.tar.gz", evil)) as tar:
            if evil == "absolute":
                extract_tar(tar, tmp_path / evil)
                assert (tmp_path / evil / STRIPPED.relative_to("/")).exists()
                continue
            with pytest.raises(PathError, match="archive member"):
                extract_tar(tar, tmp_path / evil)
    assert not (tmp_path.parent / "escaped.txt").exists() and not STRIPPED.exists()


CHILD = """
import sys, tarfile
from shadowkernel.errors import PathError
from shadowkernel.paths import extract_tar
assert not hasattr(tarfile, "data_filter"), sys.version
source, into = sys.argv[1:3]
with tarfile.open(source) as tar:
    try:
        extract_tar(tar, into)
    except PathError as error:
        print("refused:", error)
    else:
        print("extracted")
"""


@pytest.mark.skipif(
    SYSTEM_PYTHON is None
    or subprocess.run(
        [SYSTEM_PYTHON, "-c", "import tarfile; tarfile.data_filter"], capture_output=True
    ).returncode
    == 0,  # fmt: skip
    reason="no system python3.11 older than 3.11.4 (without tarfile's filters) here",
)
def test_a_python_without_tar_filters_checks_the_members_itself(tmp_path: Path) -> None:
    assert SYSTEM_PYTHON is not None

    def unpack(source: Path, into: Path) -> str:
        done = subprocess.run([SYSTEM_PYTHON, "-c", CHILD, str(source), str(into)],
                              capture_output=True, text=True, timeout=60,
                              env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    assert unpack(archive(tmp_path / "ok.tar.gz"), tmp_path / "ok") == "extracted"
    assert (tmp_path / "ok/proj-1.0/pkg/mod.py").read_text() == "X = 1\n"
    for evil in EVIL:
        said = unpack(archive(tmp_path / f"{evil}.tar.gz", evil), tmp_path / evil)
        assert said.startswith("refused: archive member"), (evil, said)
        assert not (tmp_path / evil).exists()  # checked before anything is written
    assert not STRIPPED.exists()
