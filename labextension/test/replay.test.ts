/**
 * Unit tests of replay: the timeline at a moment, and the replay clock.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { TimelineEvent } from '../src/layout';
import { advance, eventsAt, REPLAY_MS, replaySpan } from '../src/replay';

const e = (id: number, queued: number, started: number, finished: number, sw = 0): TimelineEvent => ({
  id,
  branch: 'a',
  version: 1,
  op: 'lint',
  kind: 'lint',
  lane: 0,
  queued,
  started,
  switch: sw,
  finished,
  ok: true,
  outcome: '2 lints',
  client: ''
});

const EVENTS = [e(0, 0, 0, 1, 0.5), e(1, 0.5, 1, 2), e(2, 3, 3, 4)];

describe('eventsAt', () => {
  test('shows requests queued by then, cut at that moment', () => {
    const at = eventsAt(EVENTS, 0.75);
    assert.deepEqual(
      at.map(x => [x.id, x.started, x.finished, x.switch, x.outcome]),
      [
        [0, 0, 0.75, 0.5, 'in progress'],
        [1, 0.75, 0.75, 0, 'in progress']
      ]
    );
  });

  test('a finished request is shown as it is; at the end everything is', () => {
    assert.deepEqual(eventsAt(EVENTS, 2.5).map(x => x.outcome), ['2 lints', '2 lints']);
    assert.deepEqual(eventsAt(EVENTS, 4), EVENTS);
    assert.deepEqual(eventsAt(EVENTS, -1), []);
  });

  test('the switch never exceeds what was served so far', () => {
    const [first] = eventsAt(EVENTS, 0.2);
    assert.equal(first!.switch, 0.2);
  });
});

describe('the replay clock', () => {
  test('covers the whole span in REPLAY_MS and stops at its end', () => {
    const span = replaySpan(EVENTS);
    assert.deepEqual(span, { start: 0, end: 4 });
    assert.equal(advance(0, REPLAY_MS / 2, span), 2);
    assert.equal(advance(3.9, REPLAY_MS, span), 4);
    assert.deepEqual(replaySpan([]), { start: 0, end: 0 });
  });
});
