"""Runs of a workspace: a branch's version plus its scratch layer, never the user's folder, and
never in diff() or accept(); runs of different branches at once and beside lints, one
branch's runs in turn, and cancellation (an event, an interrupt, asyncio, a closed workspace)
that leaves none of the run's processes behind, checked by pid."""

from __future__ import annotations

import asyncio
import signal
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from overlay_helpers import needs_fuse, snapshot
from run_helpers import Gate, alive_with, marked, wait_for

import shadowkernel as sk
from shadowkernel.errors import ClosedError

pytestmark = [needs_fuse, pytest.mark.timeout(180)]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg/mod.py").write_text("X = 1\n")
    return root


@pytest.fixture
def ws(project: Path) -> Iterator[sk.Workspace]:
    with sk.Workspace(project, servers=["ruff"]) as workspace:
        yield workspace


def test_runs_see_the_branch_and_keep_their_writes_in_scratch(ws: sk.Workspace) -> None:
    before = snapshot(Path(ws.root))
    a = ws.branch("a")
    a.write("pkg/mod.py", "X = 2\n")
    result = a.run("cat pkg/mod.py && echo built > out.txt", network=True)
    assert result.ok, result.stderr
    assert result.stdout == "X = 2\n"
    assert "out.txt" in result.written
    assert a.run("cat out.txt", network=True).stdout == "built\n"  # scratch: seen by later runs
    assert "out.txt" not in a.diff() and "out.txt" not in a.files  # ...but no edit
    b = ws.branch("b")
    other = b.run("cat pkg/mod.py; test -e out.txt || echo absent", network=True)
    assert other.stdout == "X = 1\nabsent\n"  # other branches see neither
    a.write("pkg/mod.py", "X = 3\n")
    assert a.run("cat pkg/mod.py", network=True).stdout == "X = 3\n"
    assert list(a.lint()["code"]) == []  # lints after runs still see exactly the version
    assert snapshot(Path(ws.root)) == before
    runs = [e for e in ws.timeline().events if e.kind == "run"]
    assert len(runs) == 4 and all(e.ok for e in runs)
    assert runs[0].outcome.startswith("exit 0, 1 file written")


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("env", {"FOO": 1}, r"env: the entry 'FOO': 1 is not a variable; give a dict of str"),
        ("env", ["FOO=1"], r"env=\['FOO=1'\]: give a dict of str to str"),
        ("max_memory", "lots", r"max_memory='lots': give the bytes of memory .*an int >= 1"),
        ("max_memory", -5, r"max_memory=-5: give the bytes of memory"),
        ("max_memory", 2.5e9, r"max_memory=2500000000.0: give the bytes of memory"),
        ("max_processes", "x", r"max_processes='x': give the most processes"),
        ("max_disk", "abc", r"max_disk='abc': give the bytes of each of the run's throwaway"),
        ("max_disk", 0, r"max_disk=0: give the bytes"),
        ("output_cap", -1, r"output_cap=-1: give the bytes of each stream to keep"),
        ("output_cap", "10", r"output_cap='10': give the bytes of each stream to keep"),
        ("cancel", True, r"cancel=True: give a threading.Event"),
        ("writable", "/opt", r"writable='/opt': give a list of absolute paths of directories, "
         r"e.g. \['/opt'\]"),
        ("writable", [3], r"writable: 3 is not a path"),
        ("on_output", 5, r"on_output=5: give a function on_output\(stream, chunk\)"),
        ("python", "yes", r"python='yes': give True or False"),
        ("sandbox", 0, r"sandbox=0: give True or False"),
        ("cwd", 3, r"cwd=3: give a path relative to the workspace"),
        ("mode", 3, r"mode=3: give one of 'auto', 'fuse', 'overlayfs'"),
    ],
)  # fmt: skip
def test_run_options_are_checked_before_anything_runs(
    ws: sk.Workspace, option: str, value: object, message: str
) -> None:
    a = ws.branch("options")
    with pytest.raises(sk.ArgumentError, match=message):
        a.run("echo ran > ran.txt", **{option: value})
    assert a.scratch() == [] and not [e for e in ws.timeline().events if e.kind == "run"]


def test_a_command_past_the_kernels_argument_limit_is_an_argument_error(ws: sk.Workspace) -> None:
    """Linux takes at most 128 KiB in one argument (E2BIG past it): said before the run."""
    a = ws.branch("long")
    body = "x" * 140_000
    with pytest.raises(sk.ArgumentError, match="140[0-9]{3} bytes.*write\\(\\)"):
        a.run(f"cat > gen.txt <<'EOF'\n{body}\nEOF\n", network=True)
    with pytest.raises(sk.ArgumentError, match="bytes"):
        a.run(["echo", body], network=True)
    assert not [e for e in ws.timeline().events if e.kind == "run"]


def test_run_options_that_work_stay_accepted(ws: sk.Workspace) -> None:
    heard: list[bytes] = []
    result = ws.branch("good-options").run(
        "echo $FOO", network=True, env={"FOO": "bar", "PATH": "/usr/bin:/bin"}, cancel=None,
        output_cap=0, max_memory=2**30, max_processes=64, max_disk=2**28, writable=(),
        on_output=lambda stream, chunk: heard.append(chunk),
    )  # fmt: skip
    assert result.ok and "4 bytes of output omitted (cap 0 bytes)" in result.stdout
    assert b"".join(heard) == b"bar\n"


def test_a_failing_run_is_a_result_not_an_error(ws: sk.Workspace) -> None:
    a = ws.branch("fail")
    result = a.run("echo oops >&2; exit 3", network=True)
    assert result.exit_code == 3 and "oops" in result.stderr


def test_a_run_that_deletes_a_staged_file_deletes_it_for_later_runs(ws: sk.Workspace) -> None:
    a = ws.branch("deleter")
    a.write("pkg/new.py", "Y = 1\n")  # staged, not in the user's folder
    a.write("pkg/mod.py", "X = 5\n")  # staged over a user file
    assert a.run("rm pkg/new.py pkg/mod.py", network=True).ok
    after = a.run(
        "test -e pkg/new.py || echo new-gone; test -e pkg/mod.py || echo mod-gone", network=True
    )
    assert after.stdout == "new-gone\nmod-gone\n"
    assert "pkg/new.py" in a.files  # the edit itself stays staged: runs write scratch only


# -- runs beside each other and beside lints, and their cancellation ---------------------------


def spawn(call: Callable[..., sk.RunResult], *args: Any, **kwargs: Any) -> Future[sk.RunResult]:
    """`call(*args, **kwargs)` in a thread of its own, as an agent thread would call it."""
    pool = ThreadPoolExecutor(1)
    future = pool.submit(call, *args, **kwargs)
    pool.shutdown(wait=False)
    return future


@pytest.fixture
def gate() -> Iterator[Gate]:
    held = Gate()
    yield held
    held.close()


def sleepers(marker: str) -> str:
    """A run that leaves two processes waiting (found in /proc by `marker`) and waits itself."""
    return (f"bash -c 'exec -a {marker}-x sleep 1000' & bash -c 'exec -a {marker}-y sleep 1000' "
            "& wait")  # fmt: skip


def running_tree(marker: str) -> dict[int, str]:
    """Once both sleepers run: every process of the run (bwrap, its shell, the sleepers)."""
    wait_for(lambda: len(marked(marker, argv0=True)) == 2, 60, "both sleepers")
    return marked(marker)


def alive(tree: dict[int, str], marker: str) -> list[int]:
    return [pid for pid in tree if alive_with(pid, marker)]


@pytest.mark.parametrize("mode", ["auto", "documents"])
def test_runs_of_different_branches_overlap_each_other_and_lints(
    project: Path, gate: Gate, mode: str
) -> None:
    with sk.Workspace(project, servers=["ruff"], max_runs=3, mode=mode) as ws:
        linted = ws.branch("linted")
        linted.write("pkg/mod.py", "import os\n")
        names = ["a", "b", "c"]
        runs = [spawn(ws.branch(n).run, gate.code(n), python=True, network=True) for n in names]
        gate.wait(*names, runs=runs)  # three runs hold their processes at once
        lints = linted.lint()  # and a lint is served meanwhile
        gate.open()
        results = [run.result(timeout=120) for run in runs]
        events = ws.timeline().events
    assert list(lints["code"]) == ["F401"]
    assert [r.stdout for r in results] == ["a\n", "b\n", "c\n"], [r.stderr for r in results]
    served = [e for e in events if e.kind == "run"]
    lint = next(e for e in events if e.kind == "lint")
    assert len(served) == 3 and all(e.ok and e.lane == -1 for e in served)
    assert max(e.started for e in served) < min(e.finished for e in served)  # all overlap
    assert all(e.started < lint.started and lint.finished < e.finished for e in served)
    assert "in a view of its own" in "\n".join(served[0].describe())


def test_runs_of_one_branch_go_in_turn_and_each_sees_what_the_last_wrote(
    ws: sk.Workspace, gate: Gate
) -> None:
    a = ws.branch("a")
    first = spawn(a.run, f"open('out.txt', 'w').write('one'); {gate.code('first')}",
                  python=True, network=True)  # fmt: skip
    gate.wait("first", runs=[first])
    second = spawn(a.run, "cat out.txt", network=True)  # asked while the first still runs
    wait_for(lambda: len(ws.run_queue) == 2, 60, "the second run queued")
    gate.open()
    assert first.result(timeout=120).ok
    later = second.result(timeout=120)
    assert later.stdout == "one", later.stderr  # it started after the first's writes landed
    assert later.queue_seconds > 0
    done, waited = [e for e in ws.timeline().events if e.kind == "run"]
    assert waited.started >= done.finished and waited.wait == later.queue_seconds


def test_an_edit_staged_during_a_run_wins_over_what_the_run_wrote(
    ws: sk.Workspace, gate: Gate
) -> None:
    a = ws.branch("a")
    code = ("open('pkg/mod.py', 'w').write('X = run\\n'); open('out.txt', 'w').write('kept'); "
            f"{gate.code('writer')}")  # fmt: skip
    run = spawn(a.run, code, python=True, network=True)
    gate.wait("writer", runs=[run])  # it wrote both files and waits
    a.write("pkg/mod.py", "X = staged\n")
    gate.open()
    assert set(run.result(timeout=120).written) == {"pkg/mod.py", "out.txt"}
    later = a.run("cat pkg/mod.py out.txt", network=True)
    assert later.stdout == "X = staged\nkept"  # the staged edit, and the run's other write


def test_cancel_kills_a_running_runs_whole_process_tree(ws: sk.Workspace) -> None:
    marker, cancel = f"sk-{uuid.uuid4().hex[:12]}", threading.Event()
    run = spawn(ws.branch("a").run, sleepers(marker), network=True, timeout=600, cancel=cancel)
    tree = running_tree(marker)
    assert len(tree) >= 3  # the sandbox, its shell and the two sleepers, by pid
    cancel.set()
    result = run.result(timeout=60)
    assert result.cancelled and result.exit_code is None and not result.ok
    assert alive(tree, marker) == []
    [event] = [e for e in ws.timeline().events if e.kind == "run"]
    assert event.outcome.startswith("cancelled")


def test_a_queued_run_is_cancelled_before_it_starts(project: Path, gate: Gate) -> None:
    with sk.Workspace(project, servers=["ruff"], max_runs=1) as ws:
        holder = spawn(ws.branch("a").run, gate.code("a"), python=True, network=True)
        gate.wait("a", runs=[holder])
        cancel = threading.Event()
        queued = spawn(ws.branch("b").run, gate.code("b"), python=True, network=True,
                       cancel=cancel)  # fmt: skip
        wait_for(lambda: len(ws.run_queue) == 2, 60, "the second run queued")
        cancel.set()
        result = queued.result(timeout=60)
        gate.open()
        assert holder.result(timeout=120).ok
        events = {e.branch: e for e in ws.timeline().events if e.kind == "run"}
    assert result.cancelled and result.exit_code is None and result.stdout == ""
    assert result.notes == ("cancelled while queued: nothing ran",) and "b" not in gate.arrived
    assert result.queue_seconds > 0 and events["b"].outcome.startswith("cancelled")


@pytest.fixture
def sigint_raises() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt, as in a kernel, even where pytest started with it
    ignored (a background job of a shell without job control)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.mark.usefixtures("sigint_raises")
def test_an_interrupt_in_the_caller_kills_the_run(ws: sk.Workspace) -> None:
    marker, main, found = f"sk-{uuid.uuid4().hex[:12]}", threading.main_thread().ident, {}

    def interrupt() -> None:  # what Jupyter's interrupt does: SIGINT to the kernel's main thread
        found.update(running_tree(marker))
        signal.pthread_kill(main, signal.SIGINT)  # type: ignore[arg-type]

    threading.Thread(target=interrupt, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        ws.branch("a").run(sleepers(marker), network=True, timeout=600)
    wait_for(lambda: alive(found, marker) == [], 30, "the run's processes to be gone")
    assert len(found) >= 3


def test_cancelling_an_awaited_run_kills_it(ws: sk.Workspace) -> None:
    """What the MCP server does when a client cancels or goes away: asyncio cancellation."""
    marker, a = f"sk-{uuid.uuid4().hex[:12]}", ws.branch("a")

    async def cancel_while_running() -> dict[int, str]:
        task = asyncio.create_task(a.run_async(sleepers(marker), network=True, timeout=600))
        tree = await asyncio.to_thread(running_tree, marker)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return tree

    tree = asyncio.run(cancel_while_running())
    wait_for(lambda: alive(tree, marker) == [], 30, "the run's processes to be gone")
    assert a.run("echo next", network=True).stdout == "next\n"  # the branch's turn was given back


def test_closing_the_workspace_kills_its_runs_running_or_queued(project: Path) -> None:
    ws = sk.Workspace(project, servers=["ruff"], max_runs=1)
    marker = f"sk-{uuid.uuid4().hex[:12]}"
    running = spawn(ws.branch("a").run, sleepers(marker), network=True, timeout=600)
    tree = running_tree(marker)
    queued = spawn(ws.branch("b").run, "echo never", network=True)
    wait_for(lambda: len(ws.run_queue) == 2, 60, "the second run queued")
    ws.close()  # returns once the runs are gone
    assert alive(tree, marker) == []
    for run in (running, queued):
        with pytest.raises(ClosedError, match="closed while"):
            run.result(timeout=60)


def test_dropping_a_branch_cancels_its_runs(ws: sk.Workspace) -> None:
    marker, a = f"sk-{uuid.uuid4().hex[:12]}", ws.branch("a")
    run = spawn(a.run, sleepers(marker), network=True, timeout=600)
    tree = running_tree(marker)
    a.drop()
    assert run.result(timeout=60).cancelled
    assert alive(tree, marker) == []
