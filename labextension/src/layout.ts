/**
 * The timeline as plain data: reading the MIME bundle, rows, the time scale, zoom and
 * pan, axis ticks; texts.ts (re-exported here) has every text the view shows (tooltip,
 * summary, request). The bundle's contract, texts included, is
 * tests/fixtures/timeline_contract.json, which the Python tests check too; the summary is
 * the kernel's (sched/timeline.py), shown as sent, never recomputed here. No DOM here, so all of it is unit-tested under node (see
 * ../test/layout.test.ts); the view only draws what these functions return.
 *
 * Times are seconds since the workspace started, as the kernel emits them.
 */

export * from './texts';

export const MIME_TYPE = 'application/vnd.shadowkernel.timeline+json';

/** The one schema this renderer reads; the kernel bumps it on incompatible changes. */
export const SCHEMA = 1;

export type Kind = 'lint' | 'navigation' | 'run';

export const KINDS: readonly Kind[] = ['lint', 'navigation', 'run'];

/** The lane of a request served outside the shadows (a run in a view of its own). */
export const OUTSIDE = -1;

export interface TimelineEvent {
  readonly id: number;
  readonly branch: string;
  readonly version: number;
  /** The precise operation: lint, definition, references, hover, symbols, run. */
  readonly op: string;
  readonly kind: Kind;
  /** Which shadow served it, when several run side by side; OUTSIDE: none. */
  readonly lane: number;
  readonly queued: number;
  /** The shadow began serving; the switch is the first part of [started, finished]. */
  readonly started: number;
  readonly switch: number;
  readonly finished: number;
  readonly ok: boolean;
  readonly outcome: string;
  /** Who asked, when not the notebook itself (an MCP client's name); '' otherwise. */
  readonly client: string;
  /** The answer's summary, when the kernel recorded one (lints; runs). */
  readonly lints?: number;
  readonly new_lints?: number;
  readonly exit_code?: number;
}

export interface BranchSummary {
  readonly requests: number;
  readonly mean_wait: number;
}

export interface Summary {
  readonly events: number;
  readonly switches: number;
  readonly switch_time: number;
  /** Busy time, finished - started summed: it includes the switches. */
  readonly serve_time: number;
  readonly branches: Readonly<Record<string, BranchSummary>>;
}

export interface Timeline {
  readonly title: string;
  readonly events: readonly TimelineEvent[];
  readonly summary: Summary;
  readonly simulated: boolean;
}

/** The bundle does not match the contract; the message says which field and why. */
export class TimelineDataError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TimelineDataError';
  }
}

// ---------------------------------------------------------------------------------
// Reading the bundle

type Fields = Readonly<Record<string, unknown>>;

function isObject(value: unknown): value is Fields {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function field<T>(
  where: string,
  obj: Fields,
  name: string,
  check: (v: unknown) => v is T,
  what: string,
  fallback?: T
): T {
  const value = obj[name];
  if (value === undefined && fallback !== undefined) {
    return fallback;
  }
  if (!check(value)) {
    throw new TimelineDataError(`${where}: "${name}" must be ${what}, got ${JSON.stringify(value)}`);
  }
  return value;
}

const isFiniteNumber = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);
const isString = (v: unknown): v is string => typeof v === 'string';
const isBoolean = (v: unknown): v is boolean => typeof v === 'boolean';
const isKind = (v: unknown): v is Kind => KINDS.includes(v as Kind);

/**
 * Read one event. Times out of order (a clock hiccup) are clamped rather than
 * rejected, so one odd event never hides a whole saved timeline.
 */
export function parseEvent(raw: unknown, index: number): TimelineEvent {
  const where = `event ${index}`;
  if (!isObject(raw)) {
    throw new TimelineDataError(`${where} must be an object`);
  }
  const num = (name: string, fallback?: number): number =>
    field(where, raw, name, isFiniteNumber, 'a finite number', fallback);
  const queued = num('queued');
  const started = Math.max(queued, num('started'));
  const finished = Math.max(started, num('finished'));
  return {
    id: num('id', index),
    branch: field(where, raw, 'branch', isString, 'a string'),
    version: num('version'),
    op: field(where, raw, 'op', isString, 'a string'),
    kind: field(where, raw, 'kind', isKind, `one of ${KINDS.join(', ')}`),
    lane: num('lane', 0),
    queued,
    started,
    switch: Math.min(Math.max(0, num('switch', 0)), finished - started),
    finished,
    ok: field(where, raw, 'ok', isBoolean, 'true or false', true),
    outcome: field(where, raw, 'outcome', isString, 'a string', ''),
    client: field(where, raw, 'client', isString, 'a string', ''),
    ...answerCounts(where, raw)
  };
}

/** The optional answer counts: absent or null means the request kind has none. */
function answerCounts(where: string, raw: Fields): Partial<Record<'lints' | 'new_lints' | 'exit_code', number>> {
  const counts: Partial<Record<'lints' | 'new_lints' | 'exit_code', number>> = {};
  for (const name of ['lints', 'new_lints', 'exit_code'] as const) {
    if (raw[name] !== undefined && raw[name] !== null) {
      counts[name] = field(where, raw, name, isFiniteNumber, 'a number or null');
    }
  }
  return counts;
}

/** Read the MIME bundle's data, or throw a TimelineDataError that names the problem. */
export function parseTimeline(data: unknown): Timeline {
  if (!isObject(data)) {
    throw new TimelineDataError('the timeline data must be a JSON object');
  }
  if (data.schema !== SCHEMA) {
    throw new TimelineDataError(
      `schema ${JSON.stringify(data.schema)} is not supported (this extension reads schema ${SCHEMA}); ` +
        'install the same shadowkernel version in the kernel and in JupyterLab'
    );
  }
  const rawEvents = field('timeline', data, 'events', Array.isArray, 'a list', []);
  const events = rawEvents.map(parseEvent);
  return {
    title: field('timeline', data, 'title', isString, 'a string', 'shadow timeline'),
    events,
    summary: parseSummary(data.summary),
    simulated: field('timeline', data, 'simulated', isBoolean, 'true or false', false)
  };
}

/**
 * The kernel's summary (the bundle's, or a live message's), checked field by field. The
 * kernel computes it; a bundle without one does not match the contract.
 */
export function parseSummary(raw: unknown): Summary {
  const where = 'summary';
  if (!isObject(raw)) {
    throw new TimelineDataError(`the timeline needs the kernel's "summary", got ${JSON.stringify(raw)}`);
  }
  const num = (obj: Fields, at: string, name: string): number =>
    field(at, obj, name, isFiniteNumber, 'a finite number');
  const rawBranches = field(where, raw, 'branches', isObject, 'an object');
  const branches: Record<string, BranchSummary> = {};
  for (const [name, entry] of Object.entries(rawBranches)) {
    const at = `summary of branch ${JSON.stringify(name)}`;
    if (!isObject(entry)) {
      throw new TimelineDataError(`${at} must be an object`);
    }
    branches[name] = { requests: num(entry, at, 'requests'), mean_wait: num(entry, at, 'mean_wait') };
  }
  return {
    events: num(raw, where, 'events'),
    switches: num(raw, where, 'switches'),
    switch_time: num(raw, where, 'switch_time'),
    serve_time: num(raw, where, 'serve_time'),
    branches
  };
}

// ---------------------------------------------------------------------------------
// Rows

/** One branch: its label row plus extra tracks when its own requests overlap in time. */
export interface BranchRow {
  readonly branch: string;
  /** Index of the branch's first track among all tracks, top to bottom. */
  readonly firstTrack: number;
  readonly tracks: number;
  readonly requests: number;
}

export interface Rows {
  readonly branches: readonly BranchRow[];
  readonly totalTracks: number;
  /** Event id -> track index (among all tracks). */
  readonly trackOf: ReadonlyMap<number, number>;
}

/**
 * One row per branch, in order of first appearance so rows do not jump as a live
 * timeline grows. A branch whose requests overlap (several shadows serving it at once)
 * gets extra tracks, packed greedily by queue time so wait lines never cross bars.
 */
export function assignRows(events: readonly TimelineEvent[]): Rows {
  const byBranch = new Map<string, TimelineEvent[]>();
  const ordered = [...events].sort((a, b) => a.queued - b.queued || a.id - b.id);
  for (const e of ordered) {
    const list = byBranch.get(e.branch);
    if (list) {
      list.push(e);
    } else {
      byBranch.set(e.branch, [e]);
    }
  }
  const branches: BranchRow[] = [];
  const trackOf = new Map<number, number>();
  let firstTrack = 0;
  for (const [branch, list] of byBranch) {
    const trackEnds: number[] = [];
    for (const e of list) {
      let track = trackEnds.findIndex(end => end <= e.queued);
      if (track < 0) {
        track = trackEnds.length;
      }
      trackEnds[track] = e.finished;
      trackOf.set(e.id, firstTrack + track);
    }
    branches.push({ branch, firstTrack, tracks: trackEnds.length, requests: list.length });
    firstTrack += trackEnds.length;
  }
  return { branches, totalTracks: firstTrack, trackOf };
}

// ---------------------------------------------------------------------------------
// Scale, zoom and pan

/** The visible time window, in seconds. */
export interface View {
  readonly start: number;
  readonly end: number;
}

/** The narrowest window one can zoom to: 50 microseconds. */
export const MIN_SPAN = 5e-5;

/** The whole timeline with a little room on both sides; where zoom and pan stay. */
export function fullView(events: readonly TimelineEvent[]): View {
  if (events.length === 0) {
    return { start: 0, end: 1 };
  }
  const start = Math.min(...events.map(e => e.queued));
  const end = Math.max(...events.map(e => e.finished));
  const pad = Math.max((end - start) * 0.02, MIN_SPAN);
  return { start: Math.max(0, start - pad), end: end + pad };
}

export function span(view: View): number {
  return view.end - view.start;
}

export function timeToX(view: View, width: number, t: number): number {
  return ((t - view.start) / span(view)) * width;
}

export function xToTime(view: View, width: number, x: number): number {
  return view.start + (x / width) * span(view);
}

/** Shift a window back inside the bounds, keeping its span (or shrink it to them). */
export function clampView(view: View, bounds: View): View {
  const width = Math.min(Math.max(span(view), MIN_SPAN), span(bounds));
  const start = Math.min(Math.max(view.start, bounds.start), bounds.end - width);
  return { start, end: start + width };
}

/**
 * Zoom by `factor` (< 1 zooms in) keeping time `anchor` at the same place on screen,
 * as a wheel under the pointer or the + and - keys around the focused bar do.
 */
export function zoomView(view: View, factor: number, anchor: number, bounds: View): View {
  const width = Math.min(Math.max(span(view) * factor, MIN_SPAN), span(bounds));
  const fraction = (anchor - view.start) / span(view);
  const start = anchor - fraction * width;
  return clampView({ start, end: start + width }, bounds);
}

/** Move the window by `delta` seconds (positive: later). */
export function panView(view: View, delta: number, bounds: View): View {
  return clampView({ start: view.start + delta, end: view.end + delta }, bounds);
}

/** True when the window shows everything, so a growing timeline should follow its end. */
export function showsAll(view: View, bounds: View): boolean {
  const tolerance = span(bounds) * 1e-9;
  return view.start <= bounds.start + tolerance && view.end >= bounds.end - tolerance;
}

// ---------------------------------------------------------------------------------
// Geometry of bars

export interface BarGeometry {
  readonly event: TimelineEvent;
  readonly track: number;
  /** x of queued, started, end of the switch, finished; in pixels of the plot area. */
  readonly queuedX: number;
  readonly startX: number;
  readonly switchEndX: number;
  readonly endX: number;
}

/** Bars narrower than this would vanish; they are widened, keeping their start. */
export const MIN_BAR_PX = 3;

/**
 * Pixel geometry of the events visible in `view`, on a plot `width` pixels wide.
 * Events wholly outside the window are left out (and coordinates clamped just past the
 * edges), so zooming deep into a long session draws only what shows.
 */
export function layoutBars(
  events: readonly TimelineEvent[],
  rows: Rows,
  view: View,
  width: number
): BarGeometry[] {
  const clamp = (x: number): number => Math.min(Math.max(x, -MIN_BAR_PX), width + MIN_BAR_PX);
  const bars: BarGeometry[] = [];
  for (const event of events) {
    if (event.finished < view.start || event.queued > view.end) {
      continue;
    }
    const startX = timeToX(view, width, event.started);
    const rawEnd = timeToX(view, width, event.finished);
    const endX = Math.max(rawEnd, startX + MIN_BAR_PX);
    const busy = event.finished - event.started;
    const switchShare = busy > 0 ? event.switch / busy : 0;
    bars.push({
      event,
      track: rows.trackOf.get(event.id) ?? 0,
      queuedX: clamp(timeToX(view, width, event.queued)),
      startX: clamp(startX),
      switchEndX: clamp(startX + (endX - startX) * switchShare),
      endX: clamp(endX)
    });
  }
  return bars;
}

// ---------------------------------------------------------------------------------
// Axis ticks

/** Round tick values (1, 2 or 5 times a power of ten) covering the window. */
export function niceTicks(view: View, maxTicks: number): number[] {
  const step = tickStep(span(view), Math.max(1, maxTicks));
  const first = Math.ceil(view.start / step - 1e-9) * step;
  const ticks: number[] = [];
  for (let t = first; t <= view.end + step * 1e-9; t += step) {
    ticks.push(Number(t.toPrecision(12)));
  }
  return ticks;
}

export function tickStep(width: number, maxTicks: number): number {
  const raw = width / maxTicks;
  const power = Math.pow(10, Math.floor(Math.log10(raw)));
  const multiple = [1, 2, 5, 10].find(m => m * power >= raw * (1 - 1e-9)) ?? 10;
  return multiple * power;
}

/** Axis labels read in seconds once the window reaches past one second, else in ms. */
export function tickUnit(view: View): 's' | 'ms' {
  return view.end >= 1 ? 's' : 'ms';
}

/** A tick label with as many decimals as the step needs. */
export function formatTick(t: number, step: number, unit: 's' | 'ms'): string {
  if (unit === 's') {
    return `${t.toFixed(decimals(step))} s`;
  }
  return `${(t * 1000).toFixed(decimals(step * 1000))} ms`;
}

function decimals(step: number): number {
  return Math.max(0, Math.ceil(-Math.log10(step) - 1e-9));
}
