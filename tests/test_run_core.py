"""Pure pieces of runs: the output cap and the command line that sets up a run."""

from __future__ import annotations

import subprocess
from pathlib import Path

from shadowkernel.run.result import Capture
from shadowkernel.run.sandbox import SNAPSHOT, Bind, Plan, command_line


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
                        privileged=True, binds=(Bind("/m", "/w/src"),))  # fmt: skip
    values.update(changes)
    return Plan(**values)


def flag_values(line: list[str], flag: str) -> list[str]:
    return [line[i + 1] for i, word in enumerate(line) if word == flag]


def test_every_offline_run_gets_a_network_namespace_of_its_own() -> None:
    assert "--unshare-net" in command_line(plan(network=False))
    assert "--unshare-net" not in command_line(plan(network=True))


def test_runs_hold_no_capabilities_and_root_is_root_only_inside_its_user_namespace() -> None:
    line = command_line(plan())
    assert {"--unshare-user", "--unshare-pid", "--unshare-uts", "--die-with-parent"} <= set(line)
    ro = flag_values(line, "--ro-bind")
    assert ro[:2] == ["/", "/proc/sys"]  # sysctls check mode bits only: root inside passes
    assert flag_values(line, "--cap-drop") == ["ALL"] and "--cap-add" not in line
    assert flag_values(line, "--uid") == ["0"]
    assert "--uid" not in command_line(plan(privileged=False))  # the invoking uid stays


def test_the_machine_is_read_only_and_binds_come_in_order_over_it() -> None:
    binds = (Bind("/shm/home", "/root"), Bind("/shm/venv", "/opt/venv"), Bind("/m", "/w/src"))
    line = command_line(plan(binds=binds, hide=("/srv/views",)))
    assert line[line.index("--ro-bind") + 1 : line.index("--ro-bind") + 3] == ["/", "/"]
    assert flag_values(line, "--dev") == ["/dev"] and flag_values(line, "--proc") == ["/proc"]
    assert flag_values(line, "--tmpfs") == ["/tmp", "/var/tmp", "/dev/shm", "/srv/views"]
    assert flag_values(line, "--bind") == ["/shm/home", "/shm/venv", "/m"]
    assert line.index("--ro-bind") < line.index("/dev/shm") < line.index("/shm/home")
    assert line.index("/m") < line.index("/srv/views")  # hidden once everything is bound


def test_private_tmpfs_are_size_limited() -> None:
    line = command_line(plan(tmp_size=12345))
    assert flag_values(line, "--size") == ["12345"] * 3


SANDBOX = [*SNAPSHOT, "bwrap"]  # bwrap starts in a private copy of the mount table


def test_the_command_follows_the_sandbox_flags_untouched() -> None:
    line = command_line(plan(argv=("--weird", "$(x)")))
    assert line[: len(SANDBOX)] == SANDBOX and line[-3:] == ["--", "--weird", "$(x)"]
    assert line[line.index("--chdir") + 1] == "/w/src"


def test_cgroups_are_joined_before_the_sandbox_starts() -> None:
    procs = ("/sys/fs/cgroup/pids/x/cgroup.procs", "/sys/fs/cgroup/memory/x/cgroup.procs")
    line = command_line(plan(cgroup_procs=procs))
    assert line[:2] == ["sh", "-c"] and line[3:6] == ["sh", *procs]
    assert line[6 : 6 + len(SANDBOX)] == SANDBOX
    script = line[2].splitlines()
    assert script[1:3] == ['echo 0 > "$1"', 'echo 0 > "$2"'] and script[-1] == 'exec "$@"'


def test_without_cgroups_rlimits_bound_the_run() -> None:
    line = command_line(plan(max_processes=64, max_memory=2**30))
    assert line[:4] == ["prlimit", "--nproc=64", f"--as={2**30}", "--"]
    assert command_line(plan())[: len(SANDBOX)] == SANDBOX


def test_setup_script_quotes_hostile_paths(tmp_path: Path) -> None:
    """A path full of shell syntax reaches `cd` as one word, and nothing else runs."""
    odd = tmp_path / "it's a $(touch pwned) `touch x` ;dir"
    odd.mkdir()
    line = command_line(plan(namespaces=False, binds=(), cwd=str(odd), argv=("pwd",)))
    done = subprocess.run(line, capture_output=True, text=True, cwd=tmp_path, check=True)
    assert done.stdout == f"{odd}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [odd.name]


def test_unprivileged_runs_enter_their_holders_namespaces_just_before_the_sandbox() -> None:
    line = command_line(plan(privileged=False, enter=4242, ids=(1001, 1001), cgroup_procs=("/c",),
                             binds=(Bind("/shm/0/mnt", "/home/u"), Bind("/m", "/w/src"))))  # fmt: skip
    start = line.index("bwrap") - len(SNAPSHOT)
    assert line[start - 6 : start] == ["nsenter", "--target=4242", "--user", "--mount",
                                       "--preserve-credentials", "--"]  # fmt: skip
    assert line[start : start + len(SANDBOX)] == SANDBOX
    assert line[0] == "sh" and line.index("nsenter") > line.index("/c")  # cgroups joined first
    assert flag_values(line, "--uid") == ["1001"]  # not root of the holder's namespace
    assert "nsenter" not in command_line(plan(privileged=False))


def test_a_tree_watch_sees_names_change_anywhere_in_the_folder(tmp_path: Path) -> None:
    """What normal users' kept views rely on (no fanotify filesystem mark for them)."""
    from shadowkernel.run.folder_watch import TreeWatch

    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "f").write_text("one")
    watch = TreeWatch(str(tmp_path))
    try:
        assert not watch.changed()
        (tmp_path / "a" / "b" / "f").write_text("two")  # bytes in place: not a name
        assert not watch.changed()
        (tmp_path / "a" / "b" / "f").rename(tmp_path / "a" / "b" / "g")
        assert watch.changed() and not watch.changed()
        (tmp_path / "a" / "new").mkdir()
        assert watch.changed()
        (tmp_path / "a" / "new" / "h").write_text("")  # a directory made later is watched
        assert watch.changed() and not watch.changed()
    finally:
        watch.close()


def test_kept_paths_show_again_over_the_empty_tmpfs_that_covers_them() -> None:
    line = command_line(plan(tmpfs=("/tmp",), keep=("/tmp/venv",)))
    at = {tuple(line[i : i + 3]): i for i in range(len(line))}
    assert at[("--ro-bind", "/tmp/venv", "/tmp/venv")] > at[("--tmpfs", "/tmp", "--ro-bind")]
