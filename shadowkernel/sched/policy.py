"""Which queued request a free shadow (a lane) serves next: the scheduler's pure core.

No I/O, no clocks, no asyncio: the scheduler pushes tickets, asks `pop(lane)` when a lane is
free and calls `done(lane)` when it finished, so every decision can be tested directly and
is deterministic. How many lanes serve is decided here too: `default_lanes` (how many a
workspace opens), `most_lanes` and `LaneGrowth` (when a workspace opened with the default
opens more, while it serves).

Every policy serves a branch on one lane at a time (its runs share a scratch layer, and its
requests are answered in the order they were asked); a policy only picks which free branch
goes next. A policy is a small class named in `POLICIES`: adding one is a class here and a
line in that table.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from ..errors import ArgumentError

T = TypeVar("T")


@dataclass(frozen=True)
class Ticket(Generic[T]):
    id: int
    branch: str
    payload: T


class RequestQueue(Generic[T]):
    def __init__(self, policy: Policy = "round-robin", batch: int = 8) -> None:
        if policy not in POLICIES:
            raise ArgumentError(f"policy={policy!r}: choose one of {', '.join(POLICIES)}")
        if not isinstance(batch, int) or batch < 1:
            raise ArgumentError(f"batch={batch!r}: give at least 1")
        self.policy = policy
        self.batch = batch
        self._strategy = POLICIES[policy](batch)
        # Branches in rotation order with their pending tickets, oldest first.
        self._pending: OrderedDict[str, deque[Ticket[T]]] = OrderedDict()
        self._serving: dict[int, str] = {}  # lane -> branch it is serving now
        self._last: dict[int, str] = {}  # lane -> branch it served last
        self._streak: dict[int, int] = {}  # lane -> requests of _last served in a row
        self._home: dict[str, int] = {}  # branch -> the lane that served it last
        self._next_id = 0

    def push(self, branch: str, payload: T) -> Ticket[T]:
        ticket = Ticket(self._next_id, branch, payload)
        self._next_id += 1
        self._pending.setdefault(branch, deque()).append(ticket)
        return ticket

    def take_id(self) -> int:
        """A ticket id for work served outside the queue (a run in its own view)."""
        self._next_id += 1
        return self._next_id - 1

    def __len__(self) -> int:
        return sum(len(q) for q in self._pending.values())

    def pop(self, lane: int, leave_to: Collection[int] = ()) -> Ticket[T] | None:
        """The ticket `lane` serves next, or None when nothing it may serve is pending.
        `leave_to`: lanes (idle ones the scheduler wakes for their last branch, `last_waits`)
        left the branch each served last: its servers hold that branch's documents. With a
        lane each, 5 agents' lints switched a lane to another branch 113-147 times in 500
        answers without it, 20-25 with it."""
        if lane in self._serving:
            raise RuntimeError(f"lane {lane} is still serving {self._serving[lane]!r}; call done()")
        branch = self._choose(lane, leave_to)
        if branch is None:
            return None
        tickets = self._pending[branch]
        ticket = tickets.popleft()
        if not tickets:
            del self._pending[branch]
        elif self._strategy.rotates and branch != self._last.get(lane):
            self._pending.move_to_end(branch)  # it had its turn: to the back of the rotation
        previous = self._last.get(lane)
        self._streak[lane] = self._streak.get(lane, 0) + 1 if branch == previous else 1
        if previous is not None and self._home.get(previous) == lane:
            del self._home[previous]
        self._serving[lane] = self._last[lane] = branch
        self._home[branch] = lane
        return ticket

    def done(self, lane: int) -> None:
        self._serving.pop(lane, None)

    def _free(self, branch: str) -> bool:
        return branch not in self._serving.values()

    def _choose(self, lane: int, leave_to: Collection[int]) -> str | None:
        return self._strategy.choose(self, lane, self._candidates(lane, leave_to))

    def _candidates(self, lane: int, leave_to: Collection[int]) -> Iterator[str]:
        """Free branches with pending requests, in rotation order, but those left to other
        lanes, lazily: a policy that takes the first one costs O(lanes), not O(branches)."""
        busy = set(self._serving.values())
        busy.update(b for b, home in self._home.items() if home in leave_to and home != lane)
        return (b for b in self._pending if b not in busy)

    # What policies read (the queue's state, never changed by them).

    def waiting_branches(self) -> int:
        """How many branches have pending requests and no lane serving them (O(lanes))."""
        busy = set(self._serving.values())
        return len(self._pending) - sum(1 for branch in busy if branch in self._pending)

    def serving(self) -> int:
        """How many lanes are serving a branch now."""
        return len(self._serving)

    def waiting(self, branch: str) -> bool:
        """Whether `branch` has pending requests and no lane serves it."""
        return branch in self._pending and self._free(branch)

    def oldest(self, branch: str) -> int:
        """Ticket id of the branch's oldest pending request."""
        return self._pending[branch][0].id

    def last(self, lane: int) -> str | None:
        return self._last.get(lane)

    def last_waits(self, lane: int) -> bool:
        """Whether the branch `lane` served last, and no lane since, is waiting (`waiting`)."""
        last = self._last.get(lane)
        return last is not None and self._home.get(last) == lane and self.waiting(last)

    def streak(self, lane: int) -> int:
        return self._streak.get(lane, 0)


class Strategy(Protocol):
    rotates: bool  # a branch that had its turn goes to the back of the rotation

    def choose(self, queue: RequestQueue[Any], lane: int, candidates: Iterable[str]) -> str | None:
        """One of `candidates` (free branches with pending requests, in rotation order, an
        iterator), or None when there is none."""
        ...


class RoundRobin:
    """`round-robin` (the default): a lane that just served branch B keeps serving B's queued
    requests first, up to `batch` in a row, because they need no switch (or a small one: same
    branch, next version); then it rotates over the branches with pending requests, so a
    branch that queues 100 requests cannot starve one that queues 1."""

    rotates = True

    def __init__(self, batch: int) -> None:
        self.batch = batch

    def choose(self, queue: RequestQueue[Any], lane: int, candidates: Iterable[str]) -> str | None:
        last = queue.last(lane)
        if queue.last_waits(lane) and queue.streak(lane) < self.batch:
            return last
        # The front of the rotation, but not the branch that just used its batch when
        # another one is waiting.
        fallback = None
        for branch in candidates:
            if branch != last:
                return branch
            fallback = branch
        return fallback


class Fifo:
    """`fifo`: the oldest request whose branch is not busy on another lane, strictly (the
    baseline the timeline compares against; consecutive requests of one branch still cost no
    switch)."""

    rotates = False

    def __init__(self, batch: int) -> None:
        del batch  # fifo never batches

    def choose(self, queue: RequestQueue[Any], lane: int, candidates: Iterable[str]) -> str | None:
        return min(candidates, key=queue.oldest, default=None)


POLICIES: dict[str, Callable[[int], Strategy]] = {"round-robin": RoundRobin, "fifo": Fifo}
Policy = str  # a name in POLICIES


# Servers that lint one file at a time from its text (a lane of them is light: one small
# process that needs no other file), by name; every other server is treated as heavy.
SINGLE_FILE_SERVERS = frozenset({"ruff"})


def single_file_only(servers: Sequence[str]) -> bool:
    """Some servers, each a single-file linter: such lanes may answer from the user's folder,
    the branch's files given as open documents, and mount only when a job needs it
    (`Lane.documents`)."""
    return bool(servers) and all(name in SINGLE_FILE_SERVERS for name in servers)


MAX_LIGHT_LANES = 4  # lanes opened at first, at most: the one services loop limits too
LIGHT_LANES_PER_CORE, MOST_LIGHT_LANES = 3, 6  # what load grows single-file linters' lanes to
MAX_HEAVY_LANES = 4
CORES_PER_HEAVY_LANE = 2  # a cross-file server's check and its garbage collection
HEAVY_LANE_MEMORY = 2 * 2**30  # what a cross-file server's lane is budgeted on a large project


def default_lanes(servers: Sequence[str], cores: int, memory: int | None = None) -> int:
    """How many lanes (shadows with their servers) a workspace opens unless told; `memory`:
    the bytes the machine has available (None: unknown).

    Single-file linters (ruff): one lane per core, up to `MAX_LIGHT_LANES`: each lane is a small
    overlay process and a server that uses a core while it lints, so branches' lints run side
    by side. Any cross-file server (pyright, basedpyright, tsserver...): one lane per two cores,
    up to `MAX_HEAVY_LANES`, as long as half the available memory holds `HEAVY_LANE_MEMORY` per
    lane (at least one lane): such a server checks a file on one thread, and its garbage
    collection takes almost as much CPU again on threads of its own (pyright re-checks the
    switched file after every switch: 0.15 s, 0.27 s of CPU, on more-itertools' more.py), so
    one lane fills two cores. A lane per core made them compete: on 2 cores, 20 branches of
    more-itertools with pyright (`benchmarks/worktrees.py`, 2026-12-03, nine runs on one lane
    and four on two) had their first answers after 6.5-11.0 s on one lane against 8.2-11.1 s
    on two, with 8.7-13.7 s of CPU spent until then against 14.1-19.1 s, 255-375 ms of CPU
    per answer against 483, and 550-580 MB of PSS against 850-920. Each lane holds a whole
    program's analysis (on more-itertools, 100-200 MB of PSS per pyright).
    """
    if not servers:  # nothing to serve side by side
        return 1
    if single_file_only(servers):
        return max(1, min(cores, MAX_LIGHT_LANES))
    fits = MAX_HEAVY_LANES if memory is None else memory // 2 // HEAVY_LANE_MEMORY
    return max(1, min(cores // CORES_PER_HEAVY_LANE, MAX_HEAVY_LANES, fits))


def most_lanes(servers: Sequence[str], cores: int, memory: int | None = None) -> int:
    """The most lanes a workspace opened with the default lanes grows to (`LaneGrowth`).

    Single-file linters: three per core, up to `MOST_LIGHT_LANES`. With one lane per core a
    lane alternates between the server's lint and this process's work on the answer, so a
    core idles; more lanes per core fill it (1,000 branches on more-itertools with ruff, 2
    quiet cores: 209-217 answers/s on 2 fixed lanes, 220-272 growing to 4; 246 in one run
    growing to 6), and with a lane each, few agents' lanes switch branches less (5 / 20 / 50
    agents asking again as soon as answered, `benchmarks/worktrees.py`, medians of three
    rounds: 0.91 / 1.07 / 1.03x the answers/s of a worktree and server each growing to 6,
    0.90 / 1.02 / 0.98x growing to 4, on 2026-12-04; growing to 6 or to the branches asking,
    later that day, 1.01 / 0.97 / 1.11x and 0.93 / 1.04 / 1.04x). Each lane costs an overlay
    process and a server (those two 0.02-0.05 s of CPU to open, ~13 MB PSS), which is why they
    open only under load, and no more than branches ask.
    Cross-file servers keep `default_lanes`: each lane is a whole program's analysis (100 MB
    to 2 GiB) that takes seconds to index before its first answer, and one lane per two cores
    already fills the cores.
    """
    start = default_lanes(servers, cores, memory)
    if single_file_only(servers):
        return max(start, min(LIGHT_LANES_PER_CORE * cores, MOST_LIGHT_LANES))
    return start


GROW_AFTER = 16  # the dispatches the growth rule looks back on
CONTENDED_SHARE = 0.75  # of them leaving a branch with no lane free, before lanes open


class LaneGrowth:
    """When a workspace serving on its default lanes opens more, up to `limit`.

    The rule, counted in dispatches (a lane taking a request), never in time: when at least
    `CONTENDED_SHARE` of the last `after` dispatches left a branch waiting (a pending request
    no lane serves: every lane was busy, and one more would have served it at once), lanes
    open one after another up to the limit, or, if fewer, up to the branches asking (the
    most those dispatches served in turn, or saw served and waiting at once): 5 agents get
    5 lanes, not a sixth that would never serve; none other opens meanwhile, and the count
    starts again once they joined. So a burst shorter than `after` requests opens nothing,
    nor do agents that leave the lanes idle between their requests. Agents that ask again
    as soon as they are answered spend part of each turn in this process (staging, their
    answer), so they rarely all wait at once: 5 such agents on 2 lanes (more-itertools with
    ruff, 2026-12-04) left someone waiting at 93% of dispatches but more branches than lanes
    at under 1%, which the rule of the earlier rounds asked for 16 dispatches in a row: it
    never opened a lane, and served 0.78x the answers/s of a worktree and a server per agent;
    on 4 lanes, 1.01x. Opening one lane per `after` dispatches left the fourth lane joining
    after 0.34-0.43 s of a 2 s run of those agents; all at once, after 0.16-0.19 s (266-325
    answers/s against 231-286, three pairs). The limit bounds what this costs (two lanes of a
    single-file linter on 2 cores: an overlay process and a server each, ~13 MB). A lane
    that fails to open stops the growth. Lanes never shrink: an idle lane's servers stop
    after the workspace's `idle_timeout`, which leaves its overlay process (a few MB), and
    closing the workspace closes every lane.
    """

    def __init__(self, limit: int, after: int = GROW_AFTER) -> None:
        if after < 1:
            raise ArgumentError(f"after={after!r}: give at least 1 dispatch")
        self.limit = limit
        self.after = after
        self.opening = 0  # lanes starting
        self.grown = 0  # lanes opened so far
        # Each dispatch: the branch it served, how many it left waiting, and how many asked
        # at once (those served on a lane then, and those waiting).
        self._recent: deque[tuple[str, int, int]] = deque(maxlen=after)

    def dispatched(self, branch: str, waiting: int, served: int, lanes: int) -> int:
        """A lane took a request of `branch`, leaving `waiting` branches waiting for the
        `lanes` ready lanes, `served` of which are serving one: how many lanes to open now
        (0: none; then call `opened` for each, or `failed`)."""
        if self.opening or lanes >= self.limit:
            self._recent.clear()
            return 0
        self._recent.append((branch, waiting, served + waiting))
        contended = sum(1 for _, left, _ in self._recent if left)
        if len(self._recent) < self.after or contended < CONTENDED_SHARE * self.after:
            return 0
        took_turns = len({served_one for served_one, _, _ in self._recent})
        asking = max(took_turns, *(at_once for _, _, at_once in self._recent))
        self._recent.clear()
        self.opening = max(0, min(self.limit, asking) - lanes)
        return self.opening

    def opened(self) -> None:
        """A lane joined the scheduler."""
        self.opening -= 1
        self.grown += 1

    def failed(self) -> None:
        """A lane could not open: grow no more (each try costs a second of starts)."""
        self.opening = 0
        self.limit = 0
