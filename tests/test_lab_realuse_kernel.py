"""Agents in the shadowkernel kernel as a class meets them, through jupyter_client.

A teacher starts agents with `start_agent`, follows them with `%timeline`, and stops
following with the kernel's interrupt (JupyterLab's stop button): every agent keeps running
and the kernel still counts it. A teacher who closes (or re-opens) the shadow while agents
run sees one line per agent saying why it stopped, never interleaved tracebacks.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kernel_helpers import Kernel, Outcome, copy_sample, kernel
from overlay_helpers import HAS_FUSE

pytestmark = [
    pytest.mark.timeout(240),
    pytest.mark.skipif(not HAS_FUSE, reason="the shadowkernel kernel needs /dev/fuse"),
]

MIME = "application/vnd.shadowkernel.timeline+json"


@pytest.fixture
def k(tmp_path: Path) -> Iterator[Kernel]:
    project = copy_sample(tmp_path / "project")
    with kernel() as running:
        running.ok(f"%shadow open {project} --servers ruff --in-memory")
        yield running


def test_interrupting_a_following_timeline_leaves_every_agent_running(k: Kernel) -> None:
    k.ok(
        "import threading\n"
        "stop = threading.Event()\n"
        "agents = [start_agent(stop.wait, name=n) for n in ('a', 'b')]"
    )
    msg_id = k.client.execute("%timeline", stop_on_error=False)
    seen = []
    while not any(m["msg_type"] == "display_data" for m in seen):  # it follows from here on
        message = k.client.get_iopub_msg(timeout=60)
        if message["parent_header"].get("msg_id") == msg_id:
            seen.append(message)
    k.manager.interrupt_kernel()  # JupyterLab's stop button
    reply = k.client.get_shell_msg(timeout=60)
    assert reply["parent_header"]["msg_id"] == msg_id
    outcome = Outcome(reply, seen + k.iopub_until_idle(msg_id))
    assert outcome.status == "ok", [
        m["content"] for m in outcome.messages if m["msg_type"] == "error"
    ]
    assert outcome.stdout == "stopped following the timeline; 2 agent(s) keep running\n"
    # Both agents still run, and the kernel still counts them (the status line, %timeline).
    assert k.value("[t.is_alive() for t in agents]") == "[True, True]"
    assert "2 agent(s) running" in k.ok("%shadow status").stdout
    k.ok("stop.set()\nfor t in agents: t.join()")
    assert "0 agent(s) running" in k.ok("%shadow status").stdout


def test_agents_stopped_by_closing_the_shadow_say_so_in_one_line(k: Kernel) -> None:
    k.ok(
        "import itertools\n"
        "def busy(branch):\n"
        "    for i in itertools.count():\n"
        "        branch.write('inventory/extra.py', f'x = {i}\\n')\n"
        "agents = [start_agent(busy, ws.branch(n), name=n) for n in ('a', 'b')]"
    )
    closed = k.ok("%shadow close")
    ended = k.ok("for t in agents: t.join()")
    stderr = closed.stderr + ended.stderr
    assert "Traceback" not in stderr, stderr
    lines = sorted(stderr.splitlines())
    assert len(lines) == 2, stderr
    for line, name in zip(lines, ("a", "b"), strict=True):
        assert line.startswith(f"agent {name!r} stopped: ClosedError: "), stderr
