"""The timeline model: summary statistics and the MIME bundle the lab extension reads."""

from __future__ import annotations

import asyncio
import gc
import json
from typing import Any

import pytest

from shadowkernel.errors import NotFound, ServerError
from shadowkernel.run import RunResult
from shadowkernel.sched import Answer, Lane, Scheduler
from shadowkernel.sched.timeline import MIME_TYPE, Event, Timeline, format_ms, percentile, to_fixed


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
    assert "3 requests · 2 switches; switching 5.00 ms" in bundle["text/plain"]


def test_frame_has_one_row_per_event() -> None:
    frame = Timeline(EVENTS).frame
    assert list(frame["branch"]) == ["a", "a", "b"]
    assert Timeline([]).frame.empty
    assert "<svg" not in Timeline([])._repr_mimebundle_()["text/html"]


def test_percentile_interpolates() -> None:
    assert percentile([], 0.5) == 0.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert percentile([1.0, 2.0], 0.95) == 1.95


def test_numbers_are_written_as_javascripts_to_fixed_writes_them() -> None:
    # Ties exact in binary round away from zero (Python's format rounds them to even).
    assert [to_fixed(1234.5, 0), to_fixed(1.125, 2), to_fixed(12.25, 1)] == ["1235", "1.13", "12.3"]
    assert [to_fixed(-0.0, 2), to_fixed(-1e-18, 2), to_fixed(2.0, 3)] == ["0.00", "-0.00", "2.000"]
    assert [format_ms(0.0012), format_ms(0.027), format_ms(12.3456)] == [
        "1.20 ms",
        "27.0 ms",
        "12346 ms",
    ]


def test_the_timeline_reads_each_jobs_answer() -> None:
    run = RunResult(("python", "x.py"), 2, "", "", False, False, 0.1, False, {}, "fuse", True,
                    False)  # fmt: skip
    answers: list[Any] = [
        Answer(["l1", "l2", "l3"], "3 lints (1 new)", lints=3, new_lints=1),
        Answer(run, "exit 2", exit_code=run.exit_code),
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


def test_agents_asking_in_turn_keep_their_lanes() -> None:
    """With a lane per agent, each asking again once answered, a lane keeps serving the
    branch it served last (its servers hold that branch's documents) instead of taking another
    branch's request while that branch's own lane is free."""

    async def serve() -> list[Event]:
        lanes = [Lane(i, None, None, False) for i in range(3)]  # type: ignore[arg-type]
        scheduler = Scheduler(lanes)
        scheduler.start()

        async def job(lane: Lane) -> Answer[None]:
            await asyncio.sleep(0.001)  # a server's answer
            return Answer(None, "done")

        async def agent(name: str) -> None:
            for _ in range(30):
                await asyncio.sleep(0)  # the agent's own step between answers
                await scheduler.submit(name, 1, "lint", "lint", job)

        await asyncio.gather(*(agent(name) for name in "abc"))
        await scheduler.close()
        return scheduler.events

    events = asyncio.run(serve())
    lanes = {branch: {e.lane for e in events[3:] if e.branch == branch} for branch in "abc"}
    assert all(len(used) == 1 for used in lanes.values()), lanes
    assert len(set().union(*lanes.values())) == 3


def test_a_serve_whose_caller_gave_up_fails_without_a_never_retrieved_error() -> None:
    """A caller cancelled while its request is served leaves the serve going; when the serve
    then fails (its server crashed), the error is recorded on the timeline and is nobody's to
    raise: asyncio must not log it as a never-retrieved exception."""

    async def scenario() -> tuple[list[dict[str, Any]], list[Event]]:
        reported: list[dict[str, Any]] = []
        asyncio.get_running_loop().set_exception_handler(lambda _, ctx: reported.append(ctx))
        scheduler = Scheduler([Lane(0, None, None, False)])  # type: ignore[arg-type]
        scheduler.start()
        serving, crash = asyncio.Event(), asyncio.Event()

        async def job(lane: Lane) -> Any:
            serving.set()
            await crash.wait()
            raise ServerError("the server crashed")

        caller = asyncio.create_task(scheduler.submit("b", 1, "lint", "lint", job))
        await serving.wait()
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
        crash.set()
        for _ in range(100):  # loop turns, not time: until the failed serve is recorded
            if scheduler.events:
                break
            await asyncio.sleep(0)
        await scheduler.close()
        del caller
        gc.collect()
        return reported, scheduler.events

    reported, events = asyncio.run(scenario())
    assert [(e.branch, e.ok) for e in events] == [("b", False)]
    assert reported == []


def test_request_by_id_describes_it_and_reaches_the_diff() -> None:
    lint = Event(7, "b", 3, "lint", "lint", 0, 0.0, 0.004, 0.001, 0.010, True, "2 lints (1 new)",
                 lints=2, new_lints=1)  # fmt: skip
    seen = []
    timeline = Timeline([*EVENTS, lint], diff=lambda b, v: seen.append((b, v)) or "+x\n")
    request = timeline.request(7)
    assert str(request).splitlines() == [
        "request 7",
        "  branch: b",
        "  version: 3",
        "  kind: lint",
        "  shadow: 0",
        "  queue wait: 4.00 ms",
        "  switch: 1.00 ms",
        "  serve: 5.00 ms",
        "  answer: 2 lints, 1 new",
    ]
    assert request.diff() == "+x\n" and seen == [("b", 3)]
    with pytest.raises(NotFound, match=r"request\(99\): no request with that id .*ids: 0\.\.7"):
        timeline.request(99)
    with pytest.raises(NotFound, match="no workspace"):
        Timeline(EVENTS).request(0).diff()
