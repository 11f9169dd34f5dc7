/**
 * The SVG chart: axis, one row per branch, one bar per request. All numbers come from
 * layout.ts; this module only turns them into DOM.
 *
 * Bars are kept in a map by event id and updated in place, so a live update or a zoom
 * step keeps the focused and hovered bar where they are.
 *
 * Scale: with hundreds of rows the plot scrolls, and a draw moves only the bars of the rows
 * in sight (plus a margin); the others stay in the DOM (every bar is still listed and
 * focusable) with their last geometry, marked stale and moved when scrolled into sight.
 * Accessible names are recomputed only when a bar's event changed.
 */
import {
  ariaLabel,
  BarGeometry,
  describeEvent,
  formatTick,
  layoutBars,
  niceTicks,
  plural,
  Rows,
  span,
  tickStep,
  tickUnit,
  TimelineEvent,
  timeToX,
  truncateLabel,
  View
} from './layout';
import { setAttrs, svg } from './dom';

export const LABEL_WIDTH = 112;
export const RIGHT_PAD = 16;
const AXIS_HEIGHT = 22;
const TRACK_HEIGHT = 26;
const BAR_HEIGHT = 14;
/** Rows this far (px) above or below the scrolled view are drawn too, for smooth scrolling. */
const SIGHT_MARGIN = 200;

/** The vertical pixel range of the chart in sight. */
export interface Sight {
  readonly top: number;
  readonly bottom: number;
}

export class Chart {
  constructor(private readonly plot: HTMLElement, private readonly id: string) {
    this.svg = svg('svg', { class: 'sk-Timeline-svg' }, plot);
    const defs = svg('defs', {}, this.svg);
    const hatch = svg(
      'pattern',
      { id: this.hatchId, width: 5, height: 5, patternUnits: 'userSpaceOnUse', patternTransform: 'rotate(45)' },
      defs
    );
    svg('rect', { class: 'sk-Timeline-hatch-ground', width: 5, height: 5 }, hatch);
    svg('line', { class: 'sk-Timeline-hatch-line', x1: 0, x2: 0, y1: 0, y2: 5 }, hatch);
    const clip = svg('clipPath', { id: `${id}-clip` }, defs);
    this.clipRect = svg('rect', {}, clip);
    const inner = svg('g', { transform: `translate(${LABEL_WIDTH},0)` }, this.svg);
    this.bands = svg('g', { class: 'sk-Timeline-bands', 'aria-hidden': 'true' }, inner);
    this.labels = svg('g', { class: 'sk-Timeline-labels', 'aria-hidden': 'true' }, inner);
    const clipped = svg('g', { 'clip-path': `url(#${id}-clip)` }, inner);
    this.grid = svg('g', { class: 'sk-Timeline-grid', 'aria-hidden': 'true' }, clipped);
    this.axis = svg('g', { class: 'sk-Timeline-axis', 'aria-hidden': 'true' }, inner);
    this.rowsLayer = svg('g', { class: 'sk-Timeline-rows' }, clipped);
    this.empty = svg('text', { class: 'sk-Timeline-empty' }, inner);
  }

  readonly svg: SVGSVGElement;

  get hatchId(): string {
    return `${this.id}-hatch`;
  }

  /** The bar element of an event, while it is drawn (inside the window). */
  barOf(id: number): SVGGElement | undefined {
    return this.bars.get(id);
  }

  /** Draw `events` in the time window `view` on a plot area `width` pixels wide; bars
   * outside the vertical pixel range `sight` (of the scrolled plot) may stay stale. */
  draw(events: readonly TimelineEvent[], rows: Rows, view: View, width: number, sight?: Sight): void {
    this.sight = sight ?? { top: -Infinity, bottom: Infinity };
    const height = AXIS_HEIGHT + Math.max(1, rows.totalTracks) * TRACK_HEIGHT + 4;
    setAttrs(this.svg, { width: LABEL_WIDTH + width + RIGHT_PAD, height });
    setAttrs(this.clipRect, { x: -1, y: 0, width: width + 2, height });
    this.drawAxis(view, width, height);
    this.drawRows(rows, width);
    const showLane = new Set(events.map(e => e.lane)).size > 1;
    this.drawBars(layoutBars(events, rows, view, width), showLane);
    this.empty.textContent = events.length === 0 ? 'No requests yet' : '';
    setAttrs(this.empty, { x: width / 2, y: AXIS_HEIGHT + TRACK_HEIGHT / 2 });
  }

  private drawAxis(view: View, width: number, height: number): void {
    const maxTicks = Math.max(2, Math.floor(width / 90));
    const step = tickStep(span(view), maxTicks);
    const unit = tickUnit(view);
    this.grid.replaceChildren();
    this.axis.replaceChildren();
    for (const t of niceTicks(view, maxTicks)) {
      const x = timeToX(view, width, t);
      svg('line', { x1: x, x2: x, y1: AXIS_HEIGHT - 4, y2: height }, this.grid);
      // Labels are not clipped (the first one may reach into the label column); the one
      // at the right edge is right-aligned so it stays inside the figure.
      const anchor = x > width - 24 ? 'end' : 'middle';
      const label = svg('text', { x, y: AXIS_HEIGHT - 8, 'text-anchor': anchor }, this.axis);
      label.textContent = formatTick(t, step, unit);
    }
  }

  /** Bands and labels change only with the rows or the width, not on every zoom step. */
  private drawRows(rows: Rows, width: number): void {
    if (rows === this.drawnRows && width === this.drawnWidth) {
      return;
    }
    this.drawnRows = rows;
    this.drawnWidth = width;
    this.labels.replaceChildren();
    this.bands.replaceChildren();
    rows.branches.forEach((row, index) => {
      const y = AXIS_HEIGHT + row.firstTrack * TRACK_HEIGHT;
      const band = {
        class: index % 2 ? 'sk-mod-odd' : 'sk-mod-even',
        x: -LABEL_WIDTH,
        y,
        width: LABEL_WIDTH + width + RIGHT_PAD,
        height: row.tracks * TRACK_HEIGHT
      };
      svg('rect', band, this.bands);
      const label = svg('text', { x: -10, y: y + TRACK_HEIGHT / 2 }, this.labels);
      label.textContent = truncateLabel(row.branch, 14);
      svg('title', {}, label).textContent = row.branch;
      this.branchGroup(row.branch, `branch ${row.branch}: ${plural(row.requests, 'request')}`);
    });
    const present = new Set(rows.branches.map(row => row.branch));
    for (const [branch, group] of this.branchGroups) {
      if (!present.has(branch)) {
        group.remove();
        this.branchGroups.delete(branch);
      }
    }
  }

  private branchGroup(branch: string, label: string): SVGGElement {
    let group = this.branchGroups.get(branch);
    if (!group) {
      group = svg('g', { role: 'list' }, this.rowsLayer);
      this.branchGroups.set(branch, group);
    }
    setAttrs(group, { 'aria-label': label, 'data-branch': branch });
    return group;
  }

  private drawBars(bars: BarGeometry[], showLane: boolean): void {
    const visible = new Set(bars.map(bar => bar.event.id));
    // Drop bars that left the window first, so the ordering below never has to move the
    // focused bar past them (moving a focused element blurs it).
    for (const [id, el] of this.bars) {
      if (!visible.has(id)) {
        if (el.contains(document.activeElement)) {
          this.plot.focus();
        }
        el.remove();
        this.bars.delete(id);
      }
    }
    // Keep document order = time order inside each branch, which is the Tab order;
    // only out-of-place bars move.
    const cursors = new Map<string, ChildNode | null>();
    for (const bar of bars) {
      const group = this.branchGroups.get(bar.event.branch);
      if (!group) {
        continue;
      }
      const drawn = this.bars.get(bar.event.id);
      const el = drawn ?? this.createBar(bar.event.id);
      this.label(el, bar.event, showLane);
      if (!drawn || this.inSight(bar.track)) {
        this.updateBar(el, bar);
      }
      const cursor = cursors.has(bar.event.branch) ? cursors.get(bar.event.branch)! : group.firstChild;
      if (el !== cursor) {
        group.insertBefore(el, cursor);
      }
      cursors.set(bar.event.branch, el.nextSibling);
    }
  }

  private createBar(id: number): SVGGElement {
    const el = svg('g', { class: 'sk-Timeline-bar', role: 'listitem', tabindex: 0, 'data-event-id': id });
    svg('line', { class: 'sk-Timeline-wait' }, el);
    svg('line', { class: 'sk-Timeline-wait sk-Timeline-queued' }, el);
    svg('rect', { class: 'sk-Timeline-serve', height: BAR_HEIGHT, rx: 2 }, el);
    svg('rect', { class: 'sk-Timeline-switch', height: BAR_HEIGHT, fill: `url(#${this.hatchId})` }, el);
    this.bars.set(id, el);
    return el;
  }

  private inSight(track: number): boolean {
    const y = AXIS_HEIGHT + track * TRACK_HEIGHT;
    return y + TRACK_HEIGHT >= this.sight.top - SIGHT_MARGIN && y <= this.sight.bottom + SIGHT_MARGIN;
  }

  /** Kind, branch and accessible name: only when the bar's event changed. */
  private label(el: SVGGElement, e: TimelineEvent, showLane: boolean): void {
    const key = showLane ? 'lane' : '';
    const drawn = this.labelled.get(el);
    if (drawn?.event === e && drawn.key === key) {
      return;
    }
    this.labelled.set(el, { event: e, key });
    setAttrs(el, {
      'data-kind': e.kind,
      'data-branch': e.branch,
      'aria-label': ariaLabel(describeEvent(e, showLane))
    });
    el.classList.toggle('sk-mod-failed', !e.ok);
  }

  private updateBar(el: SVGGElement, bar: BarGeometry): void {
    const e = bar.event;
    const top = AXIS_HEIGHT + bar.track * TRACK_HEIGHT + (TRACK_HEIGHT - BAR_HEIGHT) / 2;
    const middle = top + BAR_HEIGHT / 2;
    const waits = bar.startX - bar.queuedX > 1;
    const [wait, queued, serve, switchPart] = Array.from(el.children);
    const waitVisibility = waits ? 'visible' : 'hidden';
    setAttrs(wait!, { x1: bar.queuedX, x2: bar.startX, y1: middle, y2: middle, visibility: waitVisibility });
    setAttrs(queued!, { x1: bar.queuedX, x2: bar.queuedX, y1: middle - 4, y2: middle + 4, visibility: waitVisibility });
    setAttrs(serve!, { x: bar.startX, y: top, width: bar.endX - bar.startX });
    setAttrs(switchPart!, {
      x: bar.startX,
      y: top,
      width: Math.max(0, bar.switchEndX - bar.startX),
      visibility: e.switch > 0 ? 'visible' : 'hidden'
    });
  }

  private readonly clipRect: SVGRectElement;
  private readonly bands: SVGGElement;
  private readonly labels: SVGGElement;
  private readonly grid: SVGGElement;
  private readonly axis: SVGGElement;
  private readonly rowsLayer: SVGGElement;
  private readonly empty: SVGTextElement;
  private sight: Sight = { top: -Infinity, bottom: Infinity };
  private readonly labelled = new WeakMap<SVGGElement, { event: TimelineEvent; key: string }>();
  private drawnRows: Rows | null = null;
  private drawnWidth = 0;
  private readonly bars = new Map<number, SVGGElement>();
  private readonly branchGroups = new Map<string, SVGGElement>();
}
