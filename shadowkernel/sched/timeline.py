"""The timeline: what the shadows served, when, and what switching between branches cost.

`Event` is one served request; `Timeline` is an immutable snapshot of events with summary
statistics, a pandas DataFrame view and a rich display: the JupyterLab extension renders
`application/vnd.shadowkernel.timeline+json` (schema 1, see labextension/src/layout.ts), and
`text/html` is a self-contained table plus SVG so the notebook reads well without it.

Times are seconds since the workspace started. `switch` is the first part of
[started, finished]: activating the branch's version and syncing the language servers.
"""

from __future__ import annotations

import html
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any, Generic, Literal, TypeVar

import pandas as pd

from ..errors import NotFound

MIME_TYPE = "application/vnd.shadowkernel.timeline+json"
SCHEMA = 1

Kind = Literal["lint", "navigation", "run"]
T = TypeVar("T")


@dataclass(frozen=True)
class Event:
    id: int
    branch: str
    version: int
    op: str  # lint, definition, references, hover, symbols, run
    kind: Kind
    lane: int  # -1: served outside the lanes (a run in a view of its own)
    queued: float
    started: float
    switch: float
    finished: float
    ok: bool
    outcome: str
    client: str = ""  # who asked, when not the notebook itself (an MCP client's name)
    # The answer's summary, where the request kind has one (None: not that kind, or failed).
    lints: int | None = None
    new_lints: int | None = None
    exit_code: int | None = None

    @property
    def wait(self) -> float:
        return self.started - self.queued

    @property
    def serve(self) -> float:
        return self.finished - self.started

    def describe(self) -> list[str]:
        """The request as a few lines: what the extension's request panel shows too."""
        lines = [
            f"request {self.id}: branch {self.branch}, version {self.version}, "
            f"{self.op} ({self.kind}) "
            + (f"on shadow {self.lane}" if self.lane >= 0 else "in a view of its own"),
            f"waited {self.wait * 1000:.1f} ms in the queue, switch {self.switch * 1000:.1f} ms, "
            f"served {(self.serve - self.switch) * 1000:.1f} ms",
        ]
        answer = [f"{self.lints} lints" if self.lints is not None else "",
                  f"{self.new_lints} new" if self.new_lints is not None else "",
                  f"exit code {self.exit_code}" if self.exit_code is not None else ""]  # fmt: skip
        summary = ", ".join(a for a in answer if a)
        lines.append(("" if self.ok else "failed: ") + (summary or self.outcome or "no answer"))
        return lines


@dataclass(frozen=True)
class Answer(Generic[T]):
    """What a scheduler job returns: the caller's `value`, one line for the timeline, and the
    counts the timeline shows for the request kind (None where the kind has none)."""

    value: T
    outcome: str
    lints: int | None = None
    new_lints: int | None = None
    exit_code: int | None = None


COLUMNS = tuple(f.name for f in fields(Event))


@dataclass(frozen=True)
class BranchSummary:
    requests: int
    mean_wait: float


@dataclass(frozen=True)
class Summary:
    events: int
    switches: int
    switch_time: float
    serve_time: float  # busy time (finished - started), switches included
    branches: dict[str, BranchSummary]


def summarize(events: Sequence[Event]) -> Summary:
    waits: dict[str, list[float]] = {}
    for event in events:
        waits.setdefault(event.branch, []).append(event.wait)
    return Summary(
        events=len(events),
        switches=sum(1 for e in events if e.switch > 0),
        switch_time=sum(e.switch for e in events),
        serve_time=sum(e.serve for e in events),
        branches={b: BranchSummary(len(w), statistics.fmean(w)) for b, w in waits.items()},
    )


def percentile(values: Sequence[float], q: float) -> float:
    """The q-quantile (0..1) by linear interpolation; 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    low = int(k)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (k - low)


DiffSource = Callable[[str, int], str]  # (branch, version) -> unified diff against the base


@dataclass(frozen=True)
class Request:
    """One served request, as `Timeline.request(id)` gives it: the event, its lines, and
    (when the timeline came from a live workspace) the version's diff against the base."""

    event: Event
    _diff: DiffSource | None = None

    def diff(self) -> str:
        if self._diff is None:
            raise NotFound("this timeline has no workspace to read versions from "
                           "(a saved or simulated one): use ws.timeline()")  # fmt: skip
        return self._diff(self.event.branch, self.event.version)

    def __str__(self) -> str:
        return "\n".join(self.event.describe())

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self))


class Timeline:
    """A snapshot of served requests. `frame` is the DataFrame; `summary` the statistics."""

    def __init__(
        self,
        events: Iterable[Event],
        title: str = "shadow timeline",
        simulated: bool = False,
        diff: DiffSource | None = None,
    ) -> None:
        self.events: tuple[Event, ...] = tuple(sorted(events, key=lambda e: (e.started, e.id)))
        self.title = title
        self.simulated = simulated
        self.summary = summarize(self.events)
        self._diff = diff

    @property
    def frame(self) -> pd.DataFrame:
        return pd.DataFrame([asdict(e) for e in self.events], columns=list(COLUMNS))

    def __len__(self) -> int:
        return len(self.events)

    def request(self, id: int) -> Request:
        """The request with event id `id` (the number in the extension's bar labels)."""
        for event in self.events:
            if event.id == id:
                return Request(event, self._diff)
        ids = [e.id for e in self.events]
        known = f"{min(ids)}..{max(ids)}" if ids else "none yet"
        raise NotFound(f"request({id}): no request with that id in this timeline (ids: {known})")

    def switch_percentiles(self) -> dict[str, float]:
        """p50/p95 of switch seconds over the events that switched."""
        switches = [e.switch for e in self.events if e.switch > 0]
        return {"p50": percentile(switches, 0.5), "p95": percentile(switches, 0.95)}

    # -- display -----------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        s = self.summary
        return {
            "schema": SCHEMA,
            "title": self.title,
            "events": [asdict(e) for e in self.events],
            "summary": {
                "events": s.events,
                "switches": s.switches,
                "switch_time": s.switch_time,
                "serve_time": s.serve_time,
                "branches": {b: asdict(v) for b, v in s.branches.items()},
            },
            "simulated": self.simulated,
        }

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {MIME_TYPE: self.to_json(), "text/html": self._html(), "text/plain": repr(self)}

    def summary_text(self) -> str:
        s = self.summary
        waits = ", ".join(
            f"{b} {v.mean_wait * 1000:.1f} ms ({v.requests})" for b, v in s.branches.items()
        )
        return (
            f"{s.events} requests, {s.switches} switches; switching {s.switch_time * 1000:.1f} ms "
            f"vs serving {(s.serve_time - s.switch_time) * 1000:.1f} ms; mean wait: "
            f"{waits or '-'}"
        )

    def __repr__(self) -> str:
        return f"<Timeline {self.title!r}: {self.summary_text()}>"

    def _html(self, max_rows: int = 200) -> str:
        rows = "".join(_html_row(e) for e in self.events[-max_rows:])
        more = len(self.events) - max_rows
        note = f"<p>(last {max_rows} of {len(self.events)} events)</p>" if more > 0 else ""
        head = "".join(
            f"<th>{h}</th>"
            for h in ("id", "branch", "v", "op", "lane", "queued", "wait ms", "switch ms",
                      "serve ms", "ok", "outcome")
        )  # fmt: skip
        return (
            f"<div><b>{html.escape(self.title)}</b>: {html.escape(self.summary_text())}"
            f"{_svg(self.events)}{note}<table><thead><tr>{head}</tr></thead>"
            f"<tbody>{rows}</tbody></table></div>"
        )


def _html_row(e: Event) -> str:
    who = f"{e.branch} ({e.client})" if e.client else e.branch
    cells = (
        e.id, who, e.version, e.op, e.lane, f"{e.queued:.3f}", f"{e.wait * 1000:.1f}",
        f"{e.switch * 1000:.2f}", f"{e.serve * 1000:.1f}", "yes" if e.ok else "no", e.outcome,
    )  # fmt: skip
    return "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>"


_COLORS = {"lint": "#4c78a8", "navigation": "#54a24b", "run": "#e45756"}


def _svg(events: Sequence[Event], width: int = 720, row: int = 14) -> str:
    """One row per branch; a bar per request (switch part darker). No scripts, no styles."""
    if not events:
        return ""
    branches = list(dict.fromkeys(e.branch for e in events))[:40]
    start = min(e.queued for e in events)
    span = max(max(e.finished for e in events) - start, 1e-9)
    label = 90

    def x(t: float) -> float:
        return label + (t - start) / span * (width - label - 4)

    parts = []
    for i, branch in enumerate(branches):
        y = i * row
        parts.append(f'<text x="0" y="{y + row - 3}" font-size="10">{html.escape(branch)}</text>')
        for e in (e for e in events if e.branch == branch):
            w = max(x(e.finished) - x(e.started), 0.5)
            color = _COLORS.get(e.kind, "#888") if e.ok else "#b00"
            title = html.escape(f"{e.op} v{e.version}: {e.outcome}")
            parts.append(
                f'<rect x="{x(e.started):.1f}" y="{y + 2}" width="{w:.1f}" height="{row - 4}" '
                f'fill="{color}"><title>{title}</title></rect>'
            )
    height = len(branches) * row
    return f'<svg width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg">' + (
        "".join(parts) + "</svg>"
    )
