/**
 * Replay as plain data: the timeline as it stood at a moment, and the clock that moves
 * that moment while playing. No DOM (player.ts draws the controls); tested under node.
 */
import { TimelineEvent, View } from './layout';

/** A whole replay lasts this long, however long the session was. */
export const REPLAY_MS = 10_000;

/**
 * The requests as they stood at time `t`: those queued by then, cut at `t` (a request
 * still waiting ends its wait at `t`, one being served is served up to `t`). Answers
 * (ok, outcome, summary) show only once a request has finished.
 */
export function eventsAt(events: readonly TimelineEvent[], t: number): TimelineEvent[] {
  const shown: TimelineEvent[] = [];
  for (const e of events) {
    if (e.queued > t) {
      continue;
    }
    if (e.finished <= t) {
      shown.push(e);
      continue;
    }
    const started = Math.min(e.started, t);
    shown.push({ ...e, started, finished: t, switch: Math.min(e.switch, t - started), ok: true, outcome: 'in progress' });
  }
  return shown;
}

/** From the first queued request to the last finished one. */
export function replaySpan(events: readonly TimelineEvent[]): View {
  if (events.length === 0) {
    return { start: 0, end: 0 };
  }
  return {
    start: Math.min(...events.map(e => e.queued)),
    end: Math.max(...events.map(e => e.finished))
  };
}

/** The replay time `elapsedMs` of wall clock after `t`, at the pace of REPLAY_MS per replay. */
export function advance(t: number, elapsedMs: number, span: View): number {
  const rate = (span.end - span.start) / REPLAY_MS;
  return Math.min(span.end, t + elapsedMs * rate);
}
