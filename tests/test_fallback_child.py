"""The workspace, run and kernel tests again, in fallback mode for real: in a child where
/dev/fuse does not exist and no mount can be made.

The child is `bwrap` (bubblewrap) with a fresh minimal /dev (no fuse), run as a normal user
without capabilities (`setpriv` to the `skfallback` user, made with useradd when missing);
"locked" also passes `--disable-userns`, so `unshare` is refused inside (a plain Docker
container's default seccomp profile does the same), "userns" leaves user namespaces allowed
(a host without the fuse module). Each child runs its share of the test files (`FILES_OF`) with
SHADOWKERNEL_FALLBACK_CHILD set: there `needs_fuse` does not skip them (the workspace falls
back to documents mode by itself, nothing forces it), and tests marked
`@pytest.mark.fallback(reason)` (the fallback behaves differently on purpose) are skipped;
`fallback(reason, unless="namespaces")` only in a child where `unshare` is refused.

A third child, "nocap", is the Docker-as-root case: root without CAP_SYS_ADMIN, /dev/fuse
present. The probes allow a mount, mounting fails, and mode="auto" falls back on that.

In the "locked" child bwrap cannot start, so runs are confined by Landlock: the escape battery
of tests/test_sandbox.py runs there too (writes outside absorbed or refused, the host's
loopback and abstract sockets and processes out of reach), and a real library's suite (six
from PyPI) passes inside a run as it does natively in the same child.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from overlay_helpers import FUSE_REASON, snapshot
from run_helpers import CHECKOUT, VIEW, add_user, readable_checkout

from shadowkernel.paths import is_within
from shadowkernel.run.runner import SETUP_RACE

USER = "skfallback"
FILES = [
    "tests/test_workspace.py",
    "tests/test_workspace_run.py",
    "tests/test_workspace_keep_merge.py",
    "tests/test_workspace_pyright.py",
    "tests/test_kernel.py",
    "tests/test_fallback.py",
]
# What each child runs. All of it where runs are confined by Landlock ("locked"); where only
# the runs' confinement differs from it (bwrap in a user namespace: "userns"), the run tests;
# where only the way to documents mode differs (a mount that fails: "nocap"), the fallback's.
FILES_OF = {
    "locked": FILES,
    "userns": ["tests/test_workspace_run.py", "tests/test_fallback.py"],
    "nocap": ["tests/test_fallback.py"],
}
# pyright over documents mode is the same wherever the way into that mode or the runs'
# confinement differs: the locked child shows it; the others would spend ~10 s of CPU on it.
PYRIGHT_IN_DOCUMENTS = (
    "tests/test_fallback.py::test_lints_and_navigation_come_from_the_staged_documents"
)
DESELECTED_OF = {"locked": [], "userns": [PYRIGHT_IN_DOCUMENTS], "nocap": [PYRIGHT_IN_DOCUMENTS]}

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
    add_user(USER, "--system", "--no-create-home", "--shell", "/usr/sbin/nologin")
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
        outer = [*readable_checkout(tmp), *outer, "--ro-bind", str(tmp / VIEW), str(CHECKOUT)]
        if is_within(str(CHECKOUT), "/tmp"):  # its mount point lies in the child's /tmp (= tmp):
            enterable(tmp, CHECKOUT.relative_to("/tmp"))  # bwrap would make the folders 0700
    elif is_within(str(CHECKOUT), "/tmp"):
        outer += ["--bind", str(CHECKOUT), str(CHECKOUT)]  # the child's /tmp would hide it
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


def enterable(top: Path, relative: Path) -> None:
    """`top / relative` and the folders between, made where others may enter them."""
    folder = top
    for part in relative.parts:
        folder = folder / part
        folder.mkdir(exist_ok=True)
        folder.chmod(0o755)


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
    give_to_child(tmp)


def give_to_child(tmp: Path) -> None:
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


def child_env(variant: str) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": "/tmp/home",
        "PYTHONPATH": str(CHECKOUT),
        "PYTHONDONTWRITEBYTECODE": "1",
        "SHADOWKERNEL_FALLBACK_CHILD": variant,
    }


def run_child(
    variant: str, tmp: Path, files: list[str], *extra: str
) -> subprocess.CompletedProcess[str]:
    pytest_argv = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                   "-o", "addopts=", *files, *extra]  # fmt: skip
    return started(child_argv(variant, tmp, pytest_argv), cwd=CHECKOUT, env=child_env(variant),
                   timeout=1400)  # fmt: skip


def started(argv: list[str], **options: Any) -> subprocess.CompletedProcess[str]:
    """`argv` run to its end, again while its bwrap lost the race the runner retries too
    (`runner.SETUP_RACE`: `--dev-bind / /` remounts every mount it copied, and the other
    workers' run views come and go meanwhile); such a try fails before the command starts."""
    for _ in range(20):
        done = subprocess.run(argv, capture_output=True, text=True, **options)
        if not (done.returncode == 1 and not done.stdout and SETUP_RACE.search(done.stderr)):
            break
    return done


def test_the_child_really_has_no_fuse_and_no_mount_rights(child_tmp: Path) -> None:
    probe = ("import os, subprocess; print(os.path.exists('/dev/fuse'), os.geteuid() != 0, "
             "subprocess.run(['unshare', '--user', '--map-root-user', '--mount', 'true']).returncode)")  # fmt: skip
    done = started(child_argv("locked", child_tmp, [sys.executable, "-c", probe]), timeout=60)
    assert done.stdout.split() == ["False", "True", "1"], done.stderr


def check_the_suite_passes_in(variant: str, child_tmp: Path) -> None:
    if variant == "nocap" and os.geteuid() != 0:
        pytest.skip("the nocap child is root without CAP_SYS_ADMIN: needs root to make")
    deselected = [f"--deselect={test}" for test in DESELECTED_OF[variant]]
    done = run_child(variant, child_tmp, FILES_OF[variant], "-rs", *deselected)
    tail = (done.stdout + done.stderr)[-6000:]
    assert done.returncode == 0, tail
    assert " passed" in done.stdout and " failed" not in done.stdout, tail
    assert FUSE_REASON not in done.stdout, tail  # they ran without FUSE, not skipped for it
    skipped = [line for line in done.stdout.splitlines() if line.startswith("SKIPPED")]
    assert len(skipped) <= 4 and all("fallback differs" in s or "sandbox" in s
                                     for s in skipped), tail  # fmt: skip


# Each child takes minutes: a class each, so xdist (--dist loadscope) gives each a worker.
class TestLockedChild:
    def test_workspace_run_and_kernel_tests_pass(self, child_tmp: Path) -> None:
        check_the_suite_passes_in("locked", child_tmp)


class TestUsernsChild:
    def test_workspace_run_and_kernel_tests_pass(self, child_tmp: Path) -> None:
        check_the_suite_passes_in("userns", child_tmp)


class TestNocapChild:
    def test_workspace_run_and_kernel_tests_pass(self, child_tmp: Path) -> None:
        check_the_suite_passes_in("nocap", child_tmp)


# -- the escape battery against Landlock, in the locked child ---------------------------------

# Runs in the child: the battery's probe and a real library's suite through run_in_shadow on a
# DetachedShadow (documents mode: a private copy), offline; the suite natively too.
DRIVE = r"""
import json, os, re, socket, subprocess, sys
from shadowkernel.overlay.detached import DetachedShadow
from shadowkernel.run import run_in_shadow

project, library, native, probe, given = sys.argv[1:6]
args = json.loads(given)
sleeper = subprocess.Popen(["sleep", "600"])  # the child's own process: same uid as the run
listener = socket.socket(socket.AF_UNIX)
listener.bind(b"\0" + args["abstract"].encode())
listener.listen(8)
args["sleeper"] = sleeper.pid
suite = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_six.py"]

def summary(text):
    return re.sub(r" in [0-9.]+s.*", "", text.strip().splitlines()[-1])

with DetachedShadow(project) as shadow:
    ran = run_in_shadow(shadow, {}, [sys.executable, "-c", probe, json.dumps(args)])
    made = run_in_shadow(shadow, {}, "echo made > made.txt; echo x >> pkg/mod.py")
with DetachedShadow(library) as shadow:
    inside = run_in_shadow(shadow, {}, suite, timeout=900)
natively = subprocess.run(suite, cwd=native, capture_output=True, text=True)
sleeper.kill()
print(json.dumps({"exit": ran.exit_code, "stdout": ran.stdout, "stderr": ran.stderr,
                  "notes": ran.notes, "made": sorted(made.written),
                  "suite": [summary(inside.stdout), inside.exit_code],
                  "native": [summary(natively.stdout), natively.returncode]}))
"""


def test_the_escape_battery_finds_landlock_holding_in_the_locked_child(child_tmp: Path) -> None:
    from overlay_helpers import make_project
    from test_sandbox import PROBE, SIX, SYSCALLS

    from shadowkernel.evals.pypi import unpack

    project = make_project(child_tmp / "project")
    library = unpack("six", SIX, child_tmp / "library")
    native = unpack("six", SIX, child_tmp / "native")
    outside = child_tmp / "outside"
    outside.mkdir(mode=0o777)
    outside.chmod(0o777)  # the child's user may write here: only Landlock stops the run
    home = child_tmp / "home"
    (home / ".bashrc").write_text("# the child's home\n")
    give_to_child(child_tmp)
    before = (snapshot(project), snapshot(home), snapshot(library))
    paths = {"outside": "/tmp/outside", "project": "/tmp/project",
             "library": f"/tmp/library/{library.name}", "native": f"/tmp/native/{native.name}"}  # fmt: skip
    only = ["tmp_outside", "home_rc", "home_new", "etc", "signal_host", "host_loopback",
            "abstract_socket", "status"]  # fmt: skip
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.setblocking(False)
        args = {"outside": paths["outside"], "marker": ["sk-", "none"], "only": only,
                "port": server.getsockname()[1], "device": [0, 0], "devname": "none",
                "syscalls": SYSCALLS, "abstract": f"sk-child-{os.getpid()}"}  # fmt: skip
        argv = [sys.executable, "-c", DRIVE, paths["project"], paths["library"], paths["native"],
                PROBE, json.dumps(args)]  # fmt: skip
        done = subprocess.run(child_argv("locked", child_tmp, argv), cwd=CHECKOUT,
                              env=child_env("locked"), capture_output=True, text=True,
                              timeout=1200)  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        try:
            server.accept()[0].close()
            accepted = True
        except BlockingIOError:
            accepted = False
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["exit"] == 0, got["stderr"]
    report = json.loads(got["stdout"])
    assert {door: report[door].split(":")[0] for door in only if door != "status"} == {
        door: "refused" for door in only if door != "status"}, report  # fmt: skip
    assert not accepted and list(outside.iterdir()) == []
    assert (snapshot(project), snapshot(home), snapshot(library)) == before
    assert report["status"]["CapEff"] == 0
    assert any(n.startswith("confined by Landlock ABI") for n in got["notes"]), got["notes"]
    assert got["made"] == ["made.txt", "pkg/mod.py"]  # the project's writes: the branch's
    assert got["suite"] == got["native"] and " passed" in got["suite"][0], got
