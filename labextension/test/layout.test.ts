/**
 * Unit tests of the pure layout code, run by node's built-in test runner (`npm test`).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import {
  assignRows,
  clampView,
  describeEvent,
  formatMs,
  formatTick,
  fullView,
  layoutBars,
  MIN_BAR_PX,
  MIN_SPAN,
  niceTicks,
  panView,
  parseTimeline,
  showsAll,
  summaryLines,
  tickStep,
  tickUnit,
  timeToX,
  TimelineDataError,
  TimelineEvent,
  truncateLabel,
  View,
  xToTime,
  zoomView
} from '../src/layout';

function event(overrides: Partial<TimelineEvent> & { id: number; branch: string }): TimelineEvent {
  return {
    version: 1,
    op: 'lint',
    kind: 'lint',
    lane: 0,
    queued: 0,
    started: 0,
    switch: 0,
    finished: 0.01,
    ok: true,
    outcome: '',
    client: '',
    ...overrides
  };
}

const CONTRACT_EXAMPLE = {
  schema: 1,
  title: 'shadow timeline',
  events: [
    {
      id: 0,
      branch: 'a',
      version: 2,
      op: 'lint',
      kind: 'lint',
      lane: 0,
      queued: 0.0,
      started: 0.004,
      switch: 0.0012,
      finished: 0.031,
      ok: true,
      outcome: '3 lints (1 new)',
      client: ''
    }
  ],
  summary: {
    events: 1,
    switches: 1,
    switch_time: 0.0012,
    serve_time: 0.027,
    branches: { a: { requests: 1, mean_wait: 0.004 } }
  },
  simulated: false
};

const close = (actual: number, expected: number, eps = 1e-9): void =>
  assert.ok(Math.abs(actual - expected) <= eps, `${actual} is not within ${eps} of ${expected}`);

describe('parseTimeline', () => {
  test('reads the contract example as it is', () => {
    const t = parseTimeline(CONTRACT_EXAMPLE);
    assert.equal(t.title, 'shadow timeline');
    assert.equal(t.simulated, false);
    assert.equal(t.events.length, 1);
    assert.deepEqual(t.events[0], CONTRACT_EXAMPLE.events[0]);
    assert.deepEqual(t.summary, CONTRACT_EXAMPLE.summary);
  });

  test('rejects another schema with a message saying what to do', () => {
    assert.throws(
      () => parseTimeline({ ...CONTRACT_EXAMPLE, schema: 2 }),
      (e: unknown) =>
        e instanceof TimelineDataError && /schema 2 is not supported/.test(e.message) && /install/.test(e.message)
    );
  });

  test('names the event and field that is wrong', () => {
    const bad = { ...CONTRACT_EXAMPLE, events: [{ ...CONTRACT_EXAMPLE.events[0], kind: 'compile' }] };
    assert.throws(() => parseTimeline(bad), /event 0: "kind" must be one of lint, navigation, run, got "compile"/);
    const noTime = { ...CONTRACT_EXAMPLE, events: [{ ...CONTRACT_EXAMPLE.events[0], started: 'soon' }] };
    assert.throws(() => parseTimeline(noTime), /event 0: "started" must be a finite number/);
    assert.throws(() => parseTimeline([]), /must be a JSON object/);
  });

  test('fills optional fields and clamps times out of order', () => {
    const t = parseTimeline({
      schema: 1,
      events: [{ branch: 'b', version: 1, op: 'run', kind: 'run', queued: 1, started: 0.5, finished: 0.9 }],
      summary: CONTRACT_EXAMPLE.summary
    });
    const e = t.events[0]!;
    assert.equal(e.id, 0);
    assert.equal(e.lane, 0);
    assert.equal(e.ok, true);
    assert.equal(e.outcome, '');
    assert.equal(e.client, '');
    assert.equal(e.started, 1);
    assert.equal(e.finished, 1);
    assert.equal(e.switch, 0);
    assert.equal(t.title, 'shadow timeline');
  });

  test("rejects a bundle without the kernel's summary, naming the field", () => {
    const { summary: _unused, ...withoutSummary } = CONTRACT_EXAMPLE;
    assert.throws(() => parseTimeline(withoutSummary), /needs the kernel's "summary"/);
    const badBranch = { ...CONTRACT_EXAMPLE, summary: { ...CONTRACT_EXAMPLE.summary, branches: { a: { requests: 1 } } } };
    assert.throws(() => parseTimeline(badBranch), /summary of branch "a": "mean_wait" must be a finite number/);
    const noCount = { ...CONTRACT_EXAMPLE, summary: { ...CONTRACT_EXAMPLE.summary, switches: null } };
    assert.throws(() => parseTimeline(noCount), /summary: "switches" must be a finite number, got null/);
  });

  test('an empty timeline is valid: a live display starts that way', () => {
    const empty = { events: 0, switches: 0, switch_time: 0, serve_time: 0, branches: {} };
    const t = parseTimeline({ schema: 1, events: [], summary: empty });
    assert.equal(t.events.length, 0);
    assert.deepEqual(fullView(t.events), { start: 0, end: 1 });
  });
});

describe('assignRows', () => {
  test('one row per branch, in order of first appearance', () => {
    const rows = assignRows([
      event({ id: 0, branch: 'zeta', queued: 0, finished: 0.01 }),
      event({ id: 1, branch: 'alpha', queued: 0.005, started: 0.01, finished: 0.02 }),
      event({ id: 2, branch: 'zeta', queued: 0.02, started: 0.02, finished: 0.03 })
    ]);
    assert.deepEqual(
      rows.branches.map(b => [b.branch, b.firstTrack, b.tracks, b.requests]),
      [
        ['zeta', 0, 1, 2],
        ['alpha', 1, 1, 1]
      ]
    );
    assert.equal(rows.totalTracks, 2);
    assert.deepEqual([...rows.trackOf.entries()].sort(), [
      [0, 0],
      [1, 1],
      [2, 0]
    ]);
  });

  test('overlapping requests of one branch get their own tracks, reused when free', () => {
    const rows = assignRows([
      event({ id: 0, branch: 'a', queued: 0, started: 0, finished: 0.1, lane: 0 }),
      event({ id: 1, branch: 'a', queued: 0.01, started: 0.01, finished: 0.05, lane: 1 }),
      event({ id: 2, branch: 'a', queued: 0.06, started: 0.06, finished: 0.07, lane: 1 }),
      event({ id: 3, branch: 'b', queued: 0, started: 0.1, finished: 0.2 })
    ]);
    assert.deepEqual(rows.branches[0], { branch: 'a', firstTrack: 0, tracks: 2, requests: 3 });
    assert.deepEqual(rows.branches[1], { branch: 'b', firstTrack: 2, tracks: 1, requests: 1 });
    assert.equal(rows.trackOf.get(1), 1);
    assert.equal(rows.trackOf.get(2), 1);
    assert.equal(rows.trackOf.get(3), 2);
  });

  test('rows stay put as a live timeline grows', () => {
    const first = [event({ id: 0, branch: 'b', queued: 0 }), event({ id: 1, branch: 'a', queued: 0.001 })];
    const grown = [...first, event({ id: 2, branch: 'c', queued: 0.02 }), event({ id: 3, branch: 'a', queued: 0.03 })];
    const before = assignRows(first);
    const after = assignRows(grown);
    assert.deepEqual(
      after.branches.slice(0, 2).map(b => b.branch),
      before.branches.map(b => b.branch)
    );
    for (const [id, track] of before.trackOf) {
      assert.equal(after.trackOf.get(id), track);
    }
  });
});

describe('scale, zoom and pan', () => {
  const bounds: View = { start: 0, end: 10 };

  test('time and pixels convert both ways', () => {
    const view = { start: 2, end: 4 };
    assert.equal(timeToX(view, 400, 3), 200);
    assert.equal(xToTime(view, 400, 100), 2.5);
  });

  test('fullView pads the data extent but never before zero', () => {
    const v = fullView([event({ id: 0, branch: 'a', queued: 0, finished: 1 })]);
    assert.equal(v.start, 0);
    close(v.end, 1.02);
    const late = fullView([event({ id: 0, branch: 'a', queued: 5, started: 5, finished: 5 })]);
    assert.ok(late.start < 5 && late.end > 5, 'a single instant still gets a window');
  });

  test('zooming keeps the anchor under the pointer', () => {
    const view = { start: 2, end: 6 };
    const zoomed = zoomView(view, 0.5, 3, bounds);
    close(zoomed.end - zoomed.start, 2);
    const before = (3 - view.start) / (view.end - view.start);
    const after = (3 - zoomed.start) / (zoomed.end - zoomed.start);
    close(after, before);
  });

  test('zoom in then out by the inverse factor returns the same window', () => {
    const view = { start: 2, end: 6 };
    const back = zoomView(zoomView(view, 0.8, 5, bounds), 1 / 0.8, 5, bounds);
    close(back.start, 2);
    close(back.end, 6);
  });

  test('zoom stops at the minimum span and at the whole timeline', () => {
    const tiny = zoomView({ start: 1, end: 1.001 }, 1e-6, 1, bounds);
    close(tiny.end - tiny.start, MIN_SPAN);
    assert.deepEqual(zoomView({ start: 2, end: 6 }, 100, 4, bounds), bounds);
  });

  test('pan moves by time and stops at the edges', () => {
    assert.deepEqual(panView({ start: 2, end: 4 }, 1, bounds), { start: 3, end: 5 });
    assert.deepEqual(panView({ start: 2, end: 4 }, -5, bounds), { start: 0, end: 2 });
    assert.deepEqual(panView({ start: 2, end: 4 }, 50, bounds), { start: 8, end: 10 });
  });

  test('clampView shrinks a window wider than the bounds', () => {
    assert.deepEqual(clampView({ start: -5, end: 50 }, bounds), bounds);
  });

  test('showsAll tells a fitted window from a zoomed one', () => {
    assert.ok(showsAll(bounds, bounds));
    assert.ok(!showsAll({ start: 0, end: 9 }, bounds));
  });
});

describe('layoutBars', () => {
  const events = [
    event({ id: 0, branch: 'a', queued: 0, started: 1, switch: 0.5, finished: 3 }),
    event({ id: 1, branch: 'b', queued: 3, started: 3, switch: 0, finished: 3.000001 }),
    event({ id: 2, branch: 'a', queued: 8, started: 9, finished: 10 })
  ];
  const rows = assignRows(events);

  test('places queue, switch and serve parts on the scale', () => {
    const [bar] = layoutBars(events, rows, { start: 0, end: 4 }, 400);
    assert.ok(bar);
    assert.equal(bar.queuedX, 0);
    assert.equal(bar.startX, 100);
    assert.equal(bar.switchEndX, 150);
    assert.equal(bar.endX, 300);
    assert.equal(bar.track, 0);
  });

  test('leaves out events outside the window and widens tiny ones', () => {
    const bars = layoutBars(events, rows, { start: 0, end: 4 }, 400);
    assert.deepEqual(
      bars.map(b => b.event.id),
      [0, 1]
    );
    const tiny = bars[1]!;
    assert.equal(tiny.endX - tiny.startX, MIN_BAR_PX);
    assert.equal(tiny.track, 1);
  });

  test('clamps coordinates just past the plot edges when zoomed in', () => {
    const [bar] = layoutBars(events, rows, { start: 2, end: 2.001 }, 400);
    assert.ok(bar);
    assert.equal(bar.queuedX, -MIN_BAR_PX);
    assert.equal(bar.endX, 400 + MIN_BAR_PX);
  });
});

describe('ticks', () => {
  test('steps are 1, 2 or 5 times a power of ten', () => {
    close(tickStep(1, 10), 0.1);
    close(tickStep(0.031, 5), 0.01);
    close(tickStep(7, 4), 2);
    close(tickStep(0.0003, 3), 0.0001);
  });

  test('ticks cover the window on round values', () => {
    assert.deepEqual(niceTicks({ start: 0.013, end: 0.061 }, 5), [0.02, 0.03, 0.04, 0.05, 0.06]);
    assert.deepEqual(niceTicks({ start: 0, end: 10 }, 5), [0, 2, 4, 6, 8, 10]);
  });

  test('labels read in ms under a second, in seconds past it', () => {
    assert.equal(tickUnit({ start: 0, end: 0.06 }), 'ms');
    assert.equal(tickUnit({ start: 0.5, end: 1.5 }), 's');
    assert.equal(formatTick(0.02, 0.01, 'ms'), '20 ms');
    assert.equal(formatTick(0.0025, 0.0005, 'ms'), '2.5 ms');
    assert.equal(formatTick(4, 2, 's'), '4 s');
    assert.equal(formatTick(12.5, 0.5, 's'), '12.5 s');
    assert.equal(formatTick(12.51, 0.01, 's'), '12.51 s');
  });
});

describe('texts', () => {
  test('durations in ms with precision by size', () => {
    assert.equal(formatMs(0.0012), '1.20 ms');
    assert.equal(formatMs(0.027), '27.0 ms');
    assert.equal(formatMs(12.3456), '12346 ms');
  });

  test('the tooltip says branch, version, op, timings in ms and outcome', () => {
    const e = parseTimeline(CONTRACT_EXAMPLE).events[0]!;
    assert.deepEqual(describeEvent(e), [
      'branch a · version 2 · lint',
      'waited 4.00 ms · switch 1.20 ms · served 25.8 ms',
      'queued at 0.00 ms, finished at 31.0 ms',
      '3 lints (1 new)'
    ]);
  });

  test('the tooltip names the kind when the op differs, a failure and the shadow', () => {
    const e = event({ id: 3, branch: 'b', op: 'definition', kind: 'navigation', ok: false, outcome: 'timeout', lane: 1 });
    const lines = describeEvent(e, true);
    assert.equal(lines[0], 'branch b · version 1 · definition (navigation) · shadow 1');
    assert.equal(lines[3], 'failed: timeout');
  });

  test('the summary compares switching with serving and lists waits', () => {
    const lines = summaryLines(parseTimeline(CONTRACT_EXAMPLE).summary);
    assert.deepEqual(lines, [
      '1 request · 1 switch',
      'switching 1.20 ms vs serving 25.8 ms (4.4% of busy time)',
      'mean wait: a 4.00 ms (1 request)'
    ]);
    const empty = { events: 0, switches: 0, switch_time: 0, serve_time: 0, branches: {} };
    assert.deepEqual(summaryLines(empty), ['0 requests · 0 switches', 'switching 0.00 ms vs serving 0.00 ms (0.0% of busy time)', 'mean wait: none yet']);
  });

  test('long branch names are cut with an ellipsis', () => {
    assert.equal(truncateLabel('refactor-parser', 8), 'refacto…');
    assert.equal(truncateLabel('a', 8), 'a');
  });
});

describe('requestRows', () => {
  test('say what the request was, how long each part took and what it answered', async () => {
    const { requestRows, parseEvent } = await import('../src/layout');
    const e = parseEvent({ ...CONTRACT_EXAMPLE.events[0], lints: 3, new_lints: 1, exit_code: null }, 0);
    assert.equal(e.exit_code, undefined);
    const rows = Object.fromEntries(requestRows(e));
    assert.equal(rows.branch, 'a');
    assert.equal(rows.version, '2');
    assert.equal(rows['queue wait'], '4.00 ms');
    assert.equal(rows.switch, '1.20 ms');
    assert.equal(rows.serve, '25.8 ms');
    assert.equal(rows.answer, '3 lints, 1 new');
    const run = parseEvent({ ...CONTRACT_EXAMPLE.events[0], op: 'run', kind: 'run', ok: true, exit_code: 1 }, 0);
    assert.equal(Object.fromEntries(requestRows(run)).answer, 'exit code 1');
    assert.throws(() => parseEvent({ ...CONTRACT_EXAMPLE.events[0], lints: 'many' }, 0), /"lints" must be a number or null/);
  });
});
