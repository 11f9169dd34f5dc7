/**
 * The timeline contract, shared with the Python tests (tests/test_timeline_contract.py): the
 * fixture is what the kernel sends, and every text both sides must show for it. Here: the
 * extension reads the bundle and the live feed as they are, shows the kernel's summary, and
 * writes the same tooltip, request rows and summary lines, the asking client included.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, test } from 'node:test';

import { describeEvent, OUTSIDE, parseTimeline, requestRows, summaryLines } from '../src/layout';
import { fromBundle, merge } from '../src/live';

// Compiled to lib-test/test/: the fixture is in the repository's tests/fixtures/.
const FIXTURE = resolve(__dirname, '../../../tests/fixtures/timeline_contract.json');

interface Contract {
  readonly bundle: { readonly events: readonly Record<string, unknown>[]; readonly summary: unknown };
  readonly show_lane: boolean;
  readonly summary_lines: readonly string[];
  readonly texts: readonly { readonly id: number; readonly tooltip: string[]; readonly rows: [string, string][] }[];
  readonly feed: { readonly snapshot: Record<string, unknown>; readonly events: Record<string, unknown> };
}

const contract = JSON.parse(readFileSync(FIXTURE, 'utf8')) as Contract;

describe('the timeline contract', () => {
  const timeline = parseTimeline(contract.bundle);

  test('the bundle reads as sent: every event, and the summary the kernel computed', () => {
    assert.equal(timeline.events.length, contract.bundle.events.length);
    assert.deepEqual(timeline.summary, contract.bundle.summary);
    for (const [i, e] of timeline.events.entries()) {
      const sent = contract.bundle.events[i]!;
      assert.equal(e.client, sent.client);
      for (const name of ['lints', 'new_lints', 'exit_code'] as const) {
        assert.equal(e[name], sent[name] ?? undefined, `event ${e.id}: ${name}`);
      }
    }
    assert.ok(timeline.events.some(e => e.client !== ''), 'the fixture has requests from an MCP client');
  });

  test('the summary lines are the kernel\'s', () => {
    assert.deepEqual(summaryLines(timeline.summary), contract.summary_lines);
  });

  test("each event's tooltip and request rows are the kernel's, naming the client that asked", () => {
    assert.deepEqual(
      timeline.events.map(e => e.id),
      contract.texts.map(t => t.id)
    );
    for (const [i, e] of timeline.events.entries()) {
      const expected = contract.texts[i]!;
      assert.deepEqual(describeEvent(e, contract.show_lane), expected.tooltip, `tooltip of ${e.id}`);
      assert.deepEqual(requestRows(e), expected.rows, `rows of ${e.id}`);
      if (e.lane === OUTSIDE) {
        assert.match(describeEvent(e, false)[0]!, / · in a view of its own$/, 'said even when the lanes are not shown');
      }
      if (e.client) {
        assert.match(describeEvent(e)[0]!, new RegExp(`^branch ${e.branch} \\(${e.client}\\) · `));
        assert.deepEqual(requestRows(e)[1], ['asked by', e.client]);
      }
    }
  });

  test('the live feed ends where the bundle is: the same events and summary texts', () => {
    const empty = { schema: 1, events: [], summary: { events: 0, switches: 0, switch_time: 0, serve_time: 0, branches: {} } };
    let state = fromBundle(empty);
    for (const message of [contract.feed.snapshot, contract.feed.events]) {
      const result = merge(state, message);
      assert.equal(result.kind, 'updated');
      state = result.state;
    }
    const byId = (a: { id: number }, b: { id: number }): number => a.id - b.id;
    assert.deepEqual([...state.timeline.events].sort(byId), [...timeline.events].sort(byId));
    assert.deepEqual(state.timeline.summary, contract.feed.events.summary);
    assert.deepEqual(summaryLines(state.timeline.summary), contract.summary_lines);
  });
});
