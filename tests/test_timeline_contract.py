"""The timeline contract, shared with the extension's tests (labextension/test/contract.test.ts):
tests/fixtures/timeline_contract.json is what the kernel sends the lab extension (the bundle
and the live feed's messages) and every text both sides show for it. Here: Python builds
exactly that bundle and those messages from the fixture's events, and writes the same texts."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import pytest

from shadowkernel.kernel.live import delta, snapshot
from shadowkernel.sched.timeline import MIME_TYPE, OUTSIDE, Event, Timeline, summarize

FIXTURE = Path(__file__).parent / "fixtures" / "timeline_contract.json"
CONTRACT: dict[str, Any] = json.loads(FIXTURE.read_text())
BUNDLE = CONTRACT["bundle"]
FEED = CONTRACT["feed"]
# The scheduler's order (as requests finish), which the live feed sends as it is.
SERVED = [Event(**e) for e in [*FEED["snapshot"]["timeline"]["events"], *FEED["events"]["events"]]]


def as_json(value: Any) -> Any:
    """What the extension receives: the value through JSON."""
    return json.loads(json.dumps(value))


def test_the_fixture_covers_what_the_contract_is_about() -> None:
    events = BUNDLE["events"]
    assert len({e["branch"] for e in events}) >= 3 and {0, 1, OUTSIDE} <= {
        e["lane"] for e in events
    }
    assert {e["kind"] for e in events} == {"lint", "navigation", "run"}
    assert any(e["switch"] > 0 for e in events) and any(not e["ok"] for e in events)
    assert any(e["client"] for e in events) and any(not e["client"] for e in events)
    assert [e.id for e in SERVED] != [e["id"] for e in events], "the feed's order is not sorted"
    # 0.001125 s is 1.125 ms exactly in binary: a tie, which JavaScript rounds up (1.13)
    # and Python's format to even (1.12).
    assert any("queued at 1.13 ms" in t["tooltip"][2] for t in CONTRACT["texts"])


def test_python_sends_exactly_the_bundle() -> None:
    timeline = Timeline(SERVED, title=BUNDLE["title"])
    assert as_json(timeline.to_json()) == BUNDLE
    assert as_json(timeline._repr_mimebundle_()[MIME_TYPE]) == BUNDLE


def test_the_live_feed_sends_the_summary_with_the_events() -> None:
    first = FEED["snapshot"]["seq"]
    assert as_json(snapshot(SERVED[:first], BUNDLE["title"])) == FEED["snapshot"]
    assert as_json(delta(SERVED, first)) == FEED["events"]
    # Summed in the feed's order, the same summary as far as the texts show it.
    assert summarize(SERVED).lines() == CONTRACT["summary_lines"]


def test_python_writes_the_summary_lines() -> None:
    timeline = Timeline(SERVED, title=BUNDLE["title"])
    assert timeline.summary.lines() == CONTRACT["summary_lines"]
    assert timeline.summary_text() == "; ".join(CONTRACT["summary_lines"])


@pytest.mark.parametrize("texts", CONTRACT["texts"], ids=lambda t: f"event {t['id']}")
def test_python_writes_each_events_tooltip_and_request_rows(texts: dict[str, Any]) -> None:
    timeline = Timeline(SERVED)
    event = timeline.request(texts["id"]).event
    assert event.describe(CONTRACT["show_lane"]) == texts["tooltip"]
    assert [list(row) for row in event.rows()] == texts["rows"]
    request = str(timeline.request(texts["id"])).splitlines()
    assert request == [
        f"request {event.id}",
        *(f"  {name}: {value}" for name, value in texts["rows"]),
    ]
    if event.lane == OUTSIDE:  # said even when the lanes are not shown
        assert "in a view of its own" in event.describe(show_lane=False)[0]
    if event.client:
        assert texts["tooltip"][0].startswith(f"branch {event.branch} ({event.client}) · ")
        assert ["asked by", event.client] in texts["rows"]


def test_the_html_fallback_shows_the_same_tooltips_and_who_asked() -> None:
    page = Timeline(SERVED)._repr_mimebundle_()["text/html"]
    for texts in CONTRACT["texts"]:
        assert f"<title>{html.escape('. '.join(texts['tooltip']))}</title>" in page
    assert "<td>b (claude-code)</td>" in page and "<td>fix-parser (cursor)</td>" in page
