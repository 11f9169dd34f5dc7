"""The escape battery: every door out of a run is closed, as root and as a normal user.

Each probe is harmless: it reads, opens without writing, or writes only into folders this test
made (a folder in /tmp outside the project, a home of the test's own for root, the normal
user's own home). Whether a door is closed is judged from outside where it can be (the host's
folders afterwards, a host server's accept queue, a host process still alive), and from the
probe's report inside otherwise.

As root, runs go through `run_in_shadow` in both views. As a normal user (`skprobe`, made here
with useradd if missing) they cannot: the project's venv lives under /root (0700 here), so no
Shadow can start as that user. Those runs therefore start at one seam below, for real: the
command line `sandbox.command_line` composes for a non-root run (bwrap in an unprivileged user
namespace, prlimit bounds since that user has no writable cgroup), run as that uid through
`setpriv` by the same `run_process` the runner uses, with a folder the user owns standing for
the shadow's view.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pwd
import resource
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from overlay_helpers import make_project, needs_fuse, needs_root, snapshot
from test_run import marked, wait_for

from shadowkernel.run import run_in_shadow
from shadowkernel.run.layers import Layers
from shadowkernel.run.process import run_process
from shadowkernel.run.sandbox import Bind, Plan, command_line, machine

pytestmark = [needs_root, needs_fuse,
              pytest.mark.skipif(not machine().namespaces, reason="needs bwrap (bubblewrap)")]  # fmt: skip

USER = "skprobe"
PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
MiB = 2**20

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


# -- the two identities -------------------------------------------------------------------------


class AsRoot:
    """Runs through run_in_shadow, with a home of the test's own (layered copy-on-write)."""

    name = "root"

    def __init__(self, project: Path, home: Path, mode: str) -> None:
        from shadowkernel.overlay.shadow import Shadow

        self.project, self.home, self.mode = project, home, mode
        self.shadow = Shadow(project)

    def run(self, argv: list[str], cancel: threading.Event | None = None, **limits) -> Ran:
        env = {**os.environ, "HOME": str(self.home)}
        r = run_in_shadow(self.shadow, {}, argv, env=env, mode=self.mode, cancel=cancel,
                          **{"timeout": 60, **limits})  # fmt: skip
        return Ran(r.exit_code, r.stdout, r.stderr, r.notes, r.written_outside, r.out_of_memory)

    def close(self) -> None:
        self.shadow.close()


class AsUser:
    """Runs as a normal user through the non-root command line (see the module docstring),
    with the copy-on-write layer over the user's home that runs as that user get."""

    name = USER

    def __init__(self, project: Path, home: Path, view: Path) -> None:
        self.project, self.home, self.view = project, home, view
        entry = pwd.getpwnam(USER)
        self.uid, self.gid = entry.pw_uid, entry.pw_gid

    def run(self, argv: list[str], cancel: threading.Event | None = None, timeout: float = 60,
            max_processes: int = 1024, max_memory: int = 4096 * MiB,
            max_disk: int = 2048 * MiB) -> Ran:  # fmt: skip
        with self.identity():  # the layer's directories are the user's, as in their own runs
            layers = Layers((str(self.home),), max_disk, "/dev/shm", privileged=False).__enter__()
        try:
            plan = Plan(argv=tuple(argv), cwd=str(self.project), namespaces=True, network=False,
                        privileged=False, binds=(*layers.binds, Bind(str(self.view), str(self.project))),
                        overlays=tuple(layers.overlays), ids=(self.uid, self.gid),
                        tmp_size=max_disk, max_processes=max_processes, max_memory=max_memory)  # fmt: skip
            line = ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups",
                    "--", *command_line(plan)]  # fmt: skip
            env = {"HOME": str(self.home), "PATH": os.environ["PATH"], "USER": USER}
            out = run_process(line, env, timeout, 2**20, cancel=cancel)
            outside = layers.written()
        finally:
            with self.identity():
                layers.close()
        return Ran(out.exit_code, out.stdout.text(), out.stderr.text(), written_outside=outside)

    @contextlib.contextmanager
    def identity(self) -> Iterator[None]:
        os.setegid(self.gid)
        os.seteuid(self.uid)
        try:
            yield
        finally:
            os.seteuid(0)
            os.setegid(0)

    def close(self) -> None:
        pass


def ensure_user() -> Path:
    if subprocess.run(["id", USER], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", USER], check=True)
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
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module", params=["root-overlayfs", "root-fuse", USER])
def who(request: pytest.FixtureRequest, base: Path) -> Iterator[AsRoot | AsUser]:
    place = base / request.param
    project = make_project(place / "project")
    if request.param == USER:
        view = place / "view"  # what the user's FUSE shadow would show: the user's own copy
        shutil.copytree(project, view, symlinks=True)
        subprocess.run(["chown", "-R", f"{USER}:{USER}", str(place)], check=True)
        identity: AsRoot | AsUser = AsUser(project, ensure_user(), view)
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
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        server.setblocking(False)
        args = {"outside": str(outside), "marker": [marker[:8], marker[8:]], "sleeper": sleeper.pid,
                "port": server.getsockname()[1], "device": [os.major(device), os.minor(device)],
                "devname": block_device_name(device)}  # fmt: skip
        before = (snapshot(who.project), tree_hash(who.home))
        ran = who.run([PYTHON, "-c", PROBE, json.dumps(args)])
        after = (snapshot(who.project), tree_hash(who.home))
        accepted = accept_nowait(server)
    alive = sleeper.poll() is None
    sleeper.kill()
    sleeper.wait()
    assert ran.exit_code == 0, ran.stderr
    yield {"report": json.loads(ran.stdout), "ran": ran, "before": before, "after": after,
           "outside": outside, "accepted": accepted, "sleeper_alive": alive, "marker": marker}  # fmt: skip


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
            "host_loopback", "status"]  # fmt: skip
    try:
        with socket.socket() as server:
            server.bind(("127.0.0.1", 0))
            server.listen(8)
            args = {"outside": str(outside), "marker": [marker[:8], marker[8:]], "only": only,
                    "sleeper": sleeper.pid, "port": server.getsockname()[1],
                    "device": [os.major(device), os.minor(device)],
                    "devname": block_device_name(device)}  # fmt: skip
            native = subprocess.run([PYTHON, "-c", PROBE, json.dumps(args)], cwd=outside,
                                    capture_output=True, text=True, check=True)  # fmt: skip
    finally:
        sleeper.kill()
        sleeper.wait()
    report = json.loads(native.stdout)
    assert [door for door in only if str(report[door]).startswith("refused")] == []
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


def test_etc_is_read_only(battery: dict) -> None:
    refused(battery, "etc")
    assert not os.path.exists("/etc/" + battery["marker"])


def test_no_device_node_can_be_made_and_no_disk_is_there_to_read(battery: dict) -> None:
    refused(battery, "mknod_project", "mknod_tmp", "raw_device")
    assert battery["report"]["block_devices"] == []


def test_sysrq_proc_sys_and_sys_are_read_only(battery: dict) -> None:
    refused(battery, "sysrq", "proc_sys", "sys")


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


def test_a_disk_filling_write_gets_enospc(who) -> None:
    fill = ["bash", "-c", "head -c 100M /dev/zero > /tmp/fill; echo $? $(stat -c %s /tmp/fill)"]
    ran = who.run(fill, max_disk=16 * MiB)
    assert "No space left on device" in ran.stderr
    code, size = ran.stdout.split()
    assert code != "0" and int(size) <= 16 * MiB
    assert stat.S_ISDIR(os.stat("/tmp").st_mode)  # and the machine's /tmp is untouched


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
