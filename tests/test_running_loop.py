"""A workspace whose services run on the caller's event loop (`loop="running"`), as an async
agent host opens it: on a real library with a real ruff and a real FUSE mount, every answer is
its own branch's, the synchronous API is refused where it would block the loop (and nothing is
lost by the refusal), other threads still use it, cancelling an awaited run kills it, and
closing (`async with`, `aclose`, or after the loop ended) leaves no server or mount behind."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import threading
import uuid
from pathlib import Path

import pytest
from kernel_helpers import alive
from overlay_helpers import needs_fuse
from run_helpers import alive_with, marked, wait_for

import shadowkernel as sk
from shadowkernel.errors import ArgumentError, ClosedError, ShadowError
from shadowkernel.lsp import available_servers
from shadowkernel.overlay import mounts

FILE = "more_itertools/recipes.py"
ERROR = re.compile(r"undefined_b(\d+)_(\d+)")

pytestmark = [
    needs_fuse,
    pytest.mark.skipif(not available_servers().get("ruff"), reason="ruff missing"),
]


def with_error(base: str, agent: int, step: int) -> str:
    lines = base.splitlines(keepends=True)
    places = [i for i, x in enumerate(lines) if x.startswith("def ")]
    lines.insert(places[agent * 3 % len(places)], f"zz = undefined_b{agent}_{step}\n")
    return "".join(lines)


def loop_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "shadowkernel-loop"]


def leftovers(servers: list[int], mountpoints: list[str]) -> tuple[list[int], set[str]]:
    """Servers still alive and shadows still mounted, of those given."""
    return [p for p in servers if alive(p)], set(mountpoints) & set(mounts.shadow_mounts())


def test_agents_on_the_running_loop_each_get_their_own_branchs_lints(library: Path) -> None:
    n, edits, base = 6, 4, (library / FILE).read_text()
    threads_before = loop_threads()

    async def host() -> tuple[list[tuple[int, int, set[tuple[int, int]], bool]], dict, list]:
        async with sk.Workspace(library, servers=["ruff"], state=None, loop="running") as ws:
            assert loop_threads() == threads_before  # no thread of its own
            branches = [ws.branch(f"agent-{i}") for i in range(n)]

            async def agent(i: int) -> list[tuple[int, int, set[tuple[int, int]], bool]]:
                seen = []
                for step in range(edits):
                    branches[i].write(FILE, with_error(base, i, step))
                    if step % 2:
                        table = await branches[i].lint_async([FILE], fixes=False)
                        messages, new = list(table["message"]), set(table[table["new"]]["message"])
                    else:
                        report = await branches[i].lint_report_async([FILE], fixes=False)
                        messages = [lint.message for lint in report.lints]
                        new = {lint.message for lint in report.only_new().lints}
                    errors = {(int(a), int(s)) for m in messages for a, s in ERROR.findall(m)}
                    seen.append((i, step, errors, any(f"_b{i}_{step}`" in m for m in new)))
                return seen

            answers = [a for per in await asyncio.gather(*(agent(i) for i in range(n)))
                       for a in per]  # fmt: skip
            return answers, ws.statistics(), [e for e in ws.events() if e.op == "lint"]

    answers, statistics, events = asyncio.run(host())
    assert len(answers) == n * edits == len(events)
    for i, step, errors, new in answers:
        assert errors == {(i, step)} and new, (i, step, errors, new)
    assert all(e.ok and e.new_lints == 1 for e in events)
    servers = [lane["ruff"].pid for lane in statistics["servers"]]
    assert servers and not [p for p in servers if p is None or alive(p)]  # closed with the block


def test_the_sync_api_is_refused_on_the_loop_and_works_from_other_threads(project: Path) -> None:
    async def host() -> None:
        ws = sk.Workspace(project, servers=["ruff"], state=None, loop="running")
        a = ws.branch("a")
        a.write("pkg/util.py", "import os\n")
        with pytest.raises(ShadowError, match="_async methods"):
            a.lint()
        with pytest.raises(ShadowError, match=r"aclose\(\)"):
            ws.close()
        # Neither refusal lost anything: the workspace still serves, the branch still lints.
        assert not ws.closed
        report = await a.lint_report_async(["pkg/util.py"])
        assert [(x.code, x.line) for x in report.lints] == [("F401", 1)]
        table = await asyncio.to_thread(a.lint, ["pkg/util.py"])  # another thread: it waits
        assert list(table["code"]) == ["F401"]
        mountpoints = [s.mountpoint for s in ws.shadows]
        servers = [lane["ruff"].pid for lane in ws.statistics()["servers"]]
        await ws.aclose()
        assert ws.closed and leftovers(servers, mountpoints) == ([], set())
        with pytest.raises(ClosedError):
            await a.lint_report_async(["pkg/util.py"])

    asyncio.run(host())


def test_opening_without_a_running_loop_or_with_another_loop_name_is_refused(
    project: Path,
) -> None:
    threads = loop_threads()
    with pytest.raises(ArgumentError, match="none runs here"):
        sk.Workspace(project, servers=["ruff"], state=None, loop="running")
    with pytest.raises(ArgumentError, match="loop='mine'"):
        sk.Workspace(project, servers=["ruff"], state=None, loop="mine")
    assert loop_threads() == threads  # refused before anything started


def test_cancelling_an_awaited_run_on_the_running_loop_kills_it(project: Path) -> None:
    marker = f"sk-{uuid.uuid4().hex[:12]}"
    sleepers = (f"bash -c 'exec -a {marker}-x sleep 1000' & bash -c 'exec -a {marker}-y "
                "sleep 1000' & wait")  # fmt: skip

    async def host() -> tuple[dict[int, str], str]:
        async with sk.Workspace(project, servers=["ruff"], state=None, loop="running") as ws:
            a = ws.branch("a")
            task = asyncio.create_task(a.run_async(sleepers, network=True, timeout=600))
            await asyncio.to_thread(
                wait_for, lambda: len(marked(marker, argv0=True)) == 2, 60, "both sleepers"
            )
            tree = marked(marker)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await asyncio.to_thread(
                wait_for, lambda: not [p for p in tree if alive_with(p, marker)], 30,
                "the run's processes to be gone",
            )  # fmt: skip
            return tree, (await a.run_async("echo next", network=True)).stdout

    tree, after = asyncio.run(host())
    assert tree and after == "next\n"  # the branch's turn was given back


def servers_of_this_process() -> list[int]:
    """Language servers (ruff) this process started, still running."""
    found = []
    for entry in os.listdir("/proc"):
        with contextlib.suppress(OSError):
            stat = Path(f"/proc/{entry}/stat").read_text()
            name, fields = stat[stat.index("(") + 1 : stat.rindex(")")], stat.rsplit(") ", 1)[1]
            if name == "ruff" and int(fields.split()[1]) == os.getpid() and fields[0] != "Z":
                found.append(int(entry))
    return found


@pytest.mark.parametrize("ends", ["after a lint", "as its servers start"])
def test_a_workspace_left_open_when_its_loop_ended_closes_without_it(
    project: Path, ends: str
) -> None:
    """The host's `asyncio.run` returns (before Python 3.12.8 it cancelled the task
    connecting a starting server's pipes and then waited for ever: `lsp/process.py`), and
    closing afterwards waits on no loop and leaves no server or mount behind."""

    async def host() -> sk.Workspace:
        ws = sk.Workspace(project, servers=["ruff"], state=None, loop="running")
        opened.append(ws)
        a = ws.branch("a")
        a.write("pkg/util.py", "import os\n")
        if ends == "as its servers start":
            await asyncio.sleep(0)  # the starts run up to their first wait
            raise RuntimeError("the host failed")
        await a.lint_report_async(["pkg/util.py"])
        return ws

    opened: list[sk.Workspace] = []
    try:
        asyncio.run(host())  # the loop ends with the workspace open
    except RuntimeError as error:
        assert str(error) == "the host failed"
    ws, mountpoints = opened[0], [s.mountpoint for s in opened[0].shadows]
    with pytest.raises(ClosedError, match="has stopped"):
        ws.branches["a"].lint()
    ws.close()  # no loop runs its shutdown: it must not wait for one
    assert ws.closed
    assert not set(mountpoints) & set(mounts.shadow_mounts())
    wait_for(lambda: not servers_of_this_process(), 30, "the servers to end")
