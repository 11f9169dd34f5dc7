"""The timeline: what the shadows served, when, and what switching between branches cost.

`Event` is one served request; `Timeline` is an immutable snapshot of events with summary
statistics, a pandas DataFrame view and a rich display: the JupyterLab extension renders
`application/vnd.shadowkernel.timeline+json` (schema 1, see labextension/src/layout.ts), and
`text/html` is a self-contained table plus SVG so the notebook reads well without it.
The summary is computed here only, and every text (`Event.describe`, `Event.rows`,
`Summary.lines`) matches texts.ts: tests/fixtures/timeline_contract.json is the contract that
both test suites check.

Times are seconds since the workspace started. `switch` is the first part of
[started, finished]: activating the branch's version and syncing the language servers.
"""

from __future__ import annotations

import html
import json
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, fields
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, Generic, Literal, TypeVar

import pandas as pd

from ..errors import NotFound

MIME_TYPE = "application/vnd.shadowkernel.timeline+json"
SCHEMA = 1

Kind = Literal["lint", "navigation", "run"]
OUTSIDE = -1  # the lane of an event served outside the lanes (a run in a view of its own)
T = TypeVar("T")


@dataclass(frozen=True)
class Event:
    id: int
    branch: str
    version: int
    op: str  # lint, definition, references, hover, symbols, run
    kind: Kind
    lane: int  # OUTSIDE (-1): served outside the lanes (a run in a view of its own)
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

    @property
    def who(self) -> str:
        """The branch, and the client that asked when it was not the notebook itself."""
        return f"{self.branch} ({self.client})" if self.client else self.branch

    def describe(self, show_lane: bool = False) -> list[str]:
        """The request as the extension's tooltip shows it (texts.ts `describeEvent`); joined
        with ". " it is the bar's accessible name, and the title of the HTML fallback's bar."""
        head = [f"branch {self.who}", f"version {self.version}", self._op()]
        if show_lane or self.lane == OUTSIDE:
            head.append(f"shadow {self.lane}" if self.lane != OUTSIDE else "in a view of its own")
        lines = [
            " · ".join(head),
            f"waited {format_ms(self.wait)} · switch {format_ms(self.switch)} · "
            f"served {format_ms(self.serve - self.switch)}",
            f"queued at {format_time(self.queued)}, finished at {format_time(self.finished)}",
        ]
        outcome = ": ".join(p for p in ("" if self.ok else "failed", self.outcome) if p)
        return [*lines, outcome] if outcome else lines

    def rows(self) -> list[tuple[str, str]]:
        """The request panel's rows (texts.ts `requestRows`): what the request was, how long
        each part took, what it answered."""
        counts = [plural(self.lints, "lint") if self.lints is not None else "",
                  f"{self.new_lints} new" if self.new_lints is not None else "",
                  f"exit code {self.exit_code}" if self.exit_code is not None else ""]  # fmt: skip
        answer = ", ".join(c for c in counts if c) or self.outcome or "none"
        return [
            ("branch", self.branch),
            *([("asked by", self.client)] if self.client else []),
            ("version", str(self.version)),
            ("kind", self._op()),
            ("shadow", str(self.lane) if self.lane != OUTSIDE else "none, in a view of its own"),
            ("queue wait", format_ms(self.wait)),
            ("switch", format_ms(self.switch)),
            ("serve", format_ms(self.serve - self.switch)),
            ("answer", answer if self.ok else f"failed: {answer}"),
        ]

    def _op(self) -> str:
        return self.op if self.op == self.kind else f"{self.op} ({self.kind})"


# The texts below are the extension's too (labextension/src/texts.ts), character for
# character: tests/fixtures/timeline_contract.json holds what both must produce.


def events_json(events: Iterable[Event], clock: float) -> str:
    """Events as JSON for another process's timeline (`load_events`); `clock` is the zero
    of their times on this machine's monotonic clock (`time.perf_counter`, which every
    process on the machine shares)."""
    return json.dumps({"schema": SCHEMA, "clock": clock, "events": [asdict(e) for e in events]})


def load_events(text: str) -> tuple[float, list[Event]]:
    """(the clock their times count from, the events) of `events_json`'s text."""
    data = json.loads(text)
    names = {f.name for f in fields(Event)}
    return float(data["clock"]), [Event(**{k: v for k, v in e.items() if k in names})
                                  for e in data["events"]]  # fmt: skip


def format_ms(seconds: float) -> str:
    """A duration in milliseconds with precision that suits its size."""
    ms = seconds * 1000
    digits = 2 if abs(ms) < 10 else 1 if abs(ms) < 1000 else 0
    return f"{to_fixed(ms, digits)} ms"


def format_time(seconds: float) -> str:
    """A moment (seconds since the workspace started): in ms under a second, else in s."""
    return format_ms(seconds) if seconds < 1 else f"{to_fixed(seconds, 3)} s"


def to_fixed(x: float, digits: int) -> str:
    """`x` with `digits` decimals as JavaScript's `toFixed` writes it: a tie (exact in binary,
    as 1234.5 ms) rounds away from zero, where Python's format rounds it to even."""
    exact = Decimal(x + 0.0)  # + 0.0: no "-0.00", as toFixed writes none
    return str(exact.quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


def plural(n: int, one: str, many: str = "") -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


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
    """Computed here only: the bundle and every live feed message carry it, and the
    extension shows it as sent."""

    events: int
    switches: int
    switch_time: float
    serve_time: float  # busy time (finished - started), switches included
    branches: dict[str, BranchSummary]

    def lines(self) -> list[str]:
        """What the extension shows under the title (texts.ts `summaryLines`)."""
        serving = max(0.0, self.serve_time - self.switch_time)
        share = 100 * self.switch_time / self.serve_time if self.serve_time > 0 else 0.0
        waits = " · ".join(f"{b} {format_ms(v.mean_wait)} ({plural(v.requests, 'request')})"
                           for b, v in self.branches.items())  # fmt: skip
        return [
            f"{plural(self.events, 'request')} · {plural(self.switches, 'switch', 'switches')}",
            f"switching {format_ms(self.switch_time)} vs serving {format_ms(serving)} "
            f"({to_fixed(share, 1)}% of busy time)",
            f"mean wait: {waits or 'none yet'}",
        ]


def summarize(events: Sequence[Event]) -> Summary:
    """Branches in order of their first request, as the extension's rows are, whatever order
    `events` come in (a snapshot sorts them; the live feed appends them as they finish)."""
    waits: dict[str, list[float]] = {}
    for event in sorted(events, key=lambda e: (e.queued, e.id)):
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
        rows = (f"  {name}: {value}" for name, value in self.event.rows())
        return "\n".join([f"request {self.event.id}", *rows])

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

    # -- display -----------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        s = self.summary
        return {
            "schema": SCHEMA,
            "title": self.title,
            "events": [asdict(e) for e in self.events],
            "summary": asdict(s),
            "simulated": self.simulated,
        }

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {MIME_TYPE: self.to_json(), "text/html": self._html(), "text/plain": repr(self)}

    def summary_text(self) -> str:
        return "; ".join(self.summary.lines())

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
    cells = (
        e.id, e.who, e.version, e.op, e.lane, f"{e.queued:.3f}", f"{e.wait * 1000:.1f}",
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
    show_lane = len({e.lane for e in events}) > 1

    def x(t: float) -> float:
        return label + (t - start) / span * (width - label - 4)

    parts = []
    for i, branch in enumerate(branches):
        y = i * row
        parts.append(f'<text x="0" y="{y + row - 3}" font-size="10">{html.escape(branch)}</text>')
        for e in (e for e in events if e.branch == branch):
            w = max(x(e.finished) - x(e.started), 0.5)
            color = _COLORS.get(e.kind, "#888") if e.ok else "#b00"
            title = html.escape(". ".join(e.describe(show_lane)))
            parts.append(
                f'<rect x="{x(e.started):.1f}" y="{y + 2}" width="{w:.1f}" height="{row - 4}" '
                f'fill="{color}"><title>{title}</title></rect>'
            )
    height = len(branches) * row
    return f'<svg width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg">' + (
        "".join(parts) + "</svg>"
    )
