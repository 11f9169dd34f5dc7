"""The live timeline's comm, kernel side, through jupyter_client and a real kernel.

The test plays the lab extension: it opens a comm on the `shadowkernel.timeline` target with
the feed id from `%timeline`'s bundle, and checks the protocol: a snapshot first, then only
new events whose `from` continues the previous `seq`; a resync request answers a snapshot;
a diff request answers the version's diff; an unknown feed (a restarted kernel) is `gone`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kernel_helpers import Kernel, Outcome, copy_sample, kernel
from overlay_helpers import HAS_FUSE
from waiting import wait_for

pytestmark = [
    pytest.mark.timeout(240),
    pytest.mark.skipif(not HAS_FUSE, reason="the shadowkernel kernel needs /dev/fuse"),
]

MIME = "application/vnd.shadowkernel.timeline+json"
TARGET = "shadowkernel.timeline"


class Comm:
    """The front-end end of one comm: open it, send to it, collect what the kernel sends."""

    open_comms: dict[str, Comm] = {}

    def __init__(self, k: Kernel, data: dict[str, Any]) -> None:
        self.k, self.id = k, uuid.uuid4().hex
        self.received: list[dict[str, Any]] = []
        self.closed = False
        Comm.open_comms[self.id] = self
        self._send("comm_open", {"comm_id": self.id, "target_name": TARGET, "data": data})

    def send(self, data: dict[str, Any]) -> None:
        self._send("comm_msg", {"comm_id": self.id, "data": data})

    def _send(self, kind: str, content: dict[str, Any]) -> None:
        self.k.client.shell_channel.send(self.k.client.session.msg(kind, content))

    def poll(self) -> list[dict[str, Any]]:
        """What this comm received so far; messages for the others go to their own box."""
        while self.k.client.iopub_channel.msg_ready():
            Comm.route(self.k.client.get_iopub_msg(timeout=1))
        return self.received

    @staticmethod
    def route(msg: dict[str, Any]) -> None:
        comm = Comm.open_comms.get(msg["content"].get("comm_id", ""))
        if comm is not None and msg["msg_type"] == "comm_msg":
            comm.received.append(msg["content"]["data"])
        if comm is not None:
            comm.closed |= msg["msg_type"] == "comm_close"

    def wait(self, what: str, test: Any) -> dict[str, Any]:
        return wait_for(lambda: next((m for m in self.poll() if test(m)), None), 60, what)


@pytest.fixture(scope="module")
def k(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    project = copy_sample(tmp_path_factory.mktemp("live") / "project")
    with kernel() as running:
        running.ok(f"%shadow open {project} --servers ruff")
        running.ok("%branch new alpha")
        yield running


def ok(k: Kernel, code: str) -> Outcome:
    """`k.ok`, keeping the comm messages sent while the cell ran: jupyter_client hands those to
    the cell's outcome (they carry its request as parent), so `Comm.poll` would never see them."""
    outcome = k.ok(code)
    for msg in outcome.messages:
        Comm.route(msg)
    return outcome


def test_an_unknown_feed_is_gone(k: Kernel) -> None:
    """First in this module: no `%timeline` has run in this kernel yet, as after a restart."""
    comm = Comm(k, {"feed": "from-a-kernel-that-restarted"})
    assert comm.wait("gone", lambda m: m["type"] == "gone")
    wait_for(lambda: comm.poll() is not None and comm.closed, 30, "the comm to close")


def lint(k: Kernel, times: int = 1) -> None:
    ok(k, f"for _ in range({times}): ws.branches['alpha'].lint(['main.py'], servers=['ruff'])")


def test_feed_sends_a_snapshot_then_only_new_events(k: Kernel) -> None:
    lint(k)
    shown = ok(k, "%timeline --no-follow")
    live = shown.data(MIME, kinds=("display_data",))[0]["live"]
    assert live["target"] == TARGET and live["seq"] >= 1

    comm = Comm(k, {"feed": live["feed"]})
    snap = comm.wait("the snapshot", lambda m: m["type"] == "snapshot")
    assert snap["seq"] == live["seq"] == len(snap["timeline"]["events"])
    assert snap["timeline"]["schema"] == 1

    lint(k, 2)
    seq = snap["seq"]
    while seq < live["seq"] + 2:
        delta = comm.wait(f"events from {seq}", lambda m, s=seq: m.get("from") == s)
        assert delta["type"] == "events" and delta["seq"] == seq + len(delta["events"])
        seq = delta["seq"]
    new = [m for m in comm.received if m["type"] == "events"]
    events = [e for m in new for e in m["events"]]
    assert len(events) == 2 and {e["branch"] for e in events} == {"alpha"}
    assert all(e["lints"] is not None and e["new_lints"] is not None for e in events)

    # A view that missed a message asks again and gets everything up to the same seq.
    comm.send({"type": "resync"})
    again = comm.wait("the resync snapshot", lambda m: m["type"] == "snapshot" and m is not snap)
    assert again["seq"] == seq and len(again["timeline"]["events"]) == seq

    # The request panel's diff: the version's edits against the branch's base.
    ok(k, "ws.branches['alpha'].write('extra.py', 'import sys\\n')")
    version = int(k.value("ws.branches['alpha'].version"))
    comm.send({"type": "diff", "branch": "alpha", "version": version})
    diff = comm.wait("the diff", lambda m: m["type"] == "diff")
    assert "+import sys" in diff["diff"] and diff["version"] == version


def test_two_views_of_one_workspace_get_the_same_events(k: Kernel) -> None:
    feed = ok(k, "%timeline --no-follow").data(MIME, kinds=("display_data",))[0]["live"]["feed"]
    views = [Comm(k, {"feed": feed}), Comm(k, {"feed": feed})]
    snaps = [v.wait("a snapshot", lambda m: m["type"] == "snapshot") for v in views]
    lint(k)
    for view, snap in zip(views, snaps, strict=True):
        view.wait("the new event", lambda m, s=snap["seq"]: m.get("from") == s)
    first, second = ([e for m in v.poll() if m["type"] == "events" for e in m["events"]]
                     for v in views)  # fmt: skip
    assert snaps[0]["seq"] == snaps[1]["seq"] and first[:1] == second[:1]


def test_closing_the_shadow_is_said_on_the_feed(k: Kernel) -> None:
    """Last in this module: it closes the module's shadow."""
    feed = ok(k, "%timeline --no-follow").data(MIME, kinds=("display_data",))[0]["live"]["feed"]
    comm = Comm(k, {"feed": feed})
    comm.wait("a snapshot", lambda m: m["type"] == "snapshot")
    ok(k, "%shadow close")
    comm.wait("closed", lambda m: m["type"] == "closed")
