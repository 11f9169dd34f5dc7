"""Live views: the timeline that follows running agents, and the status line.

Why the timeline updates from the cell that shows it: JupyterLab applies `update_display`
only to outputs of a request still in flight (its output area listens to that request's
messages), so a background thread cannot refresh a finished cell's output there. `%timeline`
therefore shows the timeline with a display id and, while agents started with
`start_agent()` run, keeps its cell busy and updates that display in place.

How often: every `INTERVAL` (0.5 s), and only when new requests were served. The whole
timeline is re-sent on each update (it grows with every request, and ruff answers in
milliseconds, so agents produce many events per second); twice a second reads as live to a
person while bounding messages and re-rendering to a few per second however busy the agents
are. The status line (a widget) can update from any thread at any time, so a daemon thread
refreshes it at the same rate.
"""

from __future__ import annotations

import time
from typing import Any

from IPython.display import display

from ..workspace import Workspace
from .session import Session

INTERVAL = 0.5


def show_timeline(session: Session, follow: bool = True, interval: float = INTERVAL) -> None:
    ws = session.require()
    timeline = ws.timeline()
    handle = display(timeline, display_id=True)
    if not follow or not session.running_agents():
        return
    shown = len(timeline)
    try:
        while agents := session.running_agents():
            agents[0].join(interval)  # a bounded wait: returns early when that agent ends
            shown = _refresh(ws, handle, shown)
    except KeyboardInterrupt:
        running = len(session.running_agents())
        print(f"stopped following the timeline; {running} agent(s) keep running")
    _refresh(ws, handle, shown)


def _refresh(ws: Workspace, handle: Any, shown: int) -> int:
    timeline = ws.timeline()
    if len(timeline) != shown:
        handle.update(timeline)
    return len(timeline)


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
