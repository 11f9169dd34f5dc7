"""One shadow, many branches: the interleaver (scheduler), its pure policy and the timeline."""

from .policy import POLICIES, Policy, RequestQueue, Ticket
from .scheduler import Lane, Scheduler, Snapshot
from .timeline import MIME_TYPE, SCHEMA, Event, Timeline, percentile, summarize

__all__ = [
    "MIME_TYPE",
    "POLICIES",
    "SCHEMA",
    "Event",
    "Lane",
    "Policy",
    "RequestQueue",
    "Scheduler",
    "Ticket",
    "Timeline",
    "Snapshot",
    "percentile",
    "summarize",
]
