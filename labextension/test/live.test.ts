/**
 * Unit tests of the live merge: snapshots, new events, overlaps, gaps and resync.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { fromBundle, LiveState, merge, parseLive } from '../src/live';

function raw(id: number, branch = 'a'): Record<string, unknown> {
  const t = id * 0.01;
  return { id, branch, version: 1, op: 'lint', kind: 'lint', queued: t, started: t, finished: t + 0.005 };
}

/** A stand-in for the kernel's summary of `seq` events: the merge shows it as sent (the
 * contract test checks real ones, from the kernel's code). */
function summary(seq: number): Record<string, unknown> {
  return { events: seq, switches: 0, switch_time: 0, serve_time: seq * 0.005, branches: { a: { requests: seq, mean_wait: 0 } } };
}

function bundle(count: number, seq = count): Record<string, unknown> {
  return {
    schema: 1,
    title: 'agents',
    events: Array.from({ length: count }, (_, i) => raw(i)),
    summary: summary(count),
    live: { feed: 'f1', target: 'shadowkernel.timeline', seq }
  };
}

function events(from: number, seq: number): Record<string, unknown> {
  const fresh = Array.from({ length: seq - from }, (_, i) => raw(from + i, 'b'));
  return { type: 'events', from, seq, events: fresh, summary: summary(seq) };
}

const ids = (state: LiveState): number[] => state.timeline.events.map(e => e.id);

describe('the bundle', () => {
  test('names its feed, or has none', () => {
    assert.deepEqual(parseLive(bundle(2)), { feed: 'f1', target: 'shadowkernel.timeline', seq: 2 });
    assert.equal(parseLive({ schema: 1, events: [] }), null);
    assert.equal(parseLive({ live: { feed: 3 } }), null);
  });

  test('a saved bundle without live info counts its events', () => {
    const { live: _unused, ...saved } = bundle(3);
    assert.equal(fromBundle(saved).seq, 3);
  });
});

describe('merge', () => {
  test("appends new events that continue the sequence and takes the kernel's summary", () => {
    const result = merge(fromBundle(bundle(2)), events(2, 4));
    assert.equal(result.kind, 'updated');
    assert.deepEqual(ids(result.state), [0, 1, 2, 3]);
    assert.equal(result.state.seq, 4);
    assert.deepEqual(result.state.timeline.summary, summary(4));
    assert.equal(result.state.timeline.title, 'agents');
  });

  test('a gap (a missed message) asks for a resync and keeps the state', () => {
    const state = fromBundle(bundle(2));
    const result = merge(state, events(3, 5));
    assert.equal(result.kind, 'resync');
    assert.equal(result.state, state);
  });

  test('an overlapping message adds only what is new; an old one changes nothing', () => {
    const state = merge(fromBundle(bundle(2)), events(2, 4)).state;
    const overlap = merge(state, events(3, 6));
    assert.deepEqual(ids(overlap.state), [0, 1, 2, 3, 4, 5]);
    assert.equal(merge(overlap.state, events(2, 4)).kind, 'unchanged');
  });

  test('the snapshot after a resync replaces the events; an older snapshot is ignored', () => {
    const state = fromBundle(bundle(2));
    assert.equal(merge(state, events(4, 6)).kind, 'resync');
    const snapshot = { type: 'snapshot', seq: 6, timeline: bundle(6) };
    const synced = merge(state, snapshot);
    assert.equal(synced.kind, 'updated');
    assert.deepEqual(ids(synced.state), [0, 1, 2, 3, 4, 5]);
    assert.equal(merge(synced.state, events(6, 7)).kind, 'updated');
    assert.equal(merge(synced.state, { type: 'snapshot', seq: 3, timeline: bundle(3) }).kind, 'unchanged');
  });

  test('an update_display of the running cell is a snapshot too', () => {
    const state = merge(fromBundle(bundle(2)), events(2, 3)).state;
    const grown = fromBundle(bundle(5));
    assert.ok(grown.seq > state.seq);
    assert.deepEqual(ids(grown), [0, 1, 2, 3, 4]);
  });

  test('status messages and malformed ones', () => {
    const state = fromBundle(bundle(1));
    assert.equal(merge(state, { type: 'gone' }).kind, 'unchanged');
    assert.throws(() => merge(state, { type: 'events', from: 'x', seq: 2, events: [] }), /integer "from" and "seq"/);
    const { summary: _unused, ...noSummary } = events(1, 2);
    assert.throws(() => merge(state, noSummary), /needs the kernel's "summary"/);
  });
});
