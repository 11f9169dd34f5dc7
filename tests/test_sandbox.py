"""The escape battery: every door out of a run is closed, as root and as a normal user.

Each probe is harmless: it reads, opens without writing, or writes only into folders this test
made (a folder in /tmp outside the project, a home of the test's own for root, the normal
user's own home). Whether a door is closed is judged from outside where it can be (the host's
folders afterwards, a host server's accept queue, a host process still alive), and from the
probe's report inside otherwise.

As root and as a normal user (`skprobe`, made here with useradd if missing), runs go through
`run_in_shadow` in both views. The user's runs are served by a child process running as that
user (`setpriv`, the system's Python): the project's venv interpreter lives under /root (0700
here), so the child gets a world-readable copy of the package and the venv's site-packages
(world-readable here; the user's tests are skipped, saying why, where they are not). That
user has a real Shadow (FUSE mounted by the user), overlayfs views in their own user
namespace (user xattrs), copy-on-write layers on a bounded tmpfs there, and no writable
cgroup (prlimit bounds instead).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import pwd
import resource
import shutil
import site
import socket
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from overlay_helpers import make_project, needs_fuse, needs_root, snapshot
from run_helpers import add_user
from test_run import marked
from waiting import wait_for

import shadowkernel
from shadowkernel.run import capabilities, run_in_shadow, seccomp

pytestmark = [needs_root, needs_fuse,
              pytest.mark.skipif(capabilities.probe().namespaces is not None,
                                 reason=f"no sandbox: {capabilities.probe().namespaces}")]  # fmt: skip

USER = "skprobe"
PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
MiB = 2**20
SYSCALLS = seccomp.AARCH64 if platform.machine() == "aarch64" else seccomp.X86_64
# The system calls a run never needs (seccomp.py); each is open to a process outside.
SYSCALL_DOORS = ["keyctl", "add_key", "userfaultfd", "io_uring_setup", "bpf", "perf_event_open",
                 "unshare_user"]  # fmt: skip

# Runs inside: tries every door, prints {door: what happened} as JSON. Standard library only.
PROBE = r"""
import ctypes, json, os, socket, stat, subprocess, sys
args = json.loads(sys.argv[1])
marker = "".join(args["marker"])  # given in halves: this probe's own command line lacks it
report = {}

def attempt(door, action):
    if door not in args.get("only", [door]):
        return
    try:
        value = action()
        report[door] = "done" if value is None else value
    except Exception as error:
        report[door] = f"refused: {type(error).__name__}: {error}"

def write(path, text="probe\n", mode="a"):
    with open(path, mode) as f:
        f.write(text)

def status():
    fields = dict(line.split(":\t", 1) for line in open("/proc/self/status"))
    caps = {k: int(fields[k], 16) for k in ("CapEff", "CapPrm", "CapBnd", "CapAmb")}
    return {**caps, "uid_map": " ".join(open("/proc/self/uid_map").read().split())}

def seen_host_process():
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker in open(f"/proc/{pid}/cmdline").read():
                return f"seen as pid {pid}"
        except OSError:
            pass
    return "not seen"

def branch_bytes():  # what shadowkernel keeps of branches: spill folders, durable branches
    import glob
    state = os.path.join(os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state"),
                         "shadowkernel")
    found = [*glob.glob("/tmp/shadowkernel-spill*/**", recursive=True),
             *glob.glob("/var/tmp/shadowkernel-spill*/**", recursive=True),
             *glob.glob(state + "/**", recursive=True)]
    return sorted(p for p in found if os.path.isfile(p))

def block_devices():
    return sorted(n for n in os.listdir("/dev") if stat.S_ISBLK(os.lstat("/dev/" + n).st_mode))

def open_for_writing(path):  # and close at once: nothing is written even where it opens
    os.close(os.open(path, os.O_WRONLY))

def leave_cgroups():  # open every top cgroup.procs for writing: a way out of the run's limits
    import glob
    tops = glob.glob("/sys/fs/cgroup/cgroup.procs") + glob.glob("/sys/fs/cgroup/*/cgroup.procs")
    opened = []
    for path in tops:
        try:
            open_for_writing(path)
            opened.append(path)
        except OSError:
            pass
    if opened or not tops:
        return f"opened {opened} of {tops}"
    raise PermissionError(f"none of {len(tops)} opened")

def connect(port):
    socket.create_connection(("127.0.0.1", port), timeout=3).close()

def shell(command):
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise OSError(done.returncode, done.stderr.strip())

def syscall(name, *arguments):  # a system call by number; a descriptor it gives is closed
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    result = libc.syscall(ctypes.c_long(args["syscalls"][name]), *arguments)
    if result < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    if name in ("userfaultfd", "io_uring_setup", "perf_event_open"):
        os.close(result)

def abstract_socket(name):
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(b"\0" + name.encode())

perf = ctypes.create_string_buffer(128)  # perf_event_attr: a software clock of this process
perf[0:4], perf[4:8] = (1).to_bytes(4, "little"), (128).to_bytes(4, "little")

attempt("tmp_outside", lambda: write(os.path.join(args["outside"], "inside.txt")))
attempt("home_rc", lambda: write(os.path.expanduser("~/.bashrc"), "echo pwned\n"))
attempt("home_new", lambda: write(os.path.expanduser("~/new.txt"), mode="w"))
attempt("etc", lambda: write("/etc/" + marker, mode="w"))
dev = os.makedev(*args["device"])
attempt("mknod_project", lambda: os.mknod("blk", stat.S_IFBLK | 0o600, dev))
attempt("mknod_tmp", lambda: os.mknod("/tmp/blk", stat.S_IFBLK | 0o600, dev))
attempt("raw_device", lambda: open("/dev/" + args["devname"], "rb").read(512) and None)
attempt("block_devices", block_devices)
attempt("sysrq", lambda: open_for_writing("/proc/sysrq-trigger"))
attempt("proc_sys", lambda: open_for_writing("/proc/sys/kernel/hostname"))
attempt("sys", lambda: open_for_writing("/sys/kernel/uevent_helper"))
attempt("cgroups", leave_cgroups)
attempt("host_process", seen_host_process)
attempt("signal_host", lambda: os.kill(args["sleeper"], 0))
attempt("host_loopback", lambda: connect(args["port"]))
attempt("mount", lambda: shell(["mount", "-t", "tmpfs", "probe", "/tmp"]))
attempt("umount", lambda: shell(["umount", "-l", os.getcwd()]))
attempt("status", status)
attempt("abstract_socket", lambda: abstract_socket(args["abstract"]))
attempt("keyctl", lambda: syscall("keyctl", 0, -3, 1))  # the session keyring's id
attempt("add_key", lambda: syscall("add_key", b"user", b"sk-probe", b"x", 1, -2))
attempt("userfaultfd", lambda: syscall("userfaultfd", 0o2000000))
attempt("io_uring_setup", lambda: syscall("io_uring_setup", 1, ctypes.create_string_buffer(120)))
attempt("bpf", lambda: syscall("bpf", 0, ctypes.create_string_buffer(72), 72))
attempt("perf_event_open", lambda: syscall("perf_event_open", perf, 0, -1, -1, 0))
attempt("branch_bytes", branch_bytes)
attempt("unshare_user", lambda: syscall("unshare", 0x10000000))  # last: it moves the probe
print(json.dumps(report))
"""


@dataclass
class Ran:
    exit_code: int | None
    stdout: str
    stderr: str
    notes: tuple[str, ...] = ()
    written_outside: tuple[str, ...] = ()
    out_of_memory: bool = False
    written: dict = field(default_factory=dict)  # what the run wrote in the project
    mode: str = ""


# -- the two identities -------------------------------------------------------------------------


class AsRoot:
    """Runs through run_in_shadow, with a home of the test's own (layered copy-on-write)."""

    name = "root"

    def __init__(self, project: Path, home: Path, mode: str) -> None:
        from shadowkernel.overlay.shadow import Shadow

        self.project, self.home, self.mode = project, home, mode
        self.shadow = Shadow(project)
        self.state_home = Path(os.environ["XDG_STATE_HOME"]) / "shadowkernel"  # the run's too

    def run(self, argv: list[str], cancel: threading.Event | None = None,
            staged: dict[str, str] | None = None, **limits) -> Ran:  # fmt: skip
        from shadowkernel.overlay.store import File
        from shadowkernel.paths import RelPath

        store, env = self.shadow.store, {**os.environ, "HOME": str(self.home)}
        manifest = {RelPath(p): File(blob=store.make(text.encode()), mode=0o644, mtime_ns=10**18)
                    for p, text in (staged or {}).items()}  # fmt: skip
        r = run_in_shadow(self.shadow, manifest, argv, env=env, mode=self.mode, cancel=cancel,
                          **{"timeout": 60, **limits})  # fmt: skip
        written = {p: o.blob.bytes().decode() if getattr(o, "blob", None) else repr(o)
                   for p, o in r.written.items()}  # fmt: skip
        return Ran(r.exit_code, r.stdout, r.stderr, r.notes, r.written_outside, r.out_of_memory,
                   written, r.mode)  # fmt: skip

    def close(self) -> None:
        self.shadow.close()


# Serves runs as the normal user: a real Shadow of the project, run_in_shadow per request (each
# in a thread, so runs can overlap and be cancelled), one JSON line per request and answer.
SERVE_RUNS = r"""
import json, sys, threading
from shadowkernel.overlay.shadow import Shadow
from shadowkernel.overlay.store import File
from shadowkernel.paths import RelPath
from shadowkernel.run import run_in_shadow

project, mode = sys.argv[1], sys.argv[2]
lock, cancels = threading.Lock(), {}

def answer(**fields):
    with lock:
        print(json.dumps(fields), flush=True)

def shown(override):
    blob = getattr(override, "blob", None)
    return blob.bytes().decode() if blob is not None else repr(override)

def run(shadow, number, ask):
    staged = {RelPath(p): File(blob=shadow.store.make(text.encode()), mode=0o644, mtime_ns=10**18)
              for p, text in ask.pop("staged").items()}
    try:
        r = run_in_shadow(shadow, staged, ask.pop("argv"), mode=mode, cancel=cancels[number], **ask)
    except Exception as error:
        return answer(id=number, error=repr(error))
    answer(id=number, exit_code=r.exit_code, stdout=r.stdout, stderr=r.stderr, notes=r.notes,
           written_outside=r.written_outside, out_of_memory=r.out_of_memory, mode=r.mode,
           written={p: shown(o) for p, o in r.written.items()})

with Shadow(project) as shadow:
    print(json.dumps("ready"), flush=True)
    threads = []
    for line in sys.stdin:
        ask = json.loads(line)
        number = ask.pop("id")
        if ask.pop("op") == "cancel":
            cancels[number].set()
            continue
        cancels[number] = threading.Event()
        threads.append(threading.Thread(target=run, args=(shadow, number, ask)))
        threads[-1].start()
    for thread in threads:
        thread.join()
"""


class AsUser:
    """Runs as the normal user through `run_in_shadow` in a child process that runs as that
    user (`setpriv`) with the system's Python: a real Shadow (FUSE mounted by the user), the
    user's own Holder, overlayfs views with user xattrs, layers over home, /tmp and /var/tmp.
    The project's venv interpreter lives under /root (0700), so the child gets a
    world-readable copy of the package and the venv's site-packages on its path instead."""

    name = USER

    def __init__(self, project: Path, home: Path, mode: str, code: Path) -> None:
        self.project, self.home, self.mode = project, home, mode
        self.state_home = home / ".local/state/shadowkernel"  # no $XDG_STATE_HOME given
        entry = pwd.getpwnam(USER)
        line = [*as_user(entry), PYTHON, "-c", SERVE_RUNS, str(project), mode]
        env = {"HOME": str(home), "PATH": os.environ["PATH"], "USER": USER,
               "PYTHONPATH": user_path(code)}  # fmt: skip
        self.child = subprocess.Popen(line, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      text=True, env=env, cwd="/")  # fmt: skip
        assert json.loads(self.child.stdout.readline()) == "ready"  # type: ignore[union-attr]
        self.numbers, self.lock, self.answers = iter(range(10**9)), threading.Lock(), {}
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def run(self, argv: list[str], cancel: threading.Event | None = None,
            staged: dict[str, str] | None = None, **limits) -> Ran:  # fmt: skip
        number = next(self.numbers)
        done = self.answers[number] = [threading.Event(), None]
        self._send(id=number, op="run", argv=argv, staged=staged or {},
                   **{"timeout": 60, **limits})  # fmt: skip
        while not done[0].wait(0.05):
            if cancel is not None and cancel.is_set():
                self._send(id=number, op="cancel")
                cancel = None
        got = done[1]
        assert "error" not in got, got["error"]
        return Ran(got["exit_code"], got["stdout"], got["stderr"], tuple(got["notes"]),
                   tuple(got["written_outside"]), got["out_of_memory"], got["written"],
                   got["mode"])  # fmt: skip

    def _send(self, **request) -> None:
        with self.lock:
            self.child.stdin.write(json.dumps(request) + "\n")  # type: ignore[union-attr]
            self.child.stdin.flush()  # type: ignore[union-attr]

    def _read(self) -> None:
        for line in self.child.stdout:  # type: ignore[union-attr]
            got = json.loads(line)
            self.answers[got["id"]][1] = got
            self.answers[got["id"]][0].set()

    def close(self) -> None:
        self.child.stdin.close()  # type: ignore[union-attr]
        assert self.child.wait(60) == 0


def as_user(entry: pwd.struct_passwd) -> list[str]:
    return ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--clear-groups",
            "--"]  # fmt: skip


def user_path(code: Path) -> str:
    """PYTHONPATH for the user's child: a copy of the package, then views of the venv's
    libraries (see `user_code`)."""
    views = sorted(str(p) for p in code.parent.glob("site-view-*"))
    return os.pathsep.join([str(code), *views])


def view_libraries(base: Path) -> None:
    """Read-only overlayfs views of the venv's libraries whose top folder others may enter:
    the checkout may sit in a 0700 folder (a `mktemp -d` clone) the user cannot cross.
    Nothing is written there; `unview` unmounts them."""
    for number, packages in enumerate(site.getsitepackages()):
        top, view = base / f"site-top-{number}", base / f"site-view-{number}"
        top.mkdir(mode=0o755)
        view.mkdir(mode=0o755)
        subprocess.run(["mount", "-t", "overlay", "-o", f"lowerdir={top}:{packages}",
                        "shadowkernel-site", str(view)], check=True)  # fmt: skip


def unview(base: Path) -> None:
    for view in base.glob("site-view-*"):
        subprocess.run(["umount", str(view)], capture_output=True)


@pytest.fixture(scope="module")
def user_code(base: Path) -> Path:
    """A world-readable copy of the package (and views of its libraries), checked to import
    as the user with PYTHON."""
    ensure_user()
    view_libraries(base)
    code = base / "code"
    shutil.copytree(Path(shadowkernel.__file__).parent, code / "shadowkernel",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    probe = [*as_user(pwd.getpwnam(USER)), PYTHON, "-c", "import shadowkernel.run, pyfuse3"]
    done = subprocess.run(probe, env={"PYTHONPATH": user_path(code)}, capture_output=True,
                          text=True, cwd="/")  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"{PYTHON} cannot import the package as {USER}: {done.stderr[-300:]}")
    return code


def ensure_user() -> Path:
    add_user(USER, "--create-home", "--shell", "/bin/bash")
    home = Path(pwd.getpwnam(USER).pw_dir)
    if not (home / ".bashrc").exists():
        (home / ".bashrc").write_text("# probe home\n")
        shutil.chown(home / ".bashrc", USER, USER)
    return home


def tree_hash(root: Path) -> str:
    return hashlib.sha256(repr(sorted(snapshot(root).items())).encode()).hexdigest()


@pytest.fixture(scope="module")
def base() -> Iterator[Path]:
    """A 0755 folder in /tmp for everything a normal user must reach too."""
    folder = Path(tempfile.mkdtemp(prefix="sk-sandbox-"))
    folder.chmod(0o755)
    yield folder
    unview(folder)
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module", params=["root-overlayfs", "root-fuse", f"{USER}-overlayfs",
                                        f"{USER}-fuse"])  # fmt: skip
def who(request: pytest.FixtureRequest, base: Path) -> Iterator[AsRoot | AsUser]:
    place = base / request.param
    project = make_project(place / "project")
    if request.param.startswith(USER):
        home, code = ensure_user(), request.getfixturevalue("user_code")
        subprocess.run(["chown", "-R", f"{USER}:{USER}", str(place)], check=True)
        identity: AsRoot | AsUser = AsUser(project, home, request.param.split("-")[1], code)
    else:
        home = Path(tempfile.mkdtemp(prefix="sk-home-", dir="/var/lib"))
        (home / ".bashrc").write_text("# probe home\n")
        identity = AsRoot(project, home, request.param.split("-")[1])
    yield identity
    identity.close()
    if isinstance(identity, AsRoot):
        shutil.rmtree(identity.home)


@pytest.fixture(scope="module")
def battery(who: AsRoot | AsUser, base: Path) -> Iterator[dict]:
    """The probe run once per identity, with the host's state before and after."""
    outside = Path(tempfile.mkdtemp(prefix="sk-outside-", dir=base))
    outside.chmod(0o777)  # were /tmp shared, the user could write here
    marker = f"sk-host-{uuid.uuid4().hex[:12]}"
    sleeper = subprocess.Popen(["bash", "-c", f"exec -a {marker} sleep 600"])
    device = os.stat(who.project).st_dev
    with socket.socket() as server, abstract_listener() as abstract:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        server.setblocking(False)
        args = {"outside": str(outside), "marker": [marker[:8], marker[8:]], "sleeper": sleeper.pid,
                "port": server.getsockname()[1], "device": [os.major(device), os.minor(device)],
                "devname": block_device_name(device), "syscalls": SYSCALLS,
                "abstract": abstract}  # fmt: skip
        owns = who.home / ".local" if isinstance(who, AsUser) else None
        kept = keep_a_branch(who.state_home, marker, owns)
        before = (snapshot(who.project), tree_hash(who.home))
        ran = who.run([PYTHON, "-c", PROBE, json.dumps(args)])
        after = (snapshot(who.project), tree_hash(who.home))
        accepted = accept_nowait(server)
    alive = sleeper.poll() is None
    sleeper.kill()
    sleeper.wait()
    assert ran.exit_code == 0, ran.stderr
    yield {"report": json.loads(ran.stdout), "ran": ran, "before": before, "after": after,
           "outside": outside, "accepted": accepted, "sleeper_alive": alive, "marker": marker,
           "kept": kept}  # fmt: skip
    shutil.rmtree(kept.parent.parent)


def keep_a_branch(state_home: Path, marker: str, user_owns: Path | None = None) -> Path:
    """A durable branch's blob, as the store keeps it, in `state_home` (the one the run would
    read); `user_owns`: a folder given to the normal user, with all below it."""
    blob = state_home / f"project-{marker}" / "blobs" / marker
    blob.parent.mkdir(parents=True)
    blob.write_text(f"SECRET = {marker!r}\n")
    if user_owns is not None:
        subprocess.run(["chown", "-R", f"{USER}:{USER}", str(user_owns)], check=True)
    return blob


@contextlib.contextmanager
def abstract_listener() -> Iterator[str]:
    """A unix socket of the host's in the abstract namespace (no file: only the network
    namespace, or Landlock's scoping, keeps a run from it); yields its name."""
    name = f"sk-abstract-{uuid.uuid4().hex[:12]}"
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(b"\0" + name.encode())
        listener.listen(8)
        yield name


def block_device_name(device: int) -> str:
    try:
        uevent = Path(f"/sys/dev/block/{os.major(device)}:{os.minor(device)}/uevent").read_text()
    except OSError:
        return "vda"
    return dict(line.split("=", 1) for line in uevent.split())["DEVNAME"]


def accept_nowait(server: socket.socket) -> bool:
    try:
        server.accept()[0].close()
    except BlockingIOError:
        return False
    return True


def test_the_probe_finds_the_doors_open_outside_a_sandbox(base: Path) -> None:
    """The control: run natively (its harmless doors only), the same probe gets through."""
    outside = Path(tempfile.mkdtemp(prefix="sk-native-", dir=base))
    marker = f"sk-host-{uuid.uuid4().hex[:12]}"
    sleeper = subprocess.Popen(["bash", "-c", f"exec -a {marker} sleep 600"])
    device = os.stat(base).st_dev
    # Not raw_device: this machine's devices cgroup already refuses even root that open.
    only = ["tmp_outside", "block_devices", "cgroups", "host_process", "signal_host",
            "host_loopback", "status", "abstract_socket", "keyctl", "add_key", "userfaultfd",
            "io_uring_setup", "unshare_user", "branch_bytes"]  # fmt: skip
    kept = keep_a_branch(Path(os.environ["XDG_STATE_HOME"]) / "shadowkernel", marker)
    try:
        with socket.socket() as server, abstract_listener() as abstract:
            server.bind(("127.0.0.1", 0))
            server.listen(8)
            args = {"outside": str(outside), "marker": [marker[:8], marker[8:]], "only": only,
                    "sleeper": sleeper.pid, "port": server.getsockname()[1],
                    "device": [os.major(device), os.minor(device)],
                    "devname": block_device_name(device), "syscalls": SYSCALLS,
                    "abstract": abstract}  # fmt: skip
            native = subprocess.run([PYTHON, "-c", PROBE, json.dumps(args)], cwd=outside,
                                    capture_output=True, text=True, check=True)  # fmt: skip
    finally:
        sleeper.kill()
        sleeper.wait()
    report = json.loads(native.stdout)
    shutil.rmtree(kept.parent.parent)
    assert str(kept) in report["branch_bytes"], report["branch_bytes"]
    assert [door for door in only if str(report[door]).startswith("refused")] == [], report
    assert report["host_process"].startswith("seen") and report["block_devices"] != []
    assert report["status"]["CapEff"] != 0 and report["status"]["uid_map"] == "0 0 4294967295"
    assert (outside / "inside.txt").exists()


def refused(battery: dict, *doors: str) -> None:
    for door in doors:
        assert battery["report"][door].startswith("refused"), (door, battery["report"][door])


# -- the doors ----------------------------------------------------------------------------------


def test_the_users_folder_and_home_are_byte_for_byte_unchanged(battery: dict) -> None:
    assert battery["after"] == battery["before"]


def test_writes_to_tmp_outside_the_project_stay_in_the_run(battery: dict) -> None:
    assert list(battery["outside"].iterdir()) == []


def test_writes_to_home_land_in_a_throwaway_layer(battery: dict, who) -> None:
    ran = battery["ran"]  # a copy-on-write layer: the run wrote, and the result says so
    assert battery["report"]["home_rc"] == battery["report"]["home_new"] == "done"
    assert ran.written_outside == (f"{who.home}/.bashrc", f"{who.home}/new.txt")


def test_no_branch_bytes_are_read_past_the_project(battery: dict) -> None:
    """What shadowkernel keeps of every branch outside the project, the spill folders (blobs
    past the memory budget) and the durable branches (the state home), is hidden from a run:
    another branch's bytes are not this run's to read."""
    assert battery["kept"].is_file()  # there to find, outside
    assert battery["report"]["branch_bytes"] == [], battery["report"]["branch_bytes"]


def test_etc_is_read_only(battery: dict) -> None:
    refused(battery, "etc")
    assert not os.path.exists("/etc/" + battery["marker"])


def test_no_device_node_can_be_made_and_no_disk_is_there_to_read(battery: dict) -> None:
    refused(battery, "mknod_project", "mknod_tmp", "raw_device")
    assert battery["report"]["block_devices"] == []


def test_sysrq_proc_sys_and_sys_are_read_only(battery: dict) -> None:
    refused(battery, "sysrq", "proc_sys", "sys")


def test_system_calls_a_run_never_needs_are_refused(battery: dict) -> None:
    """keyrings, userfaultfd, io_uring, bpf, perf events, new user namespaces (seccomp.py)."""
    refused(battery, *SYSCALL_DOORS)
    assert any("seccomp filter" in note for note in battery["ran"].notes)


def test_the_hosts_abstract_unix_sockets_are_out_of_reach(battery: dict) -> None:
    refused(battery, "abstract_socket")  # offline: a network namespace of its own


ABSTRACT_AND_LOOPBACK = """
import json, socket, sys
def attempt(action):
    try:
        action()
        return "done"
    except OSError as error:
        return type(error).__name__
def abstract():
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(b"\\0" + sys.argv[1].encode())
print(json.dumps({"abstract": attempt(abstract), "loopback": attempt(
    lambda: socket.create_connection(("127.0.0.1", int(sys.argv[2])), 3).close())}))
"""


def test_with_the_network_a_run_reaches_tcp_but_not_the_hosts_abstract_sockets(who) -> None:
    """network=True shares the machine's network namespace, and so its abstract sockets
    (D-Bus, X11): Landlock (ABI >= 6) scopes them to the run inside the sandbox."""
    from shadowkernel.run import landlock

    if landlock.abi() < 6:
        pytest.skip(f"needs Landlock ABI 6 (here {landlock.abi()})")
    with socket.create_server(("127.0.0.1", 0)) as server, abstract_listener() as abstract:
        port = str(server.getsockname()[1])
        ran = who.run([PYTHON, "-c", ABSTRACT_AND_LOOPBACK, abstract, port], network=True)
    assert ran.exit_code == 0, ran.stderr
    assert json.loads(ran.stdout) == {"abstract": "PermissionError", "loopback": "done"}
    assert any("Landlock ABI" in note and "scoped" in note for note in ran.notes), ran.notes


def test_the_run_cannot_move_itself_out_of_its_cgroups(battery: dict) -> None:
    refused(battery, "cgroups")


def test_host_processes_are_neither_seen_nor_signalled(battery: dict) -> None:
    assert battery["report"]["host_process"] == "not seen"
    refused(battery, "signal_host")
    assert battery["sleeper_alive"]


def test_an_offline_run_cannot_reach_a_host_loopback_server(battery: dict) -> None:
    refused(battery, "host_loopback")
    assert not battery["accepted"]


def test_mount_and_umount_are_refused(battery: dict) -> None:
    refused(battery, "mount", "umount")


def test_no_capabilities_and_not_the_initial_user_namespace(battery: dict) -> None:
    status = battery["report"]["status"]
    assert status["CapEff"] == status["CapPrm"] == status["CapBnd"] == status["CapAmb"] == 0
    assert status["uid_map"] != "0 0 4294967295"  # that is the initial namespace's map


# -- runs beside each other, and bombs ----------------------------------------------------------

SERVE = """
import socket, sys
server = socket.create_server(("127.0.0.1", int(sys.argv[1])))
server.settimeout(60)
try:
    server.accept()
    print("accepted")
except socket.timeout:
    print("nobody came")
"""

CONNECT = """
import socket, sys
def attempt(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=3).close()
        return "connected"
    except OSError as error:
        return type(error).__name__
own = socket.create_server(("127.0.0.1", 0))
print(attempt(int(sys.argv[1])), attempt(own.getsockname()[1]))
"""


def listening(pid: int, port: int) -> bool:
    """Whether process `pid` (in its own network namespace) listens on `port`."""
    try:
        table = Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return False
    return any(f":{port:04X}" in row.split()[1] and row.split()[3] == "0A" for row in table)


def test_offline_runs_cannot_reach_each_others_loopback(who) -> None:

    port, marker = 47123, f"sk-serve-{uuid.uuid4().hex[:12]}"
    cancel, box = threading.Event(), {}
    argv = ["bash", "-c", f'exec -a {marker} {PYTHON} -c "$1" {port}', "serve", SERVE]
    serving = threading.Thread(target=lambda: box.setdefault("ran", who.run(argv, cancel)))
    serving.start()
    try:
        [pid] = wait_for(lambda: marked(marker, argv0=True), 30, "the server run")
        wait_for(lambda: listening(pid, port), 30, "the server to listen")
        other = who.run([PYTHON, "-c", CONNECT, str(port)])
    finally:
        cancel.set()
        serving.join(60)
    assert other.stdout.split() == ["ConnectionRefusedError", "connected"], other.stderr
    assert "accepted" not in box["ran"].stdout


def test_a_fork_bomb_is_bounded_and_leaves_nothing(who) -> None:

    marker = f"sk-bomb-{uuid.uuid4().hex[:12]}"
    bomb = ["bash", "-c", "f() { f & f & wait; }; f", marker]
    ran = who.run(bomb, timeout=3, max_processes=64)
    assert ran.exit_code is None  # killed at its timeout, not finished
    if isinstance(who, AsRoot):
        assert any("process limit 64 reached" in note for note in ran.notes), ran.notes
    assert marked(marker) == {}
    assert subprocess.run(["true"]).returncode == 0  # the test process can still fork


def test_a_memory_bomb_is_killed_without_harm_to_the_test(who) -> None:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    bomb = [PYTHON, "-c", "chunks = []\nwhile True:\n    chunks.append(bytearray(2**24))"]
    ran = who.run(bomb, timeout=60, max_memory=256 * MiB)
    if isinstance(who, AsRoot):  # the memory cgroup's OOM killer, then the run is stopped
        assert ran.exit_code != 0 and ran.out_of_memory
        assert any("memory limit 256 MiB" in n for n in ran.notes), ran.notes
    else:  # RLIMIT_AS: the allocation fails inside Python
        assert ran.exit_code not in (0, None) and "MemoryError" in ran.stderr
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak < 64 * 1024  # KiB


@pytest.mark.parametrize("place", ["/tmp", "~"])
def test_a_disk_filling_write_gets_enospc(who, place: str) -> None:
    """/tmp: a layer or an empty tmpfs; ~: the home layer's upper. Both bounded by max_disk,
    for the run only: the next run writes as usual."""
    fill = f"head -c 100M /dev/zero > {place}/fill; echo $? $(stat -c %s {place}/fill)"
    ran = who.run(["bash", "-c", fill], max_disk=16 * MiB)
    assert "No space left on device" in ran.stderr
    code, size = ran.stdout.split()
    assert code != "0" and int(size) <= 16 * MiB
    assert not os.path.exists(os.path.join(who.home, "fill"))  # the home is untouched
    after = who.run(["bash", "-c", f"head -c 1M /dev/zero > {place}/fill && echo ok"])
    assert after.stdout == "ok\n", after.stderr


def test_writes_to_tmp_and_var_tmp_vanish_and_var_tmp_reads_as_it_is(who) -> None:
    """/var/tmp is a copy-on-write layer for every identity; /tmp too, for a normal user only
    where nothing is mounted below it (else an empty tmpfs, and the run's notes say why)."""
    outside = Path(tempfile.mkdtemp(prefix="sk-kept-", dir="/var/tmp"))
    try:
        (outside / "kept.txt").write_text("kept\n")
        outside.chmod(0o755)  # the run's own folder: its uid's (runs have no DAC override)
        if isinstance(who, AsUser):
            subprocess.run(["chown", "-R", f"{USER}:{USER}", str(outside)], check=True)
        marker = f"/tmp/sk-vanish-{uuid.uuid4().hex[:12]}"
        before = tree_hash(outside)
        script = (f"cat {outside}/kept.txt; echo x > {outside}/new; rm {outside}/kept.txt; "
                  f"ls {outside}; echo y > {marker}; cat {marker}")  # fmt: skip
        ran = who.run(["bash", "-c", script])
        assert ran.exit_code == 0 and ran.stdout == "kept\nnew\ny\n", ran.stderr
        assert ran.written_outside == ()  # /tmp and /var/tmp are scratch: unlisted
        assert tree_hash(outside) == before and not os.path.exists(marker)
        below = any(m.startswith("/tmp/") for m in mount_points())  # FUSE shadows, say
        empty_tmp = any(n.startswith("/tmp an empty tmpfs") for n in ran.notes)
        assert empty_tmp == (below and isinstance(who, AsUser)), ran.notes
    finally:
        shutil.rmtree(outside)


def mount_points() -> list[str]:
    with open("/proc/self/mountinfo") as f:
        return [line.split()[4] for line in f]


def test_a_branchs_next_run_reuses_its_kept_view(who) -> None:
    """The same manifest again: the same overlayfs mount (its device), warm; another manifest:
    another view. As a normal user the views live in their holder's namespace."""
    if who.mode != "overlayfs":
        pytest.skip("kept views are overlayfs views")
    device = ["stat", "-c", "%d", "."]
    first, again = who.run(device), who.run(device)
    other = who.run(device, staged={"other.txt": "another manifest\n"})
    assert first.exit_code == again.exit_code == other.exit_code == 0, other.stderr
    assert first.stdout == again.stdout != other.stdout


def test_a_normal_users_runs_outlive_their_holder(who) -> None:
    """Killed (by hand, say), the namespace holding the user's mounts is started again by the
    next run, whose layers and view are made anew there; nothing is left behind."""
    if not isinstance(who, AsUser):
        pytest.skip("root mounts in the machine's namespace")
    assert who.run(["true"]).exit_code == 0  # the holder exists (one per process of the user's)
    holders = [pid for pid, line in user_processes().items() if "libc.mount(" in line]
    assert holders
    for holder in holders:
        os.kill(holder, 9)
    for holder in holders:
        wait_for(lambda h=holder: process_state(h) in ("Z", None), 30, "the holders to die")
    ran = who.run(["bash", "-c", "cat pkg/mod.py; echo x > ~/y"], staged={"s.txt": "s\n"})
    assert ran.exit_code == 0 and ran.stdout.startswith("def add"), ran.stderr
    assert ran.written_outside == (f"{who.home}/y",) and ran.mode == who.mode
    again = [pid for pid, line in user_processes().items() if "libc.mount(" in line]
    assert again and not set(again) & set(holders)


def process_state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def user_processes() -> dict[int, str]:
    uid, found = pwd.getpwnam(USER).pw_uid, {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            if os.stat(f"/proc/{entry}").st_uid == uid:
                found[int(entry)] = Path(f"/proc/{entry}/cmdline").read_text()
    return found


def test_the_view_shows_the_branch_and_what_the_run_wrote_is_harvested(who) -> None:
    before = snapshot(who.project)
    script = "cat staged.txt; echo made > made.txt; rm README.md; ls"
    ran = who.run(["bash", "-c", script], staged={"staged.txt": "from the branch\n"})
    assert ran.exit_code == 0, ran.stderr
    assert ran.mode == who.mode  # overlayfs as the user: its own namespace, no FUSE
    shown = {*os.listdir(who.project), "made.txt", "staged.txt"} - {"README.md"}
    assert ran.stdout.splitlines()[0] == "from the branch"
    assert sorted(ran.stdout.splitlines()[1:]) == sorted(shown)
    assert ran.written == {"made.txt": "made\n", "README.md": "Whiteout()"}
    assert snapshot(who.project) == before


# -- an outside venv ----------------------------------------------------------------------------


def make_wheel(folder: Path) -> Path:
    """A minimal pure-Python wheel, built by hand (a wheel is a zip with its metadata)."""
    import zipfile

    wheel = folder / "skprobe_pkg-1.0-py3-none-any.whl"
    files = {
        "skprobe_pkg/__init__.py": "VALUE = 'installed'\n",
        "skprobe_pkg-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: skprobe-pkg\nVersion: 1.0\n",
        "skprobe_pkg-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{name},,\n" for name in files) + "skprobe_pkg-1.0.dist-info/RECORD,,\n"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in {**files, "skprobe_pkg-1.0.dist-info/RECORD": record}.items():
            archive.writestr(name, text)
    return wheel


@pytest.fixture
def outside_venv(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A venv outside the project and outside /tmp (which runs see a private one of)."""
    folder = Path(tempfile.mkdtemp(prefix="sk-venv-", dir="/var/lib"))
    try:
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder / "venv")],
                       check=True)  # fmt: skip
        yield folder / "venv", make_wheel(tmp_path)
    finally:
        shutil.rmtree(folder)


def test_pip_install_into_an_outside_venv_leaves_it_unchanged(outside_venv, tmp_path) -> None:
    from shadowkernel.overlay.shadow import Shadow

    venv, wheel = outside_venv
    project = make_project(tmp_path / "project")
    shutil.copy(wheel, project / wheel.name)  # the wheel travels with the project
    install = (f"{sys.executable} -m pip --python {venv}/bin/python install -q --no-index "
               f"--no-deps {wheel.name} && {venv}/bin/python -c "
               "'import skprobe_pkg; print(skprobe_pkg.VALUE)'")  # fmt: skip
    before = tree_hash(venv)
    with Shadow(project) as sh:
        refused = run_in_shadow(sh, {}, install, timeout=120)
        layered = run_in_shadow(sh, {}, install, timeout=120, writable=[str(venv)])
    assert refused.exit_code != 0 and "Read-only file system" in refused.stderr
    assert layered.exit_code == 0 and layered.stdout == "installed\n", layered.stderr
    site = f"{venv}/lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"
    assert f"{site}/skprobe_pkg" in layered.written_outside
    assert tree_hash(venv) == before


def test_bad_writable_paths_get_a_clear_error(tmp_path: Path) -> None:
    from shadowkernel.errors import RunError
    from shadowkernel.run.layers import check_writable

    (tmp_path / "project" / "sub").mkdir(parents=True)
    folder = str(tmp_path / "project")
    for bad in ("relative/venv", str(tmp_path / "missing"), f"{folder}/sub", "/"):
        with pytest.raises(RunError, match=r"writable="):
            check_writable([bad], folder)
    assert check_writable([str(tmp_path), str(tmp_path)], folder) == (str(tmp_path),)


def test_a_project_inside_home_is_the_branch_and_the_rest_of_home_a_throwaway_layer() -> None:
    from shadowkernel.overlay.shadow import Shadow
    from shadowkernel.paths import RelPath

    home = Path(tempfile.mkdtemp(prefix="sk-home-", dir="/var/lib"))
    try:
        (home / ".bashrc").write_text("# mine\n")
        project = make_project(home / "work" / "project")
        before = tree_hash(home)
        env = {**os.environ, "HOME": str(home)}
        with Shadow(project) as sh:
            ran = run_in_shadow(sh, {}, "echo x >> ~/.bashrc; echo y > ~/work/notes; "
                                "echo z > made.txt; cat ~/.bashrc", env=env)  # fmt: skip
        assert ran.exit_code == 0 and ran.stdout == "# mine\nx\n", ran.stderr
        assert list(ran.written) == [RelPath("made.txt")]  # the branch's scratch
        assert ran.written_outside == (f"{home}/.bashrc", f"{home}/work/notes")
        assert tree_hash(home) == before
    finally:
        shutil.rmtree(home)


def test_a_run_whose_shell_survives_its_memory_bomb_is_stopped_at_the_cap(tmp_path) -> None:
    """The OOM killer kills the bomb only; the run as a whole is stopped all the same."""
    from shadowkernel.overlay.shadow import Shadow

    bomb = f"{PYTHON} -c 'b = []\nwhile True: b.append(bytearray(2**24))'; sleep 120"
    with Shadow(make_project(tmp_path / "project")) as sh:
        ran = run_in_shadow(sh, {}, bomb, timeout=100, max_memory=128 * MiB)
    assert ran.out_of_memory and not ran.ok and not ran.timed_out
    assert ran.exit_code is None  # stopped, not ended: the shell would have slept on


def test_root_runs_read_tmp_as_it_is_and_their_writes_there_vanish(tmp_path: Path) -> None:
    """Tests kept in /tmp outside the project (an eval's hidden tests) stay reachable."""
    from shadowkernel.overlay.shadow import Shadow

    outside = Path(tempfile.mkdtemp(prefix="sk-outside-", dir="/tmp"))
    try:
        (outside / "hidden.txt").write_text("hidden\n")
        before = tree_hash(outside)
        with Shadow(make_project(tmp_path / "project")) as sh:
            ran = run_in_shadow(sh, {}, f"cat {outside}/hidden.txt; echo x > {outside}/new; "
                                f"rm {outside}/hidden.txt; ls {outside}")  # fmt: skip
        assert ran.exit_code == 0 and ran.stdout == "hidden\nnew\n", ran.stderr
        assert ran.written_outside == ()  # /tmp is scratch: its writes go unlisted
        assert tree_hash(outside) == before
    finally:
        shutil.rmtree(outside)


def test_runs_start_while_the_machine_mounts_and_unmounts(tmp_path: Path) -> None:
    """bwrap remounts every mount it copies read-only; one that goes meanwhile (another
    shadow's view, a FUSE mount ending) must not fail the run."""
    from shadowkernel.overlay.shadow import Shadow
    from shadowkernel.run.views import destroy, mount

    churn_dir = Path(tempfile.mkdtemp(prefix="sk-churn-", dir="/var/lib"))
    done = threading.Event()

    def churn() -> None:  # what views and layers do: mount below a directory, then drop both
        live: list[str] = []
        for number in range(200_000):  # bounded; stops as soon as the runs are over
            if done.is_set():
                break
            place = churn_dir / str(number)
            place.mkdir()
            mount("tmpfs", str(place), "size=4k")
            live.append(str(place))
            if len(live) > 40:  # many mounts for bwrap to remount, one going at a time
                destroy(live.pop(0))
        for place in live:
            destroy(place)

    churner = threading.Thread(target=churn)
    try:
        with Shadow(make_project(tmp_path / "project")) as sh:
            churner.start()
            ran = [run_in_shadow(sh, {}, ["true"]) for _ in range(30)]
    finally:
        done.set()
        churner.join(30)
        shutil.rmtree(churn_dir)
    assert [r.exit_code for r in ran] == [0] * 30, [r.stderr for r in ran if r.exit_code]


SIX = "1.17.0"


def suite_summary(output: str) -> str:
    """pytest's last line without its timing: '987 passed, 2 skipped'."""
    return output.strip().splitlines()[-1].split(" in ")[0].strip("= ")


def test_a_real_librarys_suite_passes_in_the_filtered_sandbox_as_natively(tmp_path) -> None:
    """six from PyPI: its own tests, natively and in a run (bwrap, the seccomp filter,
    offline), give the same summary."""
    from shadowkernel.evals.pypi import unpack
    from shadowkernel.overlay.shadow import Shadow

    library = unpack("six", SIX, tmp_path / "library")
    native = unpack("six", SIX, tmp_path / "native")
    suite = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_six.py"]
    natively = subprocess.run(suite, cwd=native, capture_output=True, text=True, timeout=600)
    with Shadow(library) as shadow:
        inside = run_in_shadow(shadow, {}, suite, timeout=600)
    assert inside.exit_code == natively.returncode == 0, inside.stdout[-2000:]
    assert suite_summary(inside.stdout) == suite_summary(natively.stdout)
    assert " passed" in suite_summary(inside.stdout)
    assert any("seccomp filter" in note for note in inside.notes)
