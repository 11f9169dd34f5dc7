"""The `shadowkernel` command as a user meets it: real processes, real signals, bad input.

Each command runs as a subprocess with a private TMPDIR, so what it leaves behind (temporary
folders, mounts, processes) can be looked for afterwards."""

from __future__ import annotations

import hashlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from overlay_helpers import needs_fuse, snapshot

pytestmark = pytest.mark.timeout(180)


def shadowkernel(*args: str) -> list[str]:
    return [sys.executable, "-m", "shadowkernel.cli", *args]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    return {**os.environ, "TMPDIR": str(tmp), "XDG_STATE_HOME": str(tmp_path / "state")}


def call(env: dict[str, str], *args: str, stdin: str | None = "") -> subprocess.CompletedProcess:
    return subprocess.run(shadowkernel(*args), capture_output=True, text=True, env=env,
                          input=stdin, cwd=Path(env["TMPDIR"]).parent)  # fmt: skip


def one_line_error(result: subprocess.CompletedProcess, command: str) -> str:
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"shadowkernel {command}: "), result.stderr
    return lines[0]


def processes_with(word: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and word in (entry / "cmdline").read_bytes().decode():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def mounts_of(source: Path) -> list[str]:
    return [line for line in Path("/proc/mounts").read_text().splitlines() if str(source) in line]


# -- run: stopping it -----------------------------------------------------------------------------


@needs_fuse
@pytest.mark.parametrize(
    ("stop", "ignored"),
    [(signal.SIGINT, False), (signal.SIGTERM, False), (signal.SIGHUP, False),
     (signal.SIGINT, True)],
    ids=["SIGINT", "SIGTERM", "SIGHUP", "SIGINT-inherited-ignored"],
)  # fmt: skip
def test_a_stopped_run_closes_everything_and_says_so(
    stop: signal.Signals, ignored: bool, project: Path, env: dict[str, str]
) -> None:
    """Ctrl-C, SIGTERM or SIGHUP in the middle of `run`: the run's processes, its mounts and
    temporary folders go, one line says why, the status is 128+signal. The run's output shows
    as it comes (the line is read while the run still sleeps). Also when the command was
    started with SIGINT ignored, as a Jupyter kernel's children are: it was ignored and the
    run went on (CI saw the CLI's main thread still waiting 60 s after a SIGINT, twice)."""
    before = snapshot(project)
    marker = f"sleep 3{stop.value:03d}{int(ignored)}"  # a process name no other test runs
    command = shadowkernel("run", str(project), "--timeout", "60", "--",
                           "sh", "-c", f"echo started; exec {marker}")  # fmt: skip
    if ignored:  # exec keeps an ignored signal ignored
        command = ["sh", "-c", 'trap "" INT; exec "$@"', "sh", *command]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, cwd=project.parent)  # fmt: skip
    try:
        assert proc.stdout.readline() == "started\n"  # type: ignore[union-attr]
        assert processes_with(marker)
    finally:
        proc.send_signal(stop)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + stop.value, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == (
        f"shadowkernel run: stopped by {stop.name}; what it opened was closed"
    )
    assert processes_with(marker) == []
    assert mounts_of(project) == []
    assert os.listdir(env["TMPDIR"]) == []
    assert snapshot(project) == before


# -- run and lint: staging ------------------------------------------------------------------------


@needs_fuse
def test_a_binary_file_stages_as_its_bytes(project: Path, tmp_path: Path, env: dict[str, str]):
    data = bytes(range(256)) * 4  # not UTF-8
    (tmp_path / "blob.bin").write_bytes(data)
    result = call(env, "run", str(project), "--stage", f"assets/blob.bin={tmp_path / 'blob.bin'}",
                  "--", "sha256sum", "assets/blob.bin")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[0] == hashlib.sha256(data).hexdigest()
    assert not (project / "assets").exists()


def test_lint_with_nothing_to_lint_says_so(project: Path, env: dict[str, str]) -> None:
    """Not a silent exit 0, which reads as 'no lints'."""
    line = one_line_error(call(env, "lint", str(project)), "lint")
    assert "nothing to lint" in line and "--stage" in line and "--path" in line


@needs_fuse
def test_lint_prints_one_line_per_lint(project: Path, tmp_path: Path, env: dict[str, str]):
    """Ruff's messages carry a 'help:' paragraph; the text output keeps each lint on one
    line (PATH:LINE:COL: CODE MESSAGE), as grep and editors read it."""
    (tmp_path / "mod.py").write_text("import os\n")
    result = call(env, "lint", str(project), "--stage", f"pkg/mod.py={tmp_path / 'mod.py'}")
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert lines and all(re.match(r"pkg/mod\.py:\d+:\d+: \w+ ", line) for line in lines), lines
    assert any("F401" in line and "help: " in line for line in lines)


# -- mcp: what the stdio server would only find while serving -------------------------------------


def test_mcp_names_an_unknown_server_at_once(project: Path, env: dict[str, str]) -> None:
    line = one_line_error(call(env, "mcp", str(project), "--servers", "no-such-server"), "mcp")
    assert "unknown language server 'no-such-server'" in line


def test_mcp_names_a_timeline_it_could_not_write(project: Path, tmp_path: Path,
                                                 env: dict[str, str]) -> None:  # fmt: skip
    timeline = tmp_path / "no-such-folder" / "timeline.json"
    line = one_line_error(call(env, "mcp", str(project), "--state", "none",
                               "--timeline", str(timeline)), "mcp")  # fmt: skip
    assert str(timeline) in line and "does not exist" in line


# -- mount ----------------------------------------------------------------------------------------


def test_mount_refuses_a_folder_with_files(project: Path, tmp_path: Path, env: dict[str, str]):
    """A shadow mounted over files would hide them (and over a running shadow, stack on it)."""
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine\n")
    line = one_line_error(call(env, "mount", str(project), str(busy)), "mount")
    assert str(busy) in line and "is not empty" in line
    assert mounts_of(project) == []


@needs_fuse
def test_mount_removes_the_mountpoint_it_made(project: Path, tmp_path: Path, env: dict[str, str]):
    mnt = tmp_path / "new" / "mnt"
    proc = subprocess.Popen(shadowkernel("mount", str(project), str(mnt)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            cwd=tmp_path)  # fmt: skip
    try:
        assert "mounted at" in proc.stdout.readline()  # type: ignore[union-attr]
        assert (mnt / "README.md").read_text() == "# demo\n"
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert not mnt.exists() and mounts_of(project) == []
