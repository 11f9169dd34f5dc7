"""Live views: the timeline that follows running agents, and the status line.

Two channels keep a timeline live. While its cell runs, `%timeline` follows agents started
with `start_agent()` by updating its display in place (every `INTERVAL`, only when new
requests were served); that is what a notebook run headless (nbclient) and a saved notebook
keep. JupyterLab applies `update_display` only to outputs of a request still in flight, so
the bundle also names a *feed*: the lab extension opens a comm (target `TARGET`) with the
feed's id and the last sequence number it has, gets a snapshot, then only new events, each
message carrying `from` and `seq` (positions in the workspace's append-only event list) and
the summary of the first `seq` events, so a missed message shows as a gap and the extension
asks for a snapshot again. This keeps working after the cell finished, after a page reload
(the extension re-subscribes), and for several outputs of one workspace (each its own comm,
all fed from one list). A feed unknown to the kernel (it restarted) answers `gone`; a closed
workspace sends `closed`.

Caveat: a comm message is sent from the feed's thread; ipykernel's iopub socket is safe to use
from any thread (ipywidgets rely on the same), but the messages carry no parent header.

The status line (a widget) can update from any thread at any time, so a daemon thread
refreshes it at the same rate.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from IPython.display import display

from ..errors import NotFound
from ..sched.timeline import MIME_TYPE, Event, Timeline, summarize
from ..workspace import Workspace
from .session import Session

INTERVAL = 0.5
TARGET = "shadowkernel.timeline"


def show_timeline(session: Session, follow: bool = True, interval: float = INTERVAL) -> None:
    ws = session.require()
    feed = feed_of(ws, interval)
    timeline = ws.timeline()
    shown, handle = len(timeline), None
    # The interrupt (JupyterLab's stop button) may come as soon as the display is sent: from
    # there on it only stops the following.
    try:
        handle = display(feed.bundle(timeline), raw=True, display_id=True)
        while follow and session.running_agents():
            session.wait_for_agents(interval)  # a bounded wait: returns early when one ends
            shown = _refresh(feed, handle, shown)
    except KeyboardInterrupt:
        running = len(session.running_agents())
        print(f"stopped following the timeline; {running} agent(s) keep running")
    if handle is not None:
        _refresh(feed, handle, shown)


def _refresh(feed: Feed, handle: Any, shown: int) -> int:
    timeline = feed.workspace.timeline()
    if len(timeline) != shown:
        handle.update(feed.bundle(timeline), raw=True)
    return len(timeline)


# -- the feed -----------------------------------------------------------------------------------


def delta(events: Sequence[Event], since: int) -> dict[str, Any]:
    """The message that brings a view at `since` up to date: new events only, and the summary
    of all `seq` of them (the extension shows it as sent: it computes none itself)."""
    seq = len(events)
    return {"type": "events", "from": since, "seq": seq,
            "events": [asdict(e) for e in events[since:seq]],
            "summary": asdict(summarize(events[:seq]))}  # fmt: skip


def snapshot(events: Sequence[Event], title: str = "shadow timeline") -> dict[str, Any]:
    return {"type": "snapshot", "seq": len(events), "timeline": Timeline(events, title).to_json()}


class Feed:
    """One workspace's events, pushed to every comm subscribed to it."""

    def __init__(self, workspace: Workspace, interval: float = INTERVAL) -> None:
        self.workspace = workspace
        self.id = uuid.uuid4().hex
        self.interval = interval
        self._comms: list[Any] = []
        self._sent = 0
        self._lock = threading.Lock()
        self._pushing = False  # a pusher thread runs; set and cleared under the lock

    def bundle(self, timeline: Timeline) -> dict[str, Any]:
        """The display bundle of `timeline` naming this feed (and where it stands)."""
        bundle = timeline._repr_mimebundle_()
        live = {"feed": self.id, "target": TARGET, "seq": len(self.workspace.events())}
        return {**bundle, MIME_TYPE: {**bundle[MIME_TYPE], "live": live}}

    def subscribe(self, comm: Any) -> None:
        comm.on_msg(lambda msg: self._on_msg(comm, msg))
        comm.on_close(lambda msg: self._drop(comm))
        with self._lock:
            self._comms.append(comm)
            comm.send(snapshot(self.workspace.events()[: self._sent]))
        self._start()

    def push(self) -> bool:
        """Send what is new to every subscriber; False once there is nobody to send to."""
        with self._lock:
            if self.workspace.closed:
                self._send_all({"type": "closed"})
                self._pushing = False
                return False
            events = self.workspace.events()
            if len(events) > self._sent:
                self._send_all(delta(events, self._sent))
                self._sent = len(events)
            # Decided under the lock, so a subscriber that comes meanwhile starts a new pusher
            # (before, one that came as the last pusher was ending was never pushed to).
            self._pushing = bool(self._comms)
            return self._pushing

    def _send_all(self, message: dict[str, Any]) -> None:
        for comm in list(self._comms):
            comm.send(message)

    def _on_msg(self, comm: Any, msg: dict[str, Any]) -> None:
        data = msg["content"]["data"]
        with self._lock:
            if data.get("type") == "resync":
                comm.send(snapshot(self.workspace.events()[: self._sent]))
            elif data.get("type") == "diff":
                comm.send(diff_reply(self.workspace, data))

    def _drop(self, comm: Any) -> None:
        with self._lock:
            if comm in self._comms:
                self._comms.remove(comm)

    def _start(self) -> None:
        with self._lock:
            if self._pushing:
                return
            self._pushing = True
        threading.Thread(target=self._run, daemon=True, name="shadowkernel-feed").start()

    def _run(self) -> None:
        while self.push():
            time.sleep(self.interval)  # the push period, not a wait for a condition


def version_diff(ws: Workspace, branch: str, version: int) -> str:
    """A branch's version against the branch's base, as a unified diff (git style)."""
    found = ws.branches.get(branch)
    if found is None:
        raise NotFound(f"branch {branch!r} has no version {version!r} (any more)")
    return found.diff(version)


def diff_reply(ws: Workspace, request: dict[str, Any]) -> dict[str, Any]:
    """The extension's request panel asks for a version's diff; the answer says why not."""
    branch, version = str(request.get("branch")), request.get("version")
    try:
        if not isinstance(version, int):
            raise NotFound(f"version {version!r} is not a version number")
        text = version_diff(ws, branch, version)
    except NotFound as error:
        text = f"no diff: {error}"
    return {"type": "diff", "branch": branch, "version": version, "diff": text}


# -- the comm target ----------------------------------------------------------------------------

_feeds: dict[str, Feed] = {}
_registered = False


def feed_of(ws: Workspace, interval: float = INTERVAL) -> Feed:
    """The workspace's feed (one per workspace)."""
    register_target()
    for feed in _feeds.values():
        if feed.workspace is ws:
            return feed
    feed = Feed(ws, interval)
    feed._sent = len(ws.events())
    _feeds[feed.id] = feed
    return feed


def register_target() -> None:
    """Once per kernel, when the extension loads: a view saved before the kernel restarted
    subscribes before any `%timeline` runs, and must hear `gone`."""
    global _registered
    if not _registered:
        import comm

        comm.get_comm_manager().register_target(TARGET, _open)
        _registered = True


def _open(comm: Any, msg: dict[str, Any]) -> None:
    """A view subscribes: {"feed": id}. A feed this kernel does not know (it restarted since
    the output was made) answers `gone` and closes."""
    feed = _feeds.get(msg["content"]["data"].get("feed", ""))
    if feed is None:
        comm.send({"type": "gone"})
        comm.close()
        return
    feed.subscribe(comm)


def status_text(ws: Workspace, session: Session | None = None) -> str:
    """One line: what is open, branches, queue, requests served, agents, the last request."""
    if ws.closed:
        return "shadow closed"
    stats = ws.statistics()
    events = ws.timeline().events
    last = events[-1] if events else None
    agents = len(session.running_agents()) if session else 0
    servers = ", ".join(_server_states(stats))
    parts = [
        f"{ws.root} ({ws.mode}, {stats['lanes']} lane(s); {servers})",
        f"{stats['branches']} branch(es)",
        f"{len(events)} served, {stats['queued']} queued",
        f"{agents} agent(s) running",
    ]
    if last is not None:
        ago = time.perf_counter() - ws.origin - last.finished
        parts.append(f"last: {last.branch} v{last.version} {last.op} "
                     f"({last.outcome}) {ago:.1f} s ago")  # fmt: skip
    return " · ".join(parts)


def _server_states(stats: dict[str, Any]) -> list[str]:
    lanes = stats.get("servers") or [{}]
    return [f"{name} {getattr(s, 'state', '?')}" for name, s in lanes[0].items()]
