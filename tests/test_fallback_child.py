"""The workspace, run and kernel tests again, in fallback mode for real: in a child where
/dev/fuse does not exist and no mount can be made.

The child is `bwrap` (bubblewrap) with a fresh minimal /dev (no fuse), run as a normal user
without capabilities (`setpriv` to the `skfallback` user, made with useradd when missing);
"locked" also passes `--disable-userns`, so `unshare` is refused inside (a plain Docker
container's default seccomp profile does the same), "userns" leaves user namespaces allowed
(a host without the fuse module). Each child runs the selected test files with
SHADOWKERNEL_FALLBACK_CHILD set: there `needs_fuse` does not skip them (the workspace falls
back to documents mode by itself, nothing forces it), and tests marked
`@pytest.mark.fallback(reason)` (the fallback behaves differently on purpose) are skipped;
`fallback(reason, unless="namespaces")` only in a child where `unshare` is refused.

A third child, "nocap", is the Docker-as-root case: root without CAP_SYS_ADMIN, /dev/fuse
present. The probes allow a mount, mounting fails, and mode="auto" falls back on that.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from overlay_helpers import FUSE_REASON

from shadowkernel.paths import is_within

ROOT = Path(__file__).resolve().parent.parent
USER = "skfallback"
FILES = [
    "tests/test_workspace.py",
    "tests/test_workspace_run.py",
    "tests/test_workspace_keep_merge.py",
    "tests/test_workspace_pyright.py",
    "tests/test_kernel.py",
    "tests/test_fallback.py",
]

pytestmark = [
    pytest.mark.slow,  # two children, each running ~50 tests with real servers and kernels
    pytest.mark.timeout(1500),
    pytest.mark.skipif(
        shutil.which("bwrap") is None, reason="needs bwrap (apt-get install bubblewrap)"
    ),  # fmt: skip
]


def child_user() -> tuple[int, int] | None:
    """(uid, gid) of the normal user the child runs as; None: we are one already."""
    if os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                        USER], check=True)  # fmt: skip
        entry = pwd.getpwnam(USER)
    return entry.pw_uid, entry.pw_gid


def child_argv(variant: str, tmp: Path, command: list[str]) -> list[str]:
    """`command` as a normal user without capabilities, in a private mount namespace: / as it
    is, /dev fresh (no fuse), /tmp private; "locked": inside a user namespace that may make
    no further ones. As root the outer bwrap also shows the interpreter under /root (0700)."""
    # No PID namespace: /proc stays the machine's (a fresh one would be masked by bwrap, and a
    # masked /proc makes `unshare --mount-proc` fail in the "userns" child).
    inner = ["bwrap", "--dev-bind", "/", "/", "--unshare-user", "--die-with-parent"]
    if variant == "locked":
        inner.append("--disable-userns")
    user = child_user()
    outer = ["bwrap", "--dev-bind", "/", "/", "--dev", "/dev",
             "--bind", str(tmp), "/tmp", "--die-with-parent"]  # fmt: skip
    if user is not None:  # root: the checkout shown where the child's user can read it
        outer = [*readable_checkout(tmp), *outer, "--ro-bind", str(tmp / VIEW), str(ROOT)]
    elif is_within(str(ROOT), "/tmp"):
        outer += ["--bind", str(ROOT), str(ROOT)]  # the child's /tmp would hide it
    if variant == "nocap":  # root, /dev/fuse there, but no CAP_SYS_ADMIN to mount anything
        return [*outer, "--dev-bind", "/dev/fuse", "/dev/fuse", "--", "setpriv",
                "--bounding-set=-sys_admin", "--inh-caps=-sys_admin", "--", *command]  # fmt: skip
    if user is None:
        return [*outer, *inner[4:], "--", *command]  # a normal user: one bwrap does it all
    hidden = Path(os.path.realpath(sys.executable)).parents
    pyenv = next((p for p in hidden if p.parent == Path("/root")), None)
    if pyenv is not None:  # the interpreter lives in root's home: show just it, read-only
        outer += ["--tmpfs", "/root", "--ro-bind", str(pyenv), str(pyenv)]
    drop = ["setpriv", f"--reuid={user[0]}", f"--regid={user[1]}", "--clear-groups",
            "--inh-caps=-all", "--bounding-set=-all", "--"]  # fmt: skip
    return [*outer, "--", *drop, *inner, "--", *command]


VIEW = "checkout"  # in the child's /tmp folder: where the readable view of the checkout goes


def readable_checkout(tmp: Path) -> list[str]:
    """A prefix mounting, in a private mount namespace the child inherits, a read-only
    overlayfs view of the checkout whose top folder others may enter: a checkout in a 0700
    folder (a `mktemp -d` clone) is otherwise out of the child's user's reach. Nothing is
    mounted on the machine, and the checkout is not changed."""
    top = tmp / "checkout-top"
    for folder in (top, tmp / VIEW):
        folder.mkdir(mode=0o755, exist_ok=True)
        folder.chmod(0o755)
    view = f"lowerdir={top}:{ROOT}"
    script = 'mount -t overlay -o "$1" shadowkernel-checkout "$2" && shift 2 && exec "$@"'
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "sh",
            view, str(tmp / VIEW)]  # fmt: skip


@pytest.fixture
def child_tmp() -> Iterator[Path]:
    tmp = Path(tempfile.mkdtemp(prefix="shadowkernel-fallback-child-"))
    try:
        prepare(tmp)
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def prepare(tmp: Path) -> None:
    """The child's /tmp: its home with the kernel spec, all owned by the child's user."""
    _copy_kernelspec(tmp / "home/.local/share/jupyter/kernels")
    user = child_user()
    if user is not None:
        for folder, _, files in os.walk(tmp):
            for path in [folder, *(os.path.join(folder, f) for f in files)]:
                os.chown(path, *user)


def _copy_kernelspec(kernels: Path) -> None:
    """The kernel spec where the child's user finds it (the venv's copy may be root-only)."""
    from jupyter_client.kernelspec import KernelSpecManager

    found = KernelSpecManager().find_kernel_specs().get("shadowkernel")
    kernels.mkdir(parents=True)
    if found:
        shutil.copytree(found, kernels / "shadowkernel")


def run_child(
    variant: str, tmp: Path, files: list[str], *extra: str
) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": "/tmp/home",
        "PYTHONPATH": str(ROOT),
        "PYTHONDONTWRITEBYTECODE": "1",
        "SHADOWKERNEL_FALLBACK_CHILD": variant,
    }
    pytest_argv = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                   "-o", "addopts=", *files, *extra]  # fmt: skip
    return subprocess.run(child_argv(variant, tmp, pytest_argv), cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=1400)  # fmt: skip


def test_the_child_really_has_no_fuse_and_no_mount_rights(child_tmp: Path) -> None:
    probe = ("import os, subprocess; print(os.path.exists('/dev/fuse'), os.geteuid() != 0, "
             "subprocess.run(['unshare', '--user', '--map-root-user', '--mount', 'true']).returncode)")  # fmt: skip
    done = subprocess.run(child_argv("locked", child_tmp, [sys.executable, "-c", probe]),
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.stdout.split() == ["False", "True", "1"], done.stderr


@pytest.mark.parametrize("variant", ["locked", "userns", "nocap"])
def test_workspace_run_and_kernel_tests_pass_in_fallback_mode(
    variant: str, child_tmp: Path
) -> None:
    if variant == "nocap" and os.geteuid() != 0:
        pytest.skip("the nocap child is root without CAP_SYS_ADMIN: needs root to make")
    done = run_child(variant, child_tmp, FILES, "-rs")
    tail = (done.stdout + done.stderr)[-6000:]
    assert done.returncode == 0, tail
    assert " passed" in done.stdout and " failed" not in done.stdout, tail
    assert FUSE_REASON not in done.stdout, tail  # they ran without FUSE, not skipped for it
    skipped = [line for line in done.stdout.splitlines() if line.startswith("SKIPPED")]
    assert len(skipped) <= 4 and all("fallback differs" in s or "sandbox" in s
                                     for s in skipped), tail  # fmt: skip
