/**
 * The live timeline as plain data: merging the kernel's feed messages into what the view
 * shows. No DOM and no kernel here (feed.ts is the adapter), so the merge and the
 * resynchronisation are unit-tested under node (../test/live.test.ts).
 *
 * The kernel numbers its events by their position in an append-only list: a snapshot
 * carries the first `seq` events, an `events` message the events from position `from` up
 * to `seq`, with the kernel's summary of all `seq` events (shown as sent: the summary is
 * computed in the kernel only). A message whose `from` is beyond what we have means one was
 * missed: the state stays as it is and the caller asks for a snapshot.
 */
import { parseEvent, parseSummary, parseTimeline, Summary, Timeline, TimelineDataError, TimelineEvent } from './layout';

/** What the bundle says about its feed: which one, on which comm target, and where it stood. */
export interface LiveInfo {
  readonly feed: string;
  readonly target: string;
  readonly seq: number;
}

export interface LiveState {
  readonly timeline: Timeline;
  /** How many of the kernel's events `timeline` holds. */
  readonly seq: number;
}

export type Merge =
  | { readonly kind: 'updated'; readonly state: LiveState }
  | { readonly kind: 'unchanged'; readonly state: LiveState }
  | { readonly kind: 'resync'; readonly state: LiveState };

/** Messages the kernel sends on the feed's comm besides events and snapshots. */
export type FeedStatus = 'gone' | 'closed';

/** The bundle's live info, or null when it has none (a plain or simulated timeline). */
export function parseLive(data: unknown): LiveInfo | null {
  const live = (data as { live?: unknown } | null)?.live as Record<string, unknown> | undefined;
  if (!live || typeof live.feed !== 'string' || typeof live.target !== 'string' || typeof live.seq !== 'number') {
    return null;
  }
  return { feed: live.feed, target: live.target, seq: live.seq };
}

/** The state a bundle gives: a saved output, or an update_display of a running cell. */
export function fromBundle(data: unknown): LiveState {
  const timeline = parseTimeline(data);
  return { timeline, seq: parseLive(data)?.seq ?? timeline.events.length };
}

/**
 * Merge one feed message (already JSON) into `state`. A snapshot replaces the events
 * unless it is older than what we have; new events are appended, skipping those we
 * already hold (a message overlapping the last one); a gap asks for a resync.
 */
export function merge(state: LiveState, message: unknown): Merge {
  const msg = message as Record<string, unknown>;
  if (msg.type === 'snapshot') {
    const seq = Number(msg.seq);
    if (!(seq >= state.seq)) {
      return { kind: 'unchanged', state };
    }
    const timeline = parseTimeline(msg.timeline);
    return { kind: 'updated', state: { timeline: { ...timeline, title: state.timeline.title }, seq } };
  }
  if (msg.type !== 'events') {
    return { kind: 'unchanged', state };
  }
  const from = Number(msg.from);
  const seq = Number(msg.seq);
  if (!Number.isInteger(from) || !Number.isInteger(seq) || !Array.isArray(msg.events)) {
    throw new TimelineDataError('a feed message must carry integer "from" and "seq" and a list of "events"');
  }
  if (from > state.seq) {
    return { kind: 'resync', state };
  }
  if (seq <= state.seq) {
    return { kind: 'unchanged', state };
  }
  const fresh = msg.events.slice(state.seq - from).map((raw, i) => parseEvent(raw, state.seq + i));
  const timeline = withEvents(state.timeline, fresh, parseSummary(msg.summary));
  return { kind: 'updated', state: { timeline, seq } };
}

/** The timeline grown by `fresh` events (an event id already held is replaced), with the
 * kernel's summary of them all. */
export function withEvents(timeline: Timeline, fresh: readonly TimelineEvent[], summary: Summary): Timeline {
  const ids = new Set(fresh.map(e => e.id));
  const events = [...timeline.events.filter(e => !ids.has(e.id)), ...fresh];
  return { ...timeline, events, summary };
}
