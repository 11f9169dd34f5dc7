"""Deterministic timeline bundles for the browser tests, shaped like the kernel's output.

A tiny simulation of one shadow serving several branches in turns: each branch asks,
waits in the queue while the shadow serves others, pays a switch when the shadow last
served another branch, and thinks a little before asking again. Stdlib only, because the
live test imports this module inside a plain python3 kernel.
"""

from __future__ import annotations

MIME = "application/vnd.shadowkernel.timeline+json"
BRANCHES = ("a", "b", "c", "refactor-parser-agent")
OPS = (
    ("lint", "lint"),
    ("definition", "navigation"),
    ("run", "run"),
    ("hover", "navigation"),
    ("lint", "lint"),
    ("references", "navigation"),
)
SERVE = {"lint": 0.012, "navigation": 0.004, "run": 0.045}


def simulate(count: int, branches: tuple[str, ...] = BRANCHES) -> list[dict]:
    """`count` events of one shadow (lane 0) serving `branches` first come, first served,
    except that a waiting request of the branch just served goes first (no switch)."""
    asks = {b: 0.001 * i for i, b in enumerate(branches)}
    versions = dict.fromkeys(branches, 1)
    free_at, last, events = 0.0, None, []
    for i in range(count):
        branch = min(branches, key=lambda b: (asks[b] > free_at or b != last, asks[b], b))
        op, kind = OPS[(5 * i + len(branch)) % len(OPS)]
        queued = asks[branch]
        started = max(queued, free_at)
        switch = 0.0 if branch == last else 0.0008 + 0.0002 * (i % 4)
        finished = started + switch + SERVE[kind] * (1 + 0.3 * (i % 3))
        ok = not (kind == "run" and i % 4 == 3)
        events.append(
            {
                "id": i,
                "branch": branch,
                "version": versions[branch],
                "op": op,
                "kind": kind,
                "lane": 0,
                "queued": round(queued, 6),
                "started": round(started, 6),
                "switch": round(switch, 6),
                "finished": round(finished, 6),
                "ok": ok,
                "outcome": _outcome(kind, i, ok),
            }
        )
        free_at, last = finished, branch
        asks[branch] = finished + (0.003 + 0.002 * (i % 4)) * (0 if i % 5 == 2 else 1)
        if kind == "lint":
            versions[branch] += 1
    return events


def _outcome(kind: str, i: int, ok: bool) -> str:
    if kind == "lint":
        return f"{i % 5} lints ({min(i % 2, i % 5)} new)"
    if kind == "run":
        return "exit 0, 12 passed" if ok else "exit 1, 1 failed"
    return "1 location" if i % 3 == 0 else f"{1 + i % 3} locations"


def summary(events: list[dict]) -> dict:
    branches: dict[str, dict] = {}
    for e in events:
        b = branches.setdefault(e["branch"], {"requests": 0, "wait": 0.0})
        b["requests"] += 1
        b["wait"] += e["started"] - e["queued"]
    return {
        "events": len(events),
        "switches": sum(1 for e in events if e["switch"] > 0),
        "switch_time": sum(e["switch"] for e in events),
        "serve_time": sum(e["finished"] - e["started"] for e in events),
        "branches": {
            name: {"requests": b["requests"], "mean_wait": b["wait"] / b["requests"]}
            for name, b in branches.items()
        },
    }


def timeline(events: list[dict], title: str = "shadow timeline") -> dict:
    return {
        "schema": 1,
        "title": title,
        "events": events,
        "summary": summary(events),
        "simulated": True,
    }


def bundle(events: list[dict], title: str = "shadow timeline") -> dict:
    """A display bundle: the timeline plus the plain-text fallback other frontends show."""
    return {MIME: timeline(events, title), "text/plain": f"<{title}: {len(events)} events>"}


def saved_events() -> list[dict]:
    """The saved notebook's events: 24 on lane 0, plus a run of branch a on a second shadow
    (lane 1) overlapping its own lint, which gives branch a a second track."""
    events = simulate(24)
    first_a = next(e for e in events if e["branch"] == "a")
    extra = dict(
        first_a,
        id=len(events),
        op="run",
        kind="run",
        lane=1,
        switch=0.001,
        outcome="exit 0, 3 passed",
    )
    extra["finished"] = round(first_a["started"] + 0.06, 6)
    return [*events, extra]
