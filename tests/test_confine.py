"""The confinement layers on their own: which layer a run gets (pure), the plans they make
(pure), the seccomp program loaded for real into a child process, and the Landlock helper
confining a real process. The escape batteries (tests/test_sandbox.py in bubblewrap, and
tests/test_fallback_child.py in an unprivileged child) hold them inside whole runs.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from overlay_helpers import make_project, needs_fuse, snapshot

from shadowkernel.errors import RunError
from shadowkernel.run import landlock, seccomp
from shadowkernel.run.capabilities import Facts, confinement
from shadowkernel.run.sandbox import Plan, command_line, confined

HOST = Facts(None, None, None, None, landlock=7)
CONTAINER = Facts("/dev/fuse is missing", None, "bwrap refused: No permissions", None, 7)
OLD_KERNEL = Facts("/dev/fuse is missing", None, "bwrap refused: No permissions", None, 0)
NATIVE = platform.machine() in ("x86_64", "aarch64")


# -- which layer (pure) ---------------------------------------------------------------------------


def test_bwrap_first_then_landlock_and_unconfined_only_when_asked() -> None:
    assert confinement(True, False, HOST).layer == "bwrap"
    assert confinement(True, False, CONTAINER).layer == "landlock"
    assert confinement(False, False, HOST).layer == "none"
    assert confinement(False, False, OLD_KERNEL).layer == "none"
    for network in (False, True):  # the network is not a way around confinement
        with pytest.raises(RunError, match="cannot confine runs.*pass sandbox=False"):
            confinement(True, network, OLD_KERNEL)


def test_an_offline_run_needs_a_landlock_that_refuses_tcp() -> None:
    no_tcp = dataclasses.replace(CONTAINER, landlock=3)
    with pytest.raises(RunError, match=r"cannot keep a run offline.*ABI 3.*pass network=True"):
        confinement(True, False, no_tcp)
    assert confinement(True, True, no_tcp).layer == "landlock"


def test_the_note_names_the_layer_and_the_abi() -> None:
    offline = confinement(True, False, CONTAINER).note(network=False)
    assert (
        offline.startswith("confined by Landlock ABI 7")
        and "TCP connect and bind refused" in offline
    )
    assert "bwrap cannot start here: bwrap refused" in offline
    assert "TCP" not in confinement(True, True, CONTAINER).note(network=True)
    assert "seccomp" in confinement(True, False, HOST).note(network=False)
    assert "Landlock ABI 7 scoped" in confinement(True, False, HOST).note(network=True)
    assert (
        confinement(False, True, HOST).note(network=True).startswith("not confined (sandbox=False)")
    )
    assert "needs ABI 4" in landlock.describe(3, True, True)


# -- the plans (pure) -----------------------------------------------------------------------------


def plan(**values: object) -> Plan:
    defaults = {"argv": ("cmd",), "cwd": "/p", "namespaces": True, "network": False,
                "privileged": True}  # fmt: skip
    return Plan(**{**defaults, **values})  # type: ignore[arg-type]


def test_bwrap_loads_the_filter_from_a_descriptor_its_prefix_opens() -> None:
    line = command_line(confined(plan(), "bwrap", 7, [], "/py", "/f.bpf"))
    script, values = line[2], line[4:]
    assert 'exec 3< "$1"' in script and values[0] == "/f.bpf"
    assert line[line.index("--seccomp") + 1] == "3" and line[-2:] == ["--", "cmd"]


def test_with_the_network_bwrap_runs_scope_abstract_sockets_and_signals_inside() -> None:
    line = command_line(confined(plan(network=True), "bwrap", 6, [], "/py", "/f.bpf"))
    inside = line[line.index("--chdir") + 3 :]  # after --chdir CWD --
    assert inside[:4] == ["/py", "-I", "-S", "-c"] and inside[-2:] == ["--", "cmd"]
    assert "--fs" not in inside and "--offline" not in inside
    older = command_line(confined(plan(network=True), "bwrap", 5, [], "/py", "/f.bpf"))
    assert older[-2:] == ["--", "cmd"] and "/py" not in older  # nothing to scope with


def test_landlock_alone_confines_writes_and_tcp_before_the_command() -> None:
    line = command_line(confined(plan(namespaces=False), "landlock", 7, ["/copy", "/tmp/x"],
                                 "/py", None))  # fmt: skip
    assert "bwrap" not in line and line[-1] == "cmd"
    options = line[line.index("-S") + 3 : -1]
    assert options == ["--write=/copy", "--write=/tmp/x", "--fs", "--offline", "--"]
    unconfined = plan(namespaces=False)
    assert confined(unconfined, "none", 7, ["/copy"], "/py", None) == unconfined


# -- the seccomp program, loaded for real ---------------------------------------------------------


def header_numbers(path: str, pattern: str) -> dict[str, int]:
    text = Path(path).read_text()
    return {m[1]: int(m[2]) for m in re.finditer(pattern, text)}


@pytest.mark.skipif(not os.path.exists("/usr/include/asm-generic/unistd.h"),
                    reason="needs the kernel headers (linux-libc-dev)")  # fmt: skip
def test_the_system_call_numbers_match_the_kernel_headers() -> None:
    generic = header_numbers("/usr/include/asm-generic/unistd.h",
                             r"#define __NR(?:3264)?_(\w+)\s+(\d+)")  # fmt: skip
    assert {n: generic[n] for n in seccomp.AARCH64} == seccomp.AARCH64
    arch = "/usr/include/x86_64-linux-gnu/asm"
    if os.path.exists(f"{arch}/unistd_64.h"):
        x86_64 = header_numbers(f"{arch}/unistd_64.h", r"#define __NR_(\w+)\s+(\d+)")
        i386 = header_numbers(f"{arch}/unistd_32.h", r"#define __NR_(\w+)\s+(\d+)")
        assert {n: x86_64[n] for n in seccomp.X86_64} == seccomp.X86_64
        assert {n: i386.get(n) for n in seccomp.I386} == seccomp.I386
        assert {n: i386[f"{n}64"] for n in seccomp.I386_TIME64} == seccomp.I386_TIME64


# Loads the program into itself (as bwrap does), then tries each call: {name: errno or 0}.
LOAD_AND_PROBE = r"""
import ctypes, json, os, sys, threading, subprocess
program, numbers = open(sys.argv[1], "rb").read(), json.loads(sys.argv[2])
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
class Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]
if sys.argv[3] == "load":
    assert libc.prctl(38, 1, 0, 0, 0) == 0  # no_new_privs
    assert libc.prctl(22, 2, ctypes.byref(Prog(len(program) // 8, program))) == 0, ctypes.get_errno()
params = ctypes.create_string_buffer(120)
perf = ctypes.create_string_buffer(128)
perf[0:4], perf[4:8] = (1).to_bytes(4, "little"), (128).to_bytes(4, "little")  # software, size
calls = {
    "keyctl": (0, -3, 0), "add_key": (b"user", b"sk-probe", b"x", 1, -2),
    "request_key": (b"user", b"sk-none", None, 0), "userfaultfd": (0o2000000,),
    "io_uring_setup": (1, params), "bpf": (0, ctypes.create_string_buffer(72), 72),
    "perf_event_open": (perf, 0, -1, -1, 0), "clone3": (None, 0),
    "unshare": (0x10000000,),  # last: it would move the probe into a new user namespace
}
out = {}
for name, args in calls.items():
    ctypes.set_errno(0)
    result = libc.syscall(ctypes.c_long(numbers[name]), *args)
    out[name] = ctypes.get_errno() if result < 0 else 0
    if result > 2 and name not in ("keyctl", "add_key"):
        os.close(result)
out["unshare_fs"] = 0 if libc.unshare(0x200) == 0 else ctypes.get_errno()  # CLONE_FS
done = []
threading.Thread(target=lambda: done.append(1)).start()
out["thread_and_fork"] = int(subprocess.run(["true"]).returncode == 0 and done == [1])
print(json.dumps(out))
"""


@pytest.mark.skipif(not NATIVE, reason="the filter knows x86_64 and aarch64")
def test_the_filter_refuses_each_listed_call_and_nothing_a_program_needs(
    tmp_path: Path,
) -> None:
    program = tmp_path / "filter.bpf"
    program.write_bytes(seccomp.program())
    numbers = seccomp.X86_64 if platform.machine() == "x86_64" else seccomp.AARCH64

    def probe(load: str) -> dict[str, int]:
        argv = [sys.executable, "-c", LOAD_AND_PROBE, str(program), json.dumps(numbers), load]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    filtered = probe("load")
    import errno

    assert {k: v for k, v in filtered.items() if k in seccomp.DENIED} == {
        name: seccomp.DENIED[name][0] for name in filtered if name in seccomp.DENIED
    }  # each refused with its own errno
    assert filtered["unshare_fs"] == 0 and filtered["thread_and_fork"] == 1
    assert seccomp.DENIED["io_uring_setup"][0] == seccomp.DENIED["clone3"][0] == errno.ENOSYS
    if os.geteuid() == 0:  # the control: unfiltered, root gets through where the filter refused
        native = probe("none")
        assert [n for n in ("keyctl", "add_key", "userfaultfd", "io_uring_setup", "unshare")
                if native[n] != 0] == []  # fmt: skip


def test_the_docs_give_each_refused_call_with_its_reason() -> None:
    table = Path(__file__).resolve().parent.parent.joinpath("docs/sandbox.md").read_text()
    assert [name for name in seccomp.DENIED if f"`{name}`" not in table] == []


def test_an_unknown_architecture_gets_enosys_for_everything() -> None:
    words = seccomp.compile_filter("riscv64")
    assert len(words) == 16  # load the arch, answer ENOSYS
    assert int.from_bytes(words[12:16], "little") == seccomp.RET_ERRNO | 38


# -- the Landlock helper, confining a real process ------------------------------------------------

# Tries each door from inside the helper: {door: "done" or the error}.
DOORS = r"""
import json, os, socket, sys
args = json.loads(sys.argv[1])
def attempt(action):
    try:
        action()
        return "done"
    except OSError as error:
        return type(error).__name__
def write(path):
    with open(path, "w") as f:
        f.write("x")
abstract = socket.socket(socket.AF_UNIX)
print(json.dumps({
    "own": attempt(lambda: write(os.path.join(args["own"], "f"))),
    "outside": attempt(lambda: write(os.path.join(args["outside"], "f"))),
    "dev_null": attempt(lambda: write("/dev/null")),
    "read": attempt(lambda: open(args["readable"]).read()),
    "tcp": attempt(lambda: socket.create_connection(("127.0.0.1", args["port"]), 3).close()),
    "bind": attempt(lambda: socket.create_server(("127.0.0.1", 0)).close()),
    "abstract": attempt(lambda: abstract.connect(b"\0" + args["abstract"].encode())),
    "signal": attempt(lambda: os.kill(args["parent"], 0)),
    "rename": attempt(lambda: (os.mkdir(os.path.join(args["own"], "a")),
                              os.rename(os.path.join(args["own"], "f"),
                                        os.path.join(args["own"], "a", "f")))),
}))
"""


@pytest.mark.skipif(landlock.abi() < 6, reason=f"needs Landlock ABI 6 (here {landlock.abi()})")
@pytest.mark.parametrize("network", [False, True])
def test_the_landlock_helper_confines_the_command_it_starts(tmp_path: Path, network: bool) -> None:
    own, outside = tmp_path / "own", tmp_path / "outside"
    own.mkdir()
    outside.mkdir()
    (outside / "readable").write_text("r")
    with socket.create_server(("127.0.0.1", 0)) as server, \
            socket.socket(socket.AF_UNIX) as listener:  # fmt: skip
        listener.bind(b"\0sk-confine-" + str(os.getpid()).encode())
        listener.listen()
        args = {"own": str(own), "outside": str(outside), "readable": str(outside / "readable"),
                "port": server.getsockname()[1], "parent": os.getpid(),
                "abstract": f"sk-confine-{os.getpid()}"}  # fmt: skip
        helper = landlock.helper(sys.executable, [str(own)], fs=True, offline=not network)
        done = subprocess.run([*helper, sys.executable, "-c", DOORS, json.dumps(args)],
                              capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    doors = json.loads(done.stdout)
    assert doors["own"] == doors["dev_null"] == doors["read"] == doors["rename"] == "done"
    assert doors["outside"] == "PermissionError" and not (outside / "f").exists()
    assert doors["abstract"] == doors["signal"] == "PermissionError"  # scoped either way
    tcp = "done" if network else "PermissionError"
    assert doors["tcp"] == doors["bind"] == tcp


# -- a FUSE shadow where bwrap cannot start: Landlock at the mount path ---------------------------


@needs_fuse
@pytest.mark.skipif(landlock.abi() < 4, reason=f"needs Landlock ABI 4 (here {landlock.abi()})")
def test_a_mounted_shadow_without_bwrap_runs_at_its_mount_confined_by_landlock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where FUSE mounts but bwrap cannot start (Ubuntu 24.04 refuses normal users new user
    namespaces; fusermount3 is setuid): the one seam is the probe saying so; the mount, the
    run and Landlock are real."""
    from shadowkernel.overlay.shadow import Shadow
    from shadowkernel.run import capabilities, run_in_shadow

    facts = Facts(None, None, "bwrap refused (forced by the test)", None, landlock.abi())
    monkeypatch.setattr(capabilities, "probe", lambda: facts)
    outside = tmp_path / "outside"
    outside.mkdir()
    project = make_project(tmp_path / "project")
    before = snapshot(project)
    script = (f"echo made > made.txt; echo x > {outside}/f || echo outside-refused; "
              f"echo y > {project}/direct || echo folder-refused; echo t > $TMPDIR/t && cat $TMPDIR/t")  # fmt: skip
    with Shadow(project) as shadow, socket.create_server(("127.0.0.1", 0)) as server:
        ran = run_in_shadow(shadow, {}, script)
        tcp = f"import socket; socket.create_connection(('127.0.0.1', {server.getsockname()[1]}))"
        offline = run_in_shadow(shadow, {}, tcp, python=True)
        online = run_in_shadow(shadow, {}, tcp, python=True, network=True)
        bare = run_in_shadow(shadow, {}, "true", sandbox=False)
    assert ran.stdout.split() == ["outside-refused", "folder-refused", "t"], ran.stderr
    assert ran.mode == "fuse-at-mountpoint" and list(ran.written) == ["made.txt"]
    assert any(n.startswith("confined by Landlock ABI") for n in ran.notes), ran.notes
    assert "PermissionError" in offline.stderr and online.ok, online.stderr
    assert any(n.startswith("not confined (sandbox=False)") for n in bare.notes)
    assert snapshot(project) == before and list(outside.iterdir()) == []
