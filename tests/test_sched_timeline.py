"""The timeline model: summary statistics and the MIME bundle the lab extension reads."""

from __future__ import annotations

import json

from shadowkernel.sched.timeline import MIME_TYPE, Event, Timeline, percentile


def event(id: int, branch: str, queued: float, started: float, switch: float, finished: float,
          ok: bool = True) -> Event:  # fmt: skip
    return Event(id, branch, 1, "lint", "lint", 0, queued, started, switch, finished, ok, "2 lints")


EVENTS = [
    event(0, "a", 0.0, 0.0, 0.002, 0.010),
    event(1, "a", 0.001, 0.010, 0.0, 0.015),
    event(2, "b", 0.002, 0.015, 0.003, 0.020, ok=False),
]


def test_summary_counts_switches_and_waits() -> None:
    s = Timeline(EVENTS).summary
    assert (s.events, s.switches) == (3, 2)
    assert abs(s.switch_time - 0.005) < 1e-12
    assert abs(s.serve_time - 0.020) < 1e-12
    assert s.branches["a"].requests == 2
    assert abs(s.branches["a"].mean_wait - 0.0045) < 1e-12
    assert abs(s.branches["b"].mean_wait - 0.013) < 1e-12


def test_mime_bundle_matches_the_extension_schema() -> None:
    bundle = Timeline(EVENTS, title="t")._repr_mimebundle_()
    data = json.loads(json.dumps(bundle[MIME_TYPE]))  # JSON-serialisable as is
    assert data["schema"] == 1 and data["title"] == "t" and data["simulated"] is False
    assert set(data["events"][0]) == {
        "id", "branch", "version", "op", "kind", "lane", "queued", "started", "switch",
        "finished", "ok", "outcome", "client",
    }  # fmt: skip
    assert set(data["summary"]) == {"events", "switches", "switch_time", "serve_time", "branches"}
    assert set(data["summary"]["branches"]["a"]) == {"requests", "mean_wait"}
    assert "<svg" in bundle["text/html"] and "<table>" in bundle["text/html"]
    assert "3 requests, 2 switches" in bundle["text/plain"]


def test_frame_has_one_row_per_event() -> None:
    frame = Timeline(EVENTS).frame
    assert list(frame["branch"]) == ["a", "a", "b"]
    assert Timeline([]).frame.empty
    assert "<svg" not in Timeline([])._repr_mimebundle_()["text/html"]


def test_percentile_interpolates() -> None:
    assert percentile([], 0.5) == 0.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert percentile([1.0, 2.0], 0.95) == 1.95
