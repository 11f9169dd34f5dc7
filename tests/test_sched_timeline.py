"""The timeline model: summary statistics and the MIME bundle the lab extension reads."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from shadowkernel.errors import NotFound
from shadowkernel.run import RunResult
from shadowkernel.sched import Answer, Lane, Scheduler
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
        "finished", "ok", "outcome", "client", "lints", "new_lints", "exit_code",
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


def test_the_timeline_reads_each_jobs_answer_and_still_takes_the_old_pair() -> None:
    run = RunResult(("python", "x.py"), 2, "", "", False, False, 0.1, False, {}, "fuse", True,
                    False)  # fmt: skip
    answers: list[Any] = [
        Answer(["l1", "l2", "l3"], "3 lints (1 new)", lints=3, new_lints=1),
        (run, "exit 2"),  # the (value, outcome) pair jobs returned before Answer
        Answer([], "0 locations"),
    ]

    async def serve() -> tuple[list[Any], list[Event]]:
        # The jobs never show a snapshot, so the lane needs no shadow or pool.
        scheduler = Scheduler([Lane(0, None, None, False)])  # type: ignore[arg-type]
        scheduler.start()

        def job(answer: Any) -> Any:
            async def serve(lane: Lane) -> Any:
                return answer

            return serve

        values = [await scheduler.submit("b", 1, "lint", "op", job(a)) for a in answers]
        await scheduler.close()
        return values, scheduler.events

    values, events = asyncio.run(serve())
    assert values == [["l1", "l2", "l3"], run, []]
    counts = [(e.lints, e.new_lints, e.exit_code, e.outcome) for e in events]
    assert counts == [(3, 1, None, "3 lints (1 new)"), (None, None, 2, "exit 2"),
                      (None, None, None, "0 locations")]  # fmt: skip


def test_request_by_id_describes_it_and_reaches_the_diff() -> None:
    lint = Event(7, "b", 3, "lint", "lint", 0, 0.0, 0.004, 0.001, 0.010, True, "2 lints (1 new)",
                 lints=2, new_lints=1)  # fmt: skip
    seen = []
    timeline = Timeline([*EVENTS, lint], diff=lambda b, v: seen.append((b, v)) or "+x\n")
    request = timeline.request(7)
    assert str(request).splitlines() == [
        "request 7: branch b, version 3, lint (lint) on shadow 0",
        "waited 4.0 ms in the queue, switch 1.0 ms, served 5.0 ms",
        "2 lints, 1 new",
    ]
    assert request.diff() == "+x\n" and seen == [("b", 3)]
    with pytest.raises(NotFound, match=r"request\(99\): no request with that id .*ids: 0\.\.7"):
        timeline.request(99)
    with pytest.raises(NotFound, match="no workspace"):
        Timeline(EVENTS).request(0).diff()
