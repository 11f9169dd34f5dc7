/**
 * Draws a Timeline as SVG and handles zoom, pan, hover and focus. All numbers come from
 * layout.ts; this module only turns them into DOM and turns input into views.
 *
 * Bars are kept in a map by event id and updated in place, so a live update or a zoom
 * step keeps the focused and hovered bar (and the tooltip) where they are. Everything is
 * built with textContent and attributes, never HTML strings, which is why the renderer
 * can declare itself safe for untrusted notebooks.
 */
import {
  ariaLabel,
  assignRows,
  BarGeometry,
  clampView,
  describeEvent,
  formatTick,
  fullView,
  KINDS,
  layoutBars,
  niceTicks,
  panView,
  plural,
  Rows,
  showsAll,
  span,
  summaryLines,
  tickStep,
  tickUnit,
  Timeline,
  TimelineEvent,
  timeToX,
  truncateLabel,
  View,
  xToTime,
  zoomView
} from './layout';

const SVG_NS = 'http://www.w3.org/2000/svg';

const LABEL_WIDTH = 112;
const RIGHT_PAD = 16;
const AXIS_HEIGHT = 22;
const TRACK_HEIGHT = 26;
const BAR_HEIGHT = 14;
/** Width used before the widget is attached and can measure itself. */
const DEFAULT_WIDTH = 720;
const ZOOM_STEP = 1.5;
const PAN_STEP = 0.2;
/** A drag shorter than this is a click (focus a bar), not a pan. */
const DRAG_THRESHOLD_PX = 3;

let instances = 0;

function svg<K extends keyof SVGElementTagNameMap>(
  tag: K,
  attrs: Record<string, string | number> = {},
  parent?: Element
): SVGElementTagNameMap[K] {
  const el = document.createElementNS(SVG_NS, tag);
  setAttrs(el, attrs);
  parent?.appendChild(el);
  return el;
}

function html<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className: string,
  parent?: Element,
  text?: string
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  el.className = className;
  if (text !== undefined) {
    el.textContent = text;
  }
  parent?.appendChild(el);
  return el;
}

function setAttrs(el: Element, attrs: Record<string, string | number>): void {
  for (const [name, value] of Object.entries(attrs)) {
    const text = typeof value === 'number' ? String(Math.round(value * 100) / 100) : value;
    if (el.getAttribute(name) !== text) {
      el.setAttribute(name, text);
    }
  }
}

/** The swatch drawn in the legend for a part of a bar, with the same classes as the bar. */
function swatch(parent: Element, kind: string, part: string, hatchId: string): void {
  const icon = svg('svg', { width: 18, height: 12, 'aria-hidden': 'true' }, parent);
  const g = svg('g', { class: 'sk-Timeline-bar', 'data-kind': kind }, icon);
  if (part === 'wait') {
    svg('line', { class: 'sk-Timeline-wait', x1: 1, x2: 17, y1: 6, y2: 6 }, g);
    svg('line', { class: 'sk-Timeline-wait', x1: 1, x2: 1, y1: 3, y2: 9 }, g);
  } else {
    svg('rect', { class: 'sk-Timeline-serve', x: 1, y: 1, width: 16, height: 10 }, g);
    if (part === 'switch') {
      svg('rect', { class: 'sk-Timeline-switch', x: 1, y: 1, width: 16, height: 10, fill: `url(#${hatchId})` }, g);
    }
    if (part === 'failed') {
      g.classList.add('sk-mod-failed');
    }
  }
}

export class TimelineView {
  readonly node: HTMLDivElement;

  constructor() {
    this.id = `shadowkernel-timeline-${++instances}`;
    // Until the first valid bundle arrives only the error line may show.
    this.node = html('div', 'sk-Timeline sk-mod-empty');
    const header = html('div', 'sk-Timeline-header', this.node);
    this.titleNode = html('span', 'sk-Timeline-title', header);
    this.badge = html('span', 'sk-Timeline-badge', header, 'simulated');
    this.badge.title = 'These events come from a simulation, not from real language servers';
    this.buildToolbar(header);
    this.buildLegend();
    this.summary = html('div', 'sk-Timeline-summary', this.node);
    this.plot = html('div', 'sk-Timeline-plot', this.node);
    this.plot.tabIndex = 0;
    this.plot.setAttribute('role', 'figure');
    this.svg = this.buildSvg();
    this.tooltip = html('div', 'sk-Timeline-tooltip', this.node);
    this.tooltip.id = `${this.id}-tooltip`;
    this.tooltip.setAttribute('role', 'tooltip');
    this.tooltip.hidden = true;
    this.error = html('div', 'sk-Timeline-error', this.node);
    this.error.setAttribute('role', 'alert');
    this.error.hidden = true;

    this.plot.addEventListener('wheel', this.onWheel, { passive: false });
    this.plot.addEventListener('pointerdown', this.onPointerDown);
    this.plot.addEventListener('pointermove', this.onPointerMove);
    this.plot.addEventListener('pointerup', this.onPointerUp);
    this.plot.addEventListener('pointercancel', this.onPointerUp);
    this.plot.addEventListener('pointerover', this.onPointerOver);
    this.plot.addEventListener('pointerout', this.onPointerOut);
    this.plot.addEventListener('focusin', this.onFocusIn);
    this.plot.addEventListener('focusout', this.onFocusOut);
    this.node.addEventListener('keydown', this.onKeyDown);
    this.resizeObserver = new ResizeObserver(() => this.onResize());
    this.resizeObserver.observe(this.plot);
  }

  /** Show a timeline; called again with the grown data on live updates. */
  show(timeline: Timeline): void {
    this.timeline = timeline;
    this.rows = assignRows(timeline.events);
    this.bounds = fullView(timeline.events);
    // With no window (everything shown) the view follows the timeline as it grows; a
    // window the user zoomed or panned to stays, clamped in case the data shrank.
    if (this.window) {
      this.setWindow(this.window);
    }
    this.error.hidden = true;
    this.node.classList.remove('sk-mod-empty');
    this.titleNode.textContent = timeline.title;
    this.badge.hidden = !timeline.simulated;
    this.summary.replaceChildren(...summaryLines(timeline.summary).map(line => html('div', '', undefined, line)));
    this.plot.setAttribute(
      'aria-label',
      `${timeline.title}: ${plural(this.rows.branches.length, 'branch', 'branches')}, ` +
        `${plural(timeline.events.length, 'request')}. Plus and minus zoom, arrow keys pan, 0 fits all.`
    );
    this.render();
  }

  /** Replace the chart by a message; used when the bundle does not match the contract. */
  showError(message: string): void {
    this.error.textContent = `Cannot show this shadowkernel timeline: ${message}`;
    this.error.hidden = false;
  }

  dispose(): void {
    this.resizeObserver.disconnect();
    this.node.removeEventListener('keydown', this.onKeyDown);
  }

  // -------------------------------------------------------------------------------
  // Drawing

  private get currentView(): View {
    return this.window ?? this.bounds;
  }

  private get plotWidth(): number {
    const measured = this.plot.clientWidth || DEFAULT_WIDTH;
    return Math.max(80, measured - LABEL_WIDTH - RIGHT_PAD);
  }

  private render(): void {
    if (!this.timeline) {
      return;
    }
    const width = this.plotWidth;
    const height = AXIS_HEIGHT + Math.max(1, this.rows.totalTracks) * TRACK_HEIGHT + 4;
    const view = this.currentView;
    setAttrs(this.svg, { width: LABEL_WIDTH + width + RIGHT_PAD, height });
    setAttrs(this.clipRect, { x: -1, y: 0, width: width + 2, height });
    this.renderAxis(view, width, height);
    this.renderRows(width);
    this.renderBars(layoutBars(this.timeline.events, this.rows, view, width));
    this.empty.textContent = this.timeline.events.length === 0 ? 'No requests yet' : '';
    setAttrs(this.empty, { x: width / 2, y: AXIS_HEIGHT + TRACK_HEIGHT / 2 });
    this.zoomOutButton.disabled = this.window === null;
    this.fitButton.disabled = this.window === null;
    this.refreshTooltip();
  }

  private renderAxis(view: View, width: number, height: number): void {
    const maxTicks = Math.max(2, Math.floor(width / 90));
    const step = tickStep(span(view), maxTicks);
    const unit = tickUnit(view);
    const ticks = niceTicks(view, maxTicks);
    this.grid.replaceChildren();
    this.axis.replaceChildren();
    for (const t of ticks) {
      const x = timeToX(view, width, t);
      svg('line', { x1: x, x2: x, y1: AXIS_HEIGHT - 4, y2: height }, this.grid);
      // Labels are not clipped (the first one may reach into the label column); the one
      // at the right edge is right-aligned so it stays inside the figure.
      const anchor = x > width - 24 ? 'end' : 'middle';
      const label = svg('text', { x, y: AXIS_HEIGHT - 8, 'text-anchor': anchor }, this.axis);
      label.textContent = formatTick(t, step, unit);
    }
  }

  private renderRows(width: number): void {
    this.labels.replaceChildren();
    this.bands.replaceChildren();
    this.rows.branches.forEach((row, index) => {
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
    for (const [branch, group] of this.branchGroups) {
      if (!this.rows.branches.some(row => row.branch === branch)) {
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

  private renderBars(bars: BarGeometry[]): void {
    const showLane = new Set(this.timeline?.events.map(e => e.lane)).size > 1;
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
      const el = this.bars.get(bar.event.id) ?? this.createBar(bar.event.id);
      this.updateBar(el, bar, showLane);
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
    svg('rect', { class: 'sk-Timeline-switch', height: BAR_HEIGHT, fill: `url(#${this.id}-hatch)` }, el);
    this.bars.set(id, el);
    return el;
  }

  private updateBar(el: SVGGElement, bar: BarGeometry, showLane: boolean): void {
    const e = bar.event;
    const top = AXIS_HEIGHT + bar.track * TRACK_HEIGHT + (TRACK_HEIGHT - BAR_HEIGHT) / 2;
    const middle = top + BAR_HEIGHT / 2;
    const waits = bar.startX - bar.queuedX > 1;
    const [wait, queued, serve, switchPart] = Array.from(el.children);
    setAttrs(el, {
      'data-kind': e.kind,
      'data-branch': e.branch,
      'aria-label': ariaLabel(describeEvent(e, showLane))
    });
    el.classList.toggle('sk-mod-failed', !e.ok);
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

  // -------------------------------------------------------------------------------
  // Tooltip

  private showTooltip(id: number, source: Element): void {
    this.tooltipFor = { id, source };
    this.refreshTooltip();
  }

  private hideTooltip(): void {
    this.tooltipFor?.source.removeAttribute('aria-describedby');
    this.tooltipFor = null;
    this.tooltip.hidden = true;
  }

  /** Redraw the tooltip for its bar, after a live update changed its data or position. */
  private refreshTooltip(): void {
    const target = this.tooltipFor;
    const event = target && this.timeline?.events.find(e => e.id === target.id);
    const el = target && this.bars.get(target.id);
    if (!target || !event || !el) {
      if (target) {
        this.hideTooltip();
      }
      return;
    }
    const showLane = new Set(this.timeline?.events.map(e => e.lane)).size > 1;
    this.tooltip.replaceChildren(...describeEvent(event, showLane).map(line => html('div', '', undefined, line)));
    this.tooltip.hidden = false;
    el.setAttribute('aria-describedby', this.tooltip.id);
    const box = this.node.getBoundingClientRect();
    const bar = (el.querySelector('.sk-Timeline-serve') ?? el).getBoundingClientRect();
    const tip = this.tooltip.getBoundingClientRect();
    const left = Math.min(Math.max(0, bar.left - box.left), Math.max(0, box.width - tip.width));
    const above = bar.top - box.top - tip.height - 6;
    const top = above >= 0 ? above : bar.bottom - box.top + 6;
    this.tooltip.style.left = `${left}px`;
    this.tooltip.style.top = `${top}px`;
  }

  // -------------------------------------------------------------------------------
  // Input

  private setView(view: View | null): void {
    this.setWindow(view);
    this.render();
  }

  private setWindow(view: View | null): void {
    const clamped = view && clampView(view, this.bounds);
    this.window = clamped && !showsAll(clamped, this.bounds) ? clamped : null;
  }

  private zoomBy(factor: number, anchor?: number): boolean {
    const view = this.currentView;
    const next = zoomView(view, factor, anchor ?? (view.start + view.end) / 2, this.bounds);
    const changed = next.start !== view.start || next.end !== view.end;
    if (changed) {
      this.setView(next);
    }
    return changed;
  }

  private panBy(delta: number): boolean {
    const view = this.currentView;
    const next = panView(view, delta, this.bounds);
    const changed = next.start !== view.start;
    if (changed) {
      this.setView(next);
    }
    return changed;
  }

  private timeAtClientX(clientX: number): number | undefined {
    const x = clientX - this.svg.getBoundingClientRect().left - LABEL_WIDTH;
    return x >= 0 ? xToTime(this.currentView, this.plotWidth, x) : undefined;
  }

  private focusedEvent(): TimelineEvent | undefined {
    const el = (document.activeElement as Element | null)?.closest('[data-event-id]');
    const id = el ? Number(el.getAttribute('data-event-id')) : NaN;
    return this.timeline?.events.find(e => e.id === id);
  }

  /** The wheel zooms around the pointer; sideways scrolling pans. When the view cannot
   * change (already fully zoomed out) the wheel is left to scroll the notebook. */
  private readonly onWheel = (event: WheelEvent): void => {
    const scale = event.deltaMode === WheelEvent.DOM_DELTA_LINE ? 16 : 1;
    const handled =
      Math.abs(event.deltaX) > Math.abs(event.deltaY)
        ? this.panBy((event.deltaX * scale * span(this.currentView)) / this.plotWidth)
        : this.zoomBy(Math.exp(event.deltaY * scale * 0.002), this.timeAtClientX(event.clientX));
    if (handled) {
      event.preventDefault();
    }
  };

  private readonly onPointerDown = (event: PointerEvent): void => {
    if (event.button === 0) {
      this.drag = { pointerId: event.pointerId, x: event.clientX, view: this.currentView, moved: false };
    }
  };

  private readonly onPointerMove = (event: PointerEvent): void => {
    const drag = this.drag;
    if (!drag || drag.pointerId !== event.pointerId) {
      return;
    }
    const dx = event.clientX - drag.x;
    if (!drag.moved && Math.abs(dx) < DRAG_THRESHOLD_PX) {
      return;
    }
    if (!drag.moved) {
      drag.moved = true;
      this.plot.setPointerCapture(event.pointerId);
      this.plot.classList.add('sk-mod-dragging');
      this.hideTooltip();
    }
    this.setView(panView(drag.view, (-dx * span(drag.view)) / this.plotWidth, this.bounds));
  };

  private readonly onPointerUp = (event: PointerEvent): void => {
    if (this.drag?.pointerId === event.pointerId) {
      if (this.plot.hasPointerCapture(event.pointerId)) {
        this.plot.releasePointerCapture(event.pointerId);
      }
      this.plot.classList.remove('sk-mod-dragging');
      this.drag = null;
    }
  };

  private readonly onPointerOver = (event: PointerEvent): void => {
    const el = (event.target as Element).closest('[data-event-id]');
    if (el && !this.drag?.moved) {
      this.showTooltip(Number(el.getAttribute('data-event-id')), el);
    }
  };

  private readonly onPointerOut = (event: PointerEvent): void => {
    const from = (event.target as Element).closest('[data-event-id]');
    const to = (event.relatedTarget as Element | null)?.closest?.('[data-event-id]');
    if (from && from !== to && from !== document.activeElement) {
      this.hideTooltip();
    }
  };

  private readonly onFocusIn = (event: FocusEvent): void => {
    const el = (event.target as Element).closest('[data-event-id]');
    if (el) {
      this.showTooltip(Number(el.getAttribute('data-event-id')), el);
    }
  };

  private readonly onFocusOut = (event: FocusEvent): void => {
    if ((event.target as Element).closest('[data-event-id]')) {
      this.hideTooltip();
    }
  };

  /** +/- zoom (around the focused bar), arrows pan, 0 fits, Escape hides the tooltip.
   * Handled keys stop here so they do not also trigger notebook shortcuts. */
  private readonly onKeyDown = (event: KeyboardEvent): void => {
    if (event.altKey || event.ctrlKey || event.metaKey || !this.timeline) {
      return;
    }
    const focused = this.focusedEvent();
    const anchor = focused ? (focused.started + focused.finished) / 2 : undefined;
    const step = span(this.currentView) * PAN_STEP;
    switch (event.key) {
      case '+':
      case '=':
        this.zoomBy(1 / ZOOM_STEP, anchor);
        break;
      case '-':
      case '_':
        this.zoomBy(ZOOM_STEP, anchor);
        break;
      case 'ArrowLeft':
        this.panBy(-step);
        break;
      case 'ArrowRight':
        this.panBy(step);
        break;
      case '0':
        this.setView(null);
        break;
      case 'Escape':
        if (this.tooltip.hidden) {
          return;
        }
        this.hideTooltip();
        break;
      default:
        return;
    }
    event.preventDefault();
    event.stopPropagation();
  };

  private onResize(): void {
    const width = this.plot.clientWidth;
    if (width !== this.measuredWidth) {
      this.measuredWidth = width;
      this.render();
    }
  }

  // -------------------------------------------------------------------------------
  // Static parts

  private buildToolbar(parent: HTMLElement): HTMLElement {
    const toolbar = html('div', 'sk-Timeline-toolbar', parent);
    toolbar.setAttribute('role', 'toolbar');
    toolbar.setAttribute('aria-label', 'Timeline zoom');
    const button = (text: string, label: string, action: () => void): HTMLButtonElement => {
      const b = html('button', 'sk-Timeline-button', toolbar, text);
      b.type = 'button';
      b.title = label;
      b.setAttribute('aria-label', label);
      b.addEventListener('click', action);
      return b;
    };
    button('+', 'Zoom in (+)', () => this.zoomBy(1 / ZOOM_STEP));
    this.zoomOutButton = button('−', 'Zoom out (-)', () => this.zoomBy(ZOOM_STEP));
    this.fitButton = button('Fit', 'Show the whole timeline (0)', () => this.setView(null));
    return toolbar;
  }

  private buildLegend(): HTMLElement {
    const legend = html('ul', 'sk-Timeline-legend', this.node);
    legend.setAttribute('aria-label', 'Legend');
    const entries: [string, string, string][] = [
      ...KINDS.map((kind): [string, string, string] => [kind, 'serve', kind]),
      ['lint', 'switch', 'switching branch'],
      ['lint', 'wait', 'waiting in queue'],
      ['lint', 'failed', 'failed']
    ];
    for (const [kind, part, text] of entries) {
      const item = html('li', '', legend);
      swatch(item, part === 'serve' ? kind : 'neutral', part, `${this.id}-hatch`);
      html('span', '', item, text);
    }
    return legend;
  }

  private buildSvg(): SVGSVGElement {
    const root = svg('svg', { class: 'sk-Timeline-svg' }, this.plot);
    const defs = svg('defs', {}, root);
    const hatch = svg(
      'pattern',
      { id: `${this.id}-hatch`, width: 5, height: 5, patternUnits: 'userSpaceOnUse', patternTransform: 'rotate(45)' },
      defs
    );
    svg('rect', { class: 'sk-Timeline-hatch-ground', width: 5, height: 5 }, hatch);
    svg('line', { class: 'sk-Timeline-hatch-line', x1: 0, x2: 0, y1: 0, y2: 5 }, hatch);
    const clip = svg('clipPath', { id: `${this.id}-clip` }, defs);
    this.clipRect = svg('rect', {}, clip);
    const inner = svg('g', { transform: `translate(${LABEL_WIDTH},0)` }, root);
    this.bands = svg('g', { class: 'sk-Timeline-bands', 'aria-hidden': 'true' }, inner);
    this.labels = svg('g', { class: 'sk-Timeline-labels', 'aria-hidden': 'true' }, inner);
    const clipped = svg('g', { 'clip-path': `url(#${this.id}-clip)` }, inner);
    this.grid = svg('g', { class: 'sk-Timeline-grid', 'aria-hidden': 'true' }, clipped);
    this.axis = svg('g', { class: 'sk-Timeline-axis', 'aria-hidden': 'true' }, inner);
    this.rowsLayer = svg('g', { class: 'sk-Timeline-rows' }, clipped);
    this.empty = svg('text', { class: 'sk-Timeline-empty' }, inner);
    return root;
  }

  private readonly id: string;
  private readonly titleNode: HTMLElement;
  private readonly badge: HTMLElement;
  private readonly summary: HTMLElement;
  private readonly plot: HTMLDivElement;
  private readonly svg: SVGSVGElement;
  private readonly tooltip: HTMLDivElement;
  private readonly error: HTMLDivElement;
  private readonly resizeObserver: ResizeObserver;
  private zoomOutButton!: HTMLButtonElement;
  private fitButton!: HTMLButtonElement;
  private clipRect!: SVGRectElement;
  private bands!: SVGGElement;
  private labels!: SVGGElement;
  private grid!: SVGGElement;
  private axis!: SVGGElement;
  private rowsLayer!: SVGGElement;
  private empty!: SVGTextElement;
  private timeline: Timeline | null = null;
  private rows: Rows = { branches: [], totalTracks: 0, trackOf: new Map() };
  private bounds: View = { start: 0, end: 1 };
  /** The zoomed or panned window, or null to show (and follow) the whole timeline. */
  private window: View | null = null;
  private measuredWidth = 0;
  private drag: { pointerId: number; x: number; view: View; moved: boolean } | null = null;
  private tooltipFor: { id: number; source: Element } | null = null;
  private readonly bars = new Map<number, SVGGElement>();
  private readonly branchGroups = new Map<string, SVGGElement>();
}
