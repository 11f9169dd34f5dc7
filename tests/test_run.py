"""Runs inside the shadow, for real: namespaces, mounts, cgroups; both overlayfs and FUSE views.

Every test runs in both modes against one shadow of one project (the runs never write the
user's folder, which is what several tests check). Processes of a run are looked for in the
host's /proc by a marker in their command line, since their PIDs inside the run's PID
namespace mean nothing out here.
"""

from __future__ import annotations

import os
import resource
import shutil
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from overlay_helpers import make_project, needs_fuse, needs_root, snapshot
from run_helpers import alive_with, marked, wait_for

from shadowkernel.overlay import mounts
from shadowkernel.overlay.store import WHITEOUT, File, patched
from shadowkernel.paths import RelPath
from shadowkernel.run import run_in_shadow, views
from shadowkernel.run.runner import views_home

pytestmark = [needs_root, needs_fuse]

MODES = ["overlayfs", "fuse"]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_project(tmp_path_factory.mktemp("run") / "project")


@pytest.fixture(scope="module")
def shadow(project: Path) -> Iterator[object]:
    from shadowkernel.overlay.shadow import Shadow

    with Shadow(project) as sh:
        yield sh


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


# -- the user's folder --------------------------------------------------------------------------


def test_hostile_run_leaves_the_user_folder_unchanged(shadow, project: Path, mode: str) -> None:
    before = snapshot(project)
    src = str(project)
    script = f"""
        echo clobbered > {src}/README.md             # the user's folder by absolute path
        echo through-link >> abs_link                # a symlink pointing back into it
        echo rel >> ../../link_to_mod
        chmod 777 {src}/run.sh; touch -d 2001-01-01 {src}/pkg/mod.py
        mkdir -p {src}/pkg/__pycache__ && echo pyc > {src}/pkg/__pycache__/mod.pyc
        mv {src}/docs {src}/docs2
        umount {src}; umount -l {src}                # try to uncover the real folder
        rm -rf ..                                    # the parent of the working directory
        rm -rf {src}/* {src}/.[!.]* {src}            # and everything, by absolute path
        ls -A {src} | wc -l
    """
    result = run_in_shadow(shadow, {}, script, mode=mode, cwd="pkg/sub")
    assert result.mode == mode and result.path_transparent
    assert result.stdout.strip() == "0", result.stderr  # the run saw everything go
    assert "must be superuser to unmount" in result.stderr  # no CAP_SYS_ADMIN inside
    assert snapshot(project) == before
    assert result.written[RelPath("README.md")] is WHITEOUT
    assert result.written[RelPath("pkg")] is WHITEOUT


def test_runs_see_the_manifest_at_the_users_own_path(shadow, project: Path, mode: str) -> None:
    manifest = {RelPath("pkg/mod.py"): File(blob=shadow.store.make(b"VALUE = 42\n"), mode=0o644,
                                            mtime_ns=10**18)}  # fmt: skip
    code = "import os, pkg.mod; print(os.getcwd(), pkg.mod.__file__, pkg.mod.VALUE)"
    result = run_in_shadow(shadow, manifest, code, python=True, mode=mode)
    assert result.stdout.split() == [str(project), f"{project}/pkg/mod.py", "42"], result.stderr
    assert not (project / "pkg" / "__pycache__").exists()  # the import's cache stayed inside


# -- network ------------------------------------------------------------------------------------


def test_network_false_cannot_reach_host_loopback(shadow, mode: str) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        port = server.getsockname()[1]
        code = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5)"
        cut = run_in_shadow(shadow, {}, code, python=True, network=False, mode=mode)
        joined = run_in_shadow(shadow, {}, code, python=True, network=True, mode=mode)
    assert cut.exit_code != 0 and "ConnectionRefusedError" in cut.stderr
    assert joined.exit_code == 0, joined.stderr
    assert not cut.network and joined.network


# -- containment --------------------------------------------------------------------------------


def run_in_thread(**kwargs) -> tuple[threading.Thread, dict]:
    box: dict = {}
    thread = threading.Thread(target=lambda: box.setdefault("result", run_in_shadow(**kwargs)))
    thread.start()
    return thread, box


def test_timeout_kills_grandchildren(shadow, mode: str) -> None:
    marker = f"sk-{uuid.uuid4().hex[:12]}"
    script = (f"setsid bash -c 'exec -a {marker}-grandchild sleep 1000' & "
              f"nohup bash -c 'exec -a {marker}-child sleep 1000' & wait")  # fmt: skip
    thread, box = run_in_thread(shadow=shadow, manifest={}, command=script, timeout=3, mode=mode)
    sleepers = lambda: marked(marker, argv0=True)  # noqa: E731
    pids = wait_for(lambda: len(sleepers()) == 2 and sleepers(), 3, "both sleepers")
    thread.join(30)
    result = box["result"]
    assert result.timed_out and result.exit_code is None
    assert "timed out" in " ".join(result.notes)
    assert [pid for pid in pids if alive_with(pid, marker)] == []
    assert result.duration < 10


def test_cancel_kills_the_run_from_another_thread(shadow, mode: str) -> None:
    marker = f"sk-{uuid.uuid4().hex[:12]}"
    cancel = threading.Event()
    script = f"nohup bash -c 'exec -a {marker} sleep 1000' & wait"
    thread, box = run_in_thread(shadow=shadow, manifest={}, command=script, timeout=120,
                                mode=mode, cancel=cancel)  # fmt: skip
    [pid] = wait_for(lambda: marked(marker, argv0=True), 10, "the sleeper")
    cancel.set()
    thread.join(30)
    result = box["result"]
    assert result.cancelled and not result.timed_out and result.exit_code is None
    assert not result.ok and "cancelled" in " ".join(result.notes)
    assert not alive_with(pid, marker)
    assert result.duration < 30


def test_a_run_ends_with_its_main_process_and_takes_leftovers_along(shadow, mode: str) -> None:
    marker = f"sk-{uuid.uuid4().hex[:12]}"
    script = f"(setsid bash -c 'exec -a {marker} sleep 1000' &) ; echo started"
    result = run_in_shadow(shadow, {}, script, timeout=30, mode=mode)
    assert result.exit_code == 0 and not result.timed_out and result.duration < 10
    assert marked(marker) == {}


def test_fork_storm_is_contained(shadow, mode: str) -> None:
    marker = f"sk-{uuid.uuid4().hex[:12]}"
    storm = f"bash -c 'f() {{ f & f & wait; }}; f' {marker}"
    result = run_in_shadow(shadow, {}, storm, timeout=3, mode=mode, max_processes=64)
    assert result.timed_out
    assert any("process limit 64 reached" in note for note in result.notes), result.notes
    assert marked(marker) == {}
    assert result.duration < 15


def test_a_gigabyte_of_output_is_capped_without_memory_growth(shadow, mode: str) -> None:
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    result = run_in_shadow(shadow, {}, "head -c 1073741824 /dev/zero | tr '\\0' x; echo err >&2",
                           mode=mode, output_cap=2**20, timeout=120)  # fmt: skip
    peak_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    assert result.exit_code == 0
    assert result.stdout_truncated and result.stdout_bytes == 2**30
    assert len(result.stdout) < 2**20 + 200 and "bytes of output omitted" in result.stdout
    assert not result.stderr_truncated and result.stderr == "err\n"
    assert any("stdout truncated" in note for note in result.notes)
    assert peak_after - peak_before < 100 * 2**20


# -- what runs write ----------------------------------------------------------------------------

WRITE = """
set -e
echo new > new.txt
echo more >> README.md
rm docs/guide.txt
mkdir -p build/out && echo artifact > build/out/a.o
mv pkg/sub pkg/moved
chmod 700 run.sh
"""

READ_BACK = "cat new.txt README.md build/out/a.o; ls pkg; ls docs | wc -l; stat -c %a run.sh"


@pytest.mark.parametrize("later_mode", MODES)
def test_written_files_come_back_and_show_in_later_runs(shadow, project: Path, mode: str,
                                                        later_mode: str) -> None:  # fmt: skip
    before = snapshot(project)
    first = run_in_shadow(shadow, {}, WRITE, mode=mode)
    assert first.exit_code == 0, first.stderr
    written = first.written
    assert written[RelPath("docs/guide.txt")] is WHITEOUT
    assert isinstance(written[RelPath("new.txt")], File)
    assert written[RelPath("pkg/sub")] is WHITEOUT and RelPath("pkg/moved") in written

    later = run_in_shadow(shadow, patched({}, written), READ_BACK, mode=later_mode)
    assert later.stdout.split() == ["new", "#", "demo", "more", "artifact",
                                    "__init__.py", "mod.py", "moved", "0", "700"], later.stderr  # fmt: skip
    assert later.written == {}
    assert snapshot(project) == before


# -- a real project's test suite ----------------------------------------------------------------

LIBRARY = {
    "minilib/__init__.py": '"""A tiny library."""\nfrom .core import slug, chunks\n',
    "minilib/core.py": (
        "import re\n\n"
        "def slug(text):\n    return re.sub(r'[^a-z0-9]+', '-', text.lower()).strip('-')\n\n"
        "def chunks(items, n):\n    return [items[i:i + n] for i in range(0, len(items), n)]\n"
    ),
    "minilib/data/words.txt": "alpha\nbeta\n",
    "pyproject.toml": '[project]\nname = "minilib"\nversion = "0.1"\n',
    "tests/test_core.py": (
        "import os, pathlib, pytest, minilib\n\n"
        "def test_slug():\n    assert minilib.slug('Hello, World!') == 'hello-world'\n\n"
        "@pytest.mark.parametrize('n', [1, 2, 3])\n"
        "def test_chunks(n):\n    assert sum(minilib.chunks(list(range(7)), n), []) == list(range(7))\n\n"
        "def test_package_data():\n"
        "    here = pathlib.Path(minilib.__file__).parent\n"
        "    assert (here / 'data' / 'words.txt').read_text().split() == ['alpha', 'beta']\n\n"
        "def test_writes_into_the_project():\n"
        "    pathlib.Path('out.txt').write_text('x')\n    assert os.path.exists('out.txt')\n\n"
        "@pytest.mark.skip(reason='demo')\ndef test_skipped():\n    pass\n\n"
        "@pytest.mark.xfail(strict=True)\ndef test_known_bug():\n    assert minilib.slug('a_b') == 'a_b'\n\n"
        "def test_fails_on_purpose():\n    assert minilib.chunks([1], 1) == [[2]]\n"
    ),
}


def outcome_lines(output: str) -> list[str]:
    lines = [line for line in output.splitlines()
             if line.split(" ", 1)[0] in {"PASSED", "FAILED", "SKIPPED", "XFAIL", "ERROR"}]  # fmt: skip
    summary = output.strip().splitlines()[-1]
    return sorted(lines) + [summary.rsplit(" in ", 1)[0]]


def test_a_library_test_suite_passes_identically_natively_and_in_a_run(
    tmp_path: Path, mode: str
) -> None:
    from shadowkernel.overlay.shadow import Shadow

    library = tmp_path / "minilib"
    for rel, text in LIBRARY.items():
        (library / rel).parent.mkdir(parents=True, exist_ok=True)
        (library / rel).write_text(text)
    native_copy = tmp_path / "native"
    shutil.copytree(library, native_copy)
    before = snapshot(library)
    pytest_argv = [sys.executable, "-m", "pytest", "-rA", "-p", "no:randomly", "tests"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = "."  # __pycache__ writes on: they must stay in the shadow
    native = subprocess.run(pytest_argv, cwd=native_copy, capture_output=True, text=True, env=env)
    with Shadow(library) as lib_shadow:
        inside = run_in_shadow(lib_shadow, {}, pytest_argv, mode=mode, timeout=120, env=env)
    assert native.returncode == inside.exit_code == 1  # one test fails on purpose
    assert outcome_lines(inside.stdout) == outcome_lines(native.stdout)
    assert "1 failed, 6 passed, 1 skipped, 1 xfailed" in outcome_lines(native.stdout)[-1]
    assert RelPath("out.txt") in inside.written
    assert any(p.startswith("minilib/__pycache__/") for p in inside.written)
    assert snapshot(library) == before  # no __pycache__, .pytest_cache or out.txt leaked


# -- kept overlayfs views -----------------------------------------------------------------------


@pytest.fixture
def own(tmp_path: Path) -> Iterator[tuple[Path, object]]:
    """A project with a shadow of its own, so the views kept are this test's alone."""
    from shadowkernel.overlay.shadow import Shadow

    project = make_project(tmp_path / "project")
    with Shadow(project) as sh:
        yield project, sh


def view_mounts(project: Path) -> list[str]:
    """Mount points of the views kept of `project` (their options name it as lowerdir)."""
    with open("/proc/self/mountinfo") as f:
        lines = [line.split() for line in f]
    return [fields[4] for fields in lines
            if fields[4].startswith(views_home()) and f"lowerdir={project}," in fields[-1]]  # fmt: skip


def overlay_run(sh, manifest, script: str, **options):
    result = run_in_shadow(sh, manifest, script, mode="overlayfs", **options)
    assert result.exit_code == 0 or result.timed_out, result.stderr
    return result


def absorbed(manifest, written) -> dict:
    """The branch's next manifest, as Branch keeps it (a removal becomes a whiteout)."""
    return {**manifest, **{p: WHITEOUT if o is None else o for p, o in written.items()}}


def test_a_branch_keeps_its_view_and_is_told_only_each_runs_own_writes(own) -> None:
    project, sh = own
    first = overlay_run(sh, {}, "echo one > new.txt; echo more >> README.md")
    assert sorted(first.written) == ["README.md", "new.txt"]
    [mounted] = view_mounts(project)
    branch = absorbed({}, first.written)
    second = overlay_run(sh, branch, "cat new.txt; tail -1 README.md; echo two > b.txt; rm new.txt")
    assert second.stdout.split() == ["one", "more"]
    assert second.written == {RelPath("b.txt"): second.written["b.txt"], RelPath("new.txt"): None}
    branch = absorbed(branch, second.written)  # new.txt now a whiteout where nothing shows
    third = overlay_run(sh, branch, "ls new.txt b.txt 2>&1; tail -1 README.md")
    assert third.stdout.split()[-2:] == ["b.txt", "more"] and "new.txt" in third.stdout
    assert third.written == {}
    assert view_mounts(project) == [mounted]  # one view all along


def test_branches_alternating_on_one_shadow_each_see_only_their_own_state(own) -> None:
    project, sh = own
    state: dict[str, dict] = {"a": {}, "b": {}}
    for turn in range(3):
        for name in ("a", "b"):
            script = f"mkdir -p out; ls out; echo {name} > out/{name}{turn}"
            result = overlay_run(sh, state[name], script)
            assert result.stdout.split() == [f"{name}{i}" for i in range(turn)]
            assert sorted(result.written) == ["out", f"out/{name}{turn}"][turn > 0 :]
            state[name] = absorbed(state[name], result.written)
    assert len(view_mounts(project)) == 2  # one each, kept across the turns


def test_a_run_cannot_reach_other_views_or_their_upper_layers(own) -> None:
    project, sh = own
    secret = f"secret-{uuid.uuid4().hex}"
    overlay_run(sh, {}, f"echo {secret} > a.txt")  # kept, holding a.txt
    assert len(view_mounts(project)) == 1
    snoop = overlay_run(sh, {RelPath("b.txt"): WHITEOUT}, f"ls -A {views_home()} | wc -l; "
                        f"grep -rl {secret} {os.path.dirname(views_home())} | wc -l")  # fmt: skip
    assert snoop.stdout.split() == ["0", "0"], snoop.stderr


def test_a_changed_manifest_gets_a_view_showing_it(own) -> None:
    project, sh = own
    staged = lambda text: {RelPath("pkg/mod.py"): File(  # noqa: E731
        blob=sh.store.make(text), mode=0o644, mtime_ns=10**18)}  # fmt: skip
    first = overlay_run(sh, staged(b"V = 1\n"), "cat pkg/mod.py; echo x > run.txt")
    second = overlay_run(sh, staged(b"V = 2\n"), "cat pkg/mod.py; ls run.txt 2>&1 || true")
    assert first.stdout == "V = 1\n"
    assert second.stdout.startswith("V = 2\n") and "No such file" in second.stdout
    assert second.written == {}


def test_names_the_user_changes_show_in_the_next_run(own) -> None:
    project, sh = own
    look = "cat README.md; cat docs/new.txt 2>&1; ls docs; true"
    assert overlay_run(sh, {}, look).stdout.startswith("# demo\n")
    (project / "README.md.tmp").write_text("# saved\n")
    os.rename(project / "README.md.tmp", project / "README.md")  # an editor's save
    (project / "docs/new.txt").write_text("fresh\n")
    assert overlay_run(sh, {}, look).stdout == "# saved\nfresh\nguide.txt\nnew.txt\n"


def test_a_run_killed_at_its_timeout_leaves_nothing_for_the_next(own) -> None:
    project, sh = own
    killed = overlay_run(sh, {}, "echo half > half.txt; sleep 60", timeout=1)
    assert killed.timed_out and RelPath("half.txt") in killed.written
    assert view_mounts(project) == []  # given up: processes being killed may still write
    later = overlay_run(sh, absorbed({}, killed.written), "cat half.txt")
    assert later.stdout == "half\n" and later.written == {}


def test_closing_the_shadow_unmounts_its_views(tmp_path: Path) -> None:
    from shadowkernel.overlay.shadow import Shadow

    project = make_project(tmp_path / "project")
    with Shadow(project) as sh:
        overlay_run(sh, {}, "echo a > a.txt")
        overlay_run(sh, {}, "echo b > b.txt")
        kept = view_mounts(project)
        assert len(kept) == 2
    assert view_mounts(project) == []
    assert not any(os.path.exists(os.path.dirname(m)) for m in kept)


def test_views_of_a_killed_process_are_cleared(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    code = (
        "import os, signal, sys\n"
        "from shadowkernel.overlay.shadow import Shadow\n"
        "from shadowkernel.run import run_in_shadow\n"
        "sh = Shadow(sys.argv[1])\n"
        "print(run_in_shadow(sh, {}, 'true', mode='overlayfs').exit_code, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    child = subprocess.run([sys.executable, "-c", code, str(project)], capture_output=True,
                           text=True, timeout=60)  # fmt: skip
    assert child.stdout == "0\n" and child.returncode == -9, child.stderr
    [left] = view_mounts(project)
    assert views.clear_stale(views_home()) == [os.path.dirname(left)]
    assert view_mounts(project) == [] and not os.path.exists(os.path.dirname(left))
    mounts.clear_stale()  # the child's FUSE mount, too
