"""Kernel lifecycle with a real shadow: interrupting a run, restarting, `%load_ext`.

Each test starts its own kernel (restarts and interrupts must not disturb other tests).
Leftovers are checked the way a user would: /proc/self/mountinfo for the shadow's mount,
/proc for the language server and overlay processes.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest
from kernel_helpers import (
    RECEIVERS,
    Kernel,
    Outcome,
    alive,
    copy_sample,
    interrupt,
    kernel,
    shadow_mounts,
)
from overlay_helpers import needs_fuse
from waiting import wait_for

pytestmark = [needs_fuse, pytest.mark.timeout(180)]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return copy_sample(tmp_path / "project")


def _open_and_lint(k: Kernel, project: Path) -> dict:
    k.ok(f"%shadow open {project} --servers ruff --mode fuse\n%branch new a")
    assert "F401" in k.ok("%lint a inventory/stock.py").data("text/html")[0]
    return ast.literal_eval(
        k.value(
            "{'mount': ws.shadows[0].mountpoint, 'overlay': ws.shadows[0]._process.pid, "
            "'servers': [s.pid for s in ws.statistics()['servers'][0].values()]}"
        )
    )


def _assert_nothing_left(shadow: dict) -> None:
    wait_for(lambda: shadow["mount"] not in shadow_mounts(), 20, "the shadow to be unmounted")
    for pid in [shadow["overlay"], *shadow["servers"]]:
        wait_for(lambda pid=pid: not alive(pid), 20, f"process {pid} to exit")


@pytest.mark.parametrize("receiver", RECEIVERS)
def test_interrupt_kills_the_run_it_started(project: Path, receiver: str) -> None:
    with kernel() as k:
        k.ok(f"%shadow open {project} --servers ruff\n%branch new a")
        # stop_on_error=False: else ipykernel aborts what arrives just after the interrupted
        # cell's reply, and on a loaded machine the next cell below can arrive that soon.
        msg_id = k.client.execute(
            "%%shadow_run a --timeout 120\necho started so far; sleep 97", stop_on_error=False
        )

        def the_run() -> list[int]:
            pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
            return [p for p in pids if _cmdline(p) == "sleep\x0097\x00"]

        sleeper = wait_for(the_run, 60, "the run's sleep process")[0]
        if receiver == "the process":
            k.manager.interrupt_kernel()  # as Jupyter does
        else:
            interrupt(k.manager.provisioner.pid, receiver)
        reply = k.client.get_shell_msg(timeout=30)
        assert reply["parent_header"]["msg_id"] == msg_id
        assert reply["content"]["status"] == "error"
        # One line, no traceback through shadowkernel's internals, and what the run printed.
        outcome = Outcome(reply, k.iopub_until_idle(msg_id, timeout=30))
        assert outcome.usage_error == "UsageError: run interrupted (its processes were killed)"
        assert "Traceback" not in outcome.stderr and not outcome.error
        assert outcome.stdout == "started so far\n"
        wait_for(lambda: not alive(sleeper), 15, "the interrupted run to be killed")
        # The shadow serves the next run at once: the lane is free again.
        again = k.ok("%%shadow_run a --timeout 60\necho still here")
        assert "still here" in again.data("text/plain")[0]


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline") as f:
            return f.read()
    except OSError:
        return ""


def test_restart_leaves_no_mount_and_no_server(project: Path) -> None:
    with kernel() as k:
        shadow = _open_and_lint(k, project)
        assert shadow["mount"] in shadow_mounts() and all(shadow["servers"])
        k.manager.restart_kernel(now=False)
        k.client.wait_for_ready(timeout=120)
        _assert_nothing_left(shadow)
        assert "no shadow is open" in k.usage_error("%shadow status")
        assert k.usage_error("%lint a")  # the restarted kernel still has its magics


def test_load_ext_in_a_plain_ipython_kernel(project: Path) -> None:
    with kernel("python3") as k:
        k.ok("%load_ext shadowkernel")
        shadow = _open_and_lint(k, project)
        k.ok(
            "%%stage a inventory/stock.py --replace\n<<<<<<< SEARCH\nimport os\n=======\n"
            ">>>>>>> REPLACE\n"
        )
        assert "-import os" in k.ok("%branch diff a").data("text/plain")[0]
    _assert_nothing_left(shadow)  # closed at exit although the kernel knew nothing of it
