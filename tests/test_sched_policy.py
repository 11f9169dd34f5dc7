"""The scheduler's pure core: which request a free lane serves next."""

from __future__ import annotations

import random

import pytest

from shadowkernel.sched.policy import LaneGrowth, RequestQueue, most_lanes


def drain(queue: RequestQueue[str], lane: int = 0) -> list[str]:
    served = []
    while (ticket := queue.pop(lane)) is not None:
        served.append(ticket.payload)
        queue.done(lane)
    return served


def test_round_robin_batches_a_branch_then_rotates() -> None:
    queue: RequestQueue[str] = RequestQueue("round-robin", batch=2)
    for name in ["a1", "a2", "a3", "b1", "c1", "b2"]:
        queue.push(name[0], name)
    assert drain(queue) == ["a1", "a2", "b1", "b2", "c1", "a3"]


def test_a_busy_branch_cannot_starve_a_small_one() -> None:
    queue: RequestQueue[str] = RequestQueue("round-robin", batch=1)
    for i in range(5):
        queue.push("big", f"big{i}")
    queue.push("small", "small0")
    assert drain(queue)[:2] == ["big0", "small0"]


def test_fifo_serves_in_arrival_order() -> None:
    queue: RequestQueue[str] = RequestQueue("fifo")
    for name in ["a1", "b1", "a2", "c1", "b2"]:
        queue.push(name[0], name)
    assert drain(queue) == ["a1", "b1", "a2", "c1", "b2"]


@pytest.mark.parametrize("policy", ["round-robin", "fifo"])
def test_a_branch_is_served_by_one_lane_at_a_time(policy: str) -> None:
    queue: RequestQueue[str] = RequestQueue(policy)  # type: ignore[arg-type]
    queue.push("a", "a1")
    queue.push("a", "a2")
    queue.push("b", "b1")
    assert queue.pop(0).payload == "a1"  # type: ignore[union-attr]
    assert queue.pop(1).payload == "b1"  # type: ignore[union-attr]
    queue.done(1)
    assert queue.pop(1) is None  # a2 waits: a is busy on lane 0
    queue.done(0)
    assert queue.pop(1).payload == "a2"  # type: ignore[union-attr]


def served_a_on_0_and_b_on_1(queue: RequestQueue[str]) -> RequestQueue[str]:
    queue.push("a", "a1")
    queue.push("b", "b1")
    assert queue.pop(0).payload == "a1"  # type: ignore[union-attr]
    assert queue.pop(1).payload == "b1"  # type: ignore[union-attr]
    queue.done(0)
    queue.done(1)
    return queue


def test_lanes_keep_their_branch_affinity() -> None:
    queue = served_a_on_0_and_b_on_1(RequestQueue("round-robin", batch=8))
    queue.push("a", "a2")
    queue.push("b", "b2")
    assert queue.pop(1).payload == "b2"  # type: ignore[union-attr]
    assert queue.pop(0).payload == "a2"  # type: ignore[union-attr]


def test_a_lane_leaves_a_branch_to_the_free_lane_that_served_it_last() -> None:
    queue = served_a_on_0_and_b_on_1(RequestQueue("round-robin"))
    queue.push("b", "b2")
    assert queue.last_waits(1) and not queue.last_waits(0)
    assert queue.pop(0, leave_to={1}) is None  # lane 1 holds b's documents, and is idle
    assert queue.pop(1, leave_to={0}).payload == "b2"  # type: ignore[union-attr]
    queue.done(1)
    queue.push("b", "b3")
    assert queue.pop(0).payload == "b3"  # type: ignore[union-attr]  # any lane, when asked to
    queue.done(0)
    queue.push("b", "b4")  # lane 0 served b last now
    assert not queue.last_waits(1) and queue.last_waits(0)
    assert queue.pop(1, leave_to={0}) is None  # left to lane 0
    # Left only to the lanes named (idle ones, woken for it): lane 0 gone, lane 1 serves b.
    assert queue.pop(1, leave_to={2}).payload == "b4"  # type: ignore[union-attr]


def test_pop_before_done_is_a_usage_error() -> None:
    queue: RequestQueue[str] = RequestQueue()
    queue.push("a", "a1")
    queue.push("a", "a2")
    queue.pop(0)
    with pytest.raises(RuntimeError, match="call done"):
        queue.pop(0)


def test_bad_arguments_say_what_to_give() -> None:
    with pytest.raises(ValueError, match="round-robin, fifo"):
        RequestQueue("lifo")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least 1"):
        RequestQueue(batch=0)


def test_deterministic_for_a_seeded_workload() -> None:
    import random

    def run(seed: int) -> list[str]:
        rng = random.Random(seed)
        queue: RequestQueue[str] = RequestQueue()
        served: list[str] = []
        for step in range(200):
            queue.push(f"b{rng.randint(0, 9)}", str(step))
            if rng.random() < 0.5 and (t := queue.pop(step % 2)) is not None:
                served.append(t.payload)
                queue.done(step % 2)
        return served + drain(queue)

    assert run(1) == run(1)
    assert sorted(run(1), key=int) == [str(i) for i in range(200)]


def test_waiting_branches_counts_branches_no_lane_serves() -> None:
    queue: RequestQueue[str] = RequestQueue()
    for name in ["a1", "a2", "b1", "c1"]:
        queue.push(name[0], name)
    assert queue.waiting_branches() == 3
    queue.pop(0)  # a1: a is served, a2 waits for it, not for a lane
    assert queue.waiting_branches() == 2
    queue.pop(1)  # b1
    assert queue.waiting_branches() == 1
    queue.done(0)
    assert queue.waiting_branches() == 2  # a is free again with a2 pending


def grow_log(growth: LaneGrowth, waiting: list[int], lanes: int,
             branches: int | None = None) -> list[tuple[int, int]]:  # fmt: skip
    """The dispatches (1-based) at which `growth` opened lanes, with how many; they join at
    once. Of `branches` asking in all, served in turn (None: a new one each time), every
    lane serves one."""
    opened = []
    for dispatch, count in enumerate(waiting, 1):
        branch = f"b{dispatch if branches is None else dispatch % branches}"
        served = lanes if branches is None else min(lanes, branches - count)
        if more := growth.dispatched(branch, count, served, lanes):
            opened.append((dispatch, more))
            for _ in range(more):
                growth.opened()
            lanes += more
    return opened


def test_lanes_open_after_sustained_waiting_all_up_to_the_limit() -> None:
    # 3 of the last 4 dispatches left a branch waiting (CONTENDED_SHARE): the fourth opens
    # both lanes the limit allows, and then none opens.
    growth = LaneGrowth(limit=4, after=4)
    assert grow_log(growth, [1, 0, 1, 1, 1, 1, 0, 2, 9, 9, 9, 9], lanes=2) == [(4, 2)]
    assert growth.grown == 2
    assert grow_log(LaneGrowth(limit=3, after=4), [1, 1, 1, 1, 9, 9, 9, 9], lanes=2) == [(4, 1)]


def test_a_burst_or_mostly_idle_lanes_open_nothing() -> None:
    assert grow_log(LaneGrowth(limit=4, after=4), [9, 9, 9], lanes=2) == []  # a burst
    idle = [5, 5, 0, 0, 5, 0, 0, 1, 0, 0, 1, 1, 0, 0]  # never 3 of 4 with a branch waiting
    assert grow_log(LaneGrowth(limit=4, after=4), idle, lanes=2) == []


def test_agents_that_stage_between_answers_open_lanes() -> None:
    """What 5 agents on 2 lanes left waiting at each dispatch (more-itertools with ruff,
    2026-12-04: 0 at 7%, 1 at 25%, 2 at 67%, 3 at 1%): rarely more branches than lanes, but
    someone waiting nearly always. Every lane up to the limit (4, under the 5 asking) opens,
    early."""
    rng = random.Random(5)
    waiting = rng.choices([0, 1, 2, 3], weights=[7, 25, 67, 1], k=200)
    growth = LaneGrowth(limit=4)
    opened = grow_log(growth, waiting, lanes=2, branches=5)
    assert len(opened) == 1 and opened[0][0] < 30 and opened[0][1] == 2, opened


def test_no_more_lanes_open_than_branches_ask() -> None:
    """5 agents (the waits above) on 2 lanes of at most 6: 5 lanes, and no sixth once they
    serve (a request waits a moment for its woken lane); 3 agents: 3."""
    rng = random.Random(5)
    waiting = rng.choices([0, 1, 2, 3], weights=[7, 25, 67, 1], k=200)
    growth = LaneGrowth(limit=6)
    assert grow_log(growth, waiting, lanes=2, branches=5) == [(16, 3)]
    assert grow_log(growth, [1] * 100, lanes=5, branches=5) == []
    assert grow_log(LaneGrowth(limit=6, after=4), [1] * 8, lanes=2, branches=3) == [(4, 1)]
    # Two branches queueing many requests each, 9 others left waiting: up to the limit.
    assert grow_log(LaneGrowth(limit=6, after=4), [9] * 8, lanes=2, branches=11) == [(4, 4)]


def test_no_lane_opens_past_the_limit_or_while_others_start() -> None:
    assert grow_log(LaneGrowth(limit=2, after=1), [9] * 10, lanes=2) == []  # fixed lanes
    growth = LaneGrowth(limit=4, after=2)
    assert [growth.dispatched("b", 9, 2, 2) for _ in range(2)] == [0, 2]
    assert not any(growth.dispatched("b", 9, 2, 2) for _ in range(10))  # the two are starting
    growth.opened()
    assert not any(growth.dispatched("b", 9, 3, 3) for _ in range(10))  # the second still is
    growth.opened()
    assert not any(growth.dispatched("b", 9, 4, 4) for _ in range(10))  # the limit
    assert growth.grown == 2 and not growth.opening


def test_a_lane_that_fails_to_open_stops_the_growth() -> None:
    growth = LaneGrowth(limit=4, after=1)
    assert growth.dispatched("b", 9, 2, 2) == 2
    growth.opened()
    growth.failed()  # the second
    assert not any(growth.dispatched("b", 9, 3, 3) for _ in range(10))
    assert growth.grown == 1 and not growth.opening


def test_lanes_grow_to_three_per_core_for_single_file_linters_only() -> None:
    assert (most_lanes(["ruff"], 1), most_lanes(["ruff"], 2), most_lanes(["ruff"], 3)) == (3, 6, 6)
    assert most_lanes(["ruff"], 64) == 6  # from the default 4: the services loop limits
    gib = 2**30
    assert most_lanes(["pyright"], 4, 24 * gib) == 2  # cross-file: the default, fixed
    assert most_lanes(["ruff", "pyright"], 4, 24 * gib) == 2
    assert most_lanes([], 8) == 1
