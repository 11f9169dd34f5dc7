"""One shadow, many branches: the interleaver (`scheduler`), its pure `policy` and the
`timeline` of what was served.

Requests of many branches queue here; a free lane (one shadow and its language servers) asks
the policy which branch goes next, shows that branch's snapshot and serves the request, and
every request becomes a timeline event. sched/ may import the overlay, the LSP pool, runs and
the text core below it; the public API (workspace/) and the faces sit above and import it.
"""

from .policy import (
    POLICIES,
    LaneGrowth,
    Policy,
    RequestQueue,
    Ticket,
    default_lanes,
    most_lanes,
    single_file_only,
)
from .scheduler import Lane, Scheduler, Snapshot, acting_for
from .timeline import MIME_TYPE, SCHEMA, Answer, Event, Timeline, percentile, summarize

__all__ = [
    "MIME_TYPE",
    "Answer",
    "POLICIES",
    "SCHEMA",
    "Event",
    "Lane",
    "LaneGrowth",
    "Policy",
    "RequestQueue",
    "Scheduler",
    "Ticket",
    "Timeline",
    "Snapshot",
    "acting_for",
    "default_lanes",
    "most_lanes",
    "percentile",
    "single_file_only",
    "summarize",
]
