"""The fast path: pyfuse3 rebuilt with the no-open patch, in the running environment.

`pip install shadowkernel` brings stock pyfuse3, with which the kernel sends an open and a
release call for every file it reads (see fuse.py); the patch shipped beside this module
(`pyfuse3-no-open.patch`) lets the overlay turn those off. `build()` does what .ci/setup
does for the project's own environment: download pyfuse3's sdist, patch it, and install it
over the stock build. It needs a C toolchain and the FUSE headers; `missing()` names the
Debian packages that provide what is absent, so the error says what to install.

The build is a wheel kept in the user's cache (`wheel_cache`, keyed by the interpreter and
the patch), so the next environment on the machine installs it in seconds instead of
compiling again. The download and the install go through pip when the environment has it,
else through uv (environments made by `uv venv` have no pip). `warn_slow` is what `Shadow`
(so `Workspace` and `shadowkernel mount`) says, once per process, when its overlay runs on
stock pyfuse3.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from .. import userdirs
from ..errors import OverlayError
from ..paths import extract_tar

log = logging.getLogger(__name__)

FAST, STOCK = "fast", "stock pyfuse3"  # the paths a mount serves the kernel on
PYFUSE3_VERSION = "3.5.0"
PATCH = "pyfuse3-no-open.patch"
HOW_TO_LEAVE = "run `shadowkernel setup-fuse` once to build the fast one into this environment"


def is_patched() -> bool:
    """Whether the pyfuse3 this process imports is the patched build."""
    try:
        import pyfuse3
    except ImportError:
        return False
    return hasattr(pyfuse3, "NO_OPEN_SUPPORT")


_warned: list[bool] = []  # one warning per process


def warn_slow(logger: logging.Logger = log) -> bool:
    """Say once per process that the mount runs on the slow path, and how to leave it."""
    if _warned:
        return False
    _warned.append(True)
    logger.warning("the shadow runs on stock pyfuse3, the slow path (an open and a release call "
                   "per file read; git status about 10x slower); %s", HOW_TO_LEAVE)  # fmt: skip
    return True


def missing(python: str = sys.executable) -> list[str]:
    """Debian packages whose files the build needs and does not find."""
    checks: list[tuple[str, Callable[[], bool]]] = [
        ("gcc", lambda: shutil.which("gcc") is not None),
        ("pkg-config", lambda: shutil.which("pkg-config") is not None),
        ("patch", lambda: shutil.which("patch") is not None),
        ("python3-dev", lambda: _has_python_headers(python)),
        ("libfuse3-dev", _has_fuse3_headers),
    ]
    return [package for package, present in checks if not present()]


def _has_python_headers(python: str) -> bool:
    if python == sys.executable:
        include = sysconfig.get_paths()["include"]
    else:
        code = "import sysconfig; print(sysconfig.get_paths()['include'])"
        include = subprocess.run([python, "-c", code], capture_output=True, text=True).stdout
    return os.path.exists(os.path.join(include.strip(), "Python.h"))


def _has_fuse3_headers() -> bool:
    if shutil.which("pkg-config") is None:
        return os.path.exists("/usr/include/fuse3/fuse_lowlevel.h")
    return subprocess.run(["pkg-config", "--exists", "fuse3"]).returncode == 0


def build(
    python: str = sys.executable, say: Callable[[str], None] = print, rebuild: bool = False
) -> None:
    """Install the patched pyfuse3 into `python`'s environment: the wheel built earlier on this
    machine, else one built now (about a minute); `rebuild` builds anew either way."""
    _install(python, wheel(python, say, rebuild))
    check = "import pyfuse3, sys; sys.exit(not hasattr(pyfuse3, 'NO_OPEN_SUPPORT'))"
    if subprocess.run([python, "-c", check]).returncode != 0:
        raise OverlayError(f"pyfuse3 was built, but {python} still imports another one")
    say("done: the shadow now runs on the fast path")


def wheel(
    python: str = sys.executable, say: Callable[[str], None] = print, rebuild: bool = False
) -> Path:
    """The patched wheel for `python`, built now unless an earlier build is cached. It needs
    nothing installed in `python`'s environment, so .ci/setup builds it beside the install."""
    cached = None if rebuild else cached_wheel(python)
    if cached is None:
        return _build_wheel(python, say)
    say(f"using the patched build made earlier ({cached})")
    return cached


def wheel_cache(python: str = sys.executable) -> Path:
    """Where the patched wheel for `python` is kept: per interpreter and platform, per patch."""
    code = "import sys, sysconfig; print(sys.implementation.cache_tag, sysconfig.get_platform())"
    interpreter = subprocess.run([python, "-c", code], capture_output=True, text=True,
                                 check=True).stdout.split()  # fmt: skip
    patch = hashlib.sha256(resources.files(__package__).joinpath(PATCH).read_bytes())
    return (userdirs.cache_home() / "pyfuse3" / "-".join(interpreter)
            / f"{PYFUSE3_VERSION}-{patch.hexdigest()[:12]}")  # fmt: skip


def cached_wheel(python: str = sys.executable) -> Path | None:
    return next(iter(sorted(wheel_cache(python).glob("pyfuse3-*.whl"))), None)


def _build_wheel(python: str, say: Callable[[str], None]) -> Path:
    absent = missing(python)
    if absent:
        raise OverlayError(
            f"building the fast pyfuse3 needs {', '.join(absent)}; install them "
            f"(Debian/Ubuntu: sudo apt-get install {' '.join(absent)}) and run setup-fuse again"
        )
    cache = wheel_cache(python)
    with tempfile.TemporaryDirectory(prefix="shadowkernel-pyfuse3-") as work:
        say(f"downloading pyfuse3 {PYFUSE3_VERSION} (source)")
        source = _download(python, Path(work))
        say("patching it: open and release calls can be turned off")
        _patch(source)
        say("building it (about a minute)")
        built = Path(work) / "wheel"
        _wheel(python, source, built)
        (wheel,) = built.glob("pyfuse3-*.whl")
        cache.mkdir(parents=True, exist_ok=True)
        for old in cache.glob("pyfuse3-*.whl"):
            old.unlink()
        return Path(shutil.move(wheel, cache / wheel.name))


def _download(python: str, work: Path) -> Path:
    # Only pyfuse3 from source: ":all:" would also build its build requirements (Cython)
    # from source to prepare the sdist's metadata, minutes of compiling on a fresh machine.
    args = ["download", "--no-deps", "--no-binary", "pyfuse3", "-d", str(work),
            f"pyfuse3=={PYFUSE3_VERSION}"]  # fmt: skip
    _run([*_pip(python), *args], "downloading pyfuse3's sdist")
    (archive,) = work.glob("pyfuse3-*.tar.gz")
    with tarfile.open(archive) as tar:
        extract_tar(tar, work)
    return work / f"pyfuse3-{PYFUSE3_VERSION}"


def _patch(source: Path) -> None:
    patch = resources.files(__package__).joinpath(PATCH).read_bytes()
    done = subprocess.run(["patch", "-s", "-p1", "-d", str(source)], input=patch,
                          capture_output=True)  # fmt: skip
    if done.returncode != 0:
        raise OverlayError(f"the no-open patch did not apply: {done.stdout.decode()[-500:]}")
    (source / "src/pyfuse3/__init__.c").unlink()  # Cython regenerates it from the patched source


def _wheel(python: str, source: Path, into: Path) -> None:
    env = {**os.environ, "SETUPTOOLS_SCM_PRETEND_VERSION": f"{PYFUSE3_VERSION}+noopen"}
    if _has_pip(python):
        command = [python, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(into), str(source)]
    else:
        command = [_uv(python), "build", "-q", "--wheel", "--python", python, "-o", str(into),
                   str(source)]  # fmt: skip
    _run(command, "building pyfuse3", env)


def _install(python: str, wheel: Path) -> None:
    if _has_pip(python):
        command = [python, "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall"]
    else:
        command = [_uv(python), "pip", "install", "-q", "--no-deps", "--python", python,
                   "--reinstall"]  # fmt: skip
    _run([*command, str(wheel)], "installing the patched pyfuse3")


def _pip(python: str) -> list[str]:
    """pip for `python`'s environment: its own, else one uv runs from its cache."""
    return [python, "-m", "pip"] if _has_pip(python) else [_uv(python), "tool", "run", "pip"]


def _has_pip(python: str) -> bool:
    return subprocess.run([python, "-m", "pip", "--version"], capture_output=True).returncode == 0


def _uv(python: str) -> str:
    uv = shutil.which("uv")
    if uv is None:
        raise OverlayError(f"{python} has no pip and uv is not on PATH: install either and retry")
    return uv


def _run(command: list[str], what: str, env: dict[str, str] | None = None) -> None:
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout)[-2000:]
        raise OverlayError(f"{what} failed ({' '.join(command[:4])} ...):\n{tail}")
