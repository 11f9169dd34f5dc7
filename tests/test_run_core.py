"""Pure pieces of runs: the output cap and the command line that sets up a run."""

from __future__ import annotations

import subprocess

from shadowkernel.run.result import Capture
from shadowkernel.run.sandbox import Plan, command_line, setup_script


def test_capture_under_the_cap_keeps_everything() -> None:
    capture = Capture(cap=10)
    for chunk in (b"abc", b"def", b"ghij"):
        capture.add(chunk)
    assert not capture.truncated
    assert capture.text() == "abcdefghij"


def test_capture_over_the_cap_keeps_head_and_tail_and_says_so() -> None:
    capture = Capture(cap=10)
    for i in range(100):
        capture.add(b"%03d\n" % i)
    text = capture.text()
    assert capture.truncated and capture.total == 400
    assert text.startswith("000\n0")  # the first 5 bytes
    assert text.endswith("\n099\n")  # the last 5 bytes
    assert "390 bytes of output omitted" in text


def test_capture_memory_stays_bounded() -> None:
    capture = Capture(cap=1000)
    for _ in range(10_000):
        capture.add(b"x" * 4096)
    assert len(capture.head) + capture.tail_size <= 1000 + 4096


def test_capture_replaces_undecodable_bytes() -> None:
    capture = Capture(cap=100)
    capture.add(b"ok \xff\xfe end")
    assert capture.text() == "ok \ufffd\ufffd end"


def plan(**changes: object) -> Plan:
    values: dict = dict(argv=("echo", "hi"), cwd="/w/src", namespaces=True, network=False,
                        privileged=True, mount=("mount", "--bind", "/m", "/w/src"))  # fmt: skip
    values.update(changes)
    return Plan(**values)


def test_command_line_isolates_the_network_only_when_asked() -> None:
    assert "--net" in command_line(plan(network=False))
    assert "--net" not in command_line(plan(network=True))
    assert "ip link set lo up" not in setup_script(plan(network=True))


def test_offline_runs_join_the_shared_loopback_namespace_when_there_is_one() -> None:
    line = command_line(plan(netns="/run/netns/x"))
    assert line[:2] == ["nsenter", "--net=/run/netns/x"] and "--net" not in line
    assert "ip link" not in setup_script(plan(netns="/run/netns/x"))
    assert "--net" not in command_line(plan(network=True, netns="/run/netns/x"))[2:]


def test_unprivileged_runs_map_root_in_a_user_namespace() -> None:
    line = command_line(plan(privileged=False))
    assert line[line.index("--user") + 1] == "--map-root-user"
    assert "setpriv" not in setup_script(plan(privileged=False))


def test_the_command_runs_as_a_child_of_the_namespace_init() -> None:
    script = setup_script(plan(cgroup_procs="/sys/fs/cgroup/pids/x/cgroup.procs"))
    lines = script.splitlines()
    assert lines[1].startswith("echo 0 > ")  # joins the cgroup before anything forks
    assert lines[-1].endswith('"$@"') and not lines[-1].startswith("exec")


def test_setup_script_quotes_hostile_paths() -> None:
    """A path full of shell syntax reaches `cd` as one word, and nothing else runs."""
    odd = "/tmp/it's a $(touch /tmp/pwned) `x` ;dir"
    script = setup_script(plan(namespaces=False, mount=(), cwd=odd))
    (cd_line,) = [line for line in script.splitlines() if line.startswith("cd ")]
    echo = cd_line.replace("cd ", "printf '%s\\n' ", 1)
    words = subprocess.run(["sh", "-c", echo], capture_output=True, text=True, check=True)
    assert words.stdout.splitlines() == [odd]


def test_kept_views_are_covered_once_the_view_is_bound() -> None:
    lines = setup_script(plan(hide="/dev/shm/views")).splitlines()
    bind = lines.index("mount --bind /m /w/src")
    assert lines[bind + 1] == "mount -t tmpfs -o ro,size=4k shadowkernel-hidden /dev/shm/views"
