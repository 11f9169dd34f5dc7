/**
 * The timeline view: holds what is shown (the timeline, its rows, the zoom window, the
 * replay moment) and composes the parts that show it: header.ts (title, status, toolbar,
 * legend, summary), player.ts (replay), chart.ts (the SVG), tooltip.ts, request.ts (the
 * request panel) and input.ts (zoom, pan, hover, focus, keys).
 *
 * Rows and the time bounds always come from the whole timeline, so replaying it or
 * scrubbing through it keeps every bar where it ends up.
 */
import {
  assignRows,
  clampView,
  fullView,
  panView,
  plural,
  Rows,
  showsAll,
  Timeline,
  TimelineEvent,
  View,
  xToTime,
  zoomView
} from './layout';
import { Chart, LABEL_WIDTH, RIGHT_PAD } from './chart';
import { html } from './dom';
import { Header } from './header';
import { Input, InputTarget, ZOOM_IN, ZOOM_OUT } from './input';
import { Player } from './player';
import { eventsAt, replaySpan } from './replay';
import { DiffSource, RequestPanel } from './request';
import { Tooltip } from './tooltip';

/** Width used before the widget is attached and can measure itself. */
const DEFAULT_WIDTH = 720;

let instances = 0;

export class TimelineView {
  readonly node: HTMLDivElement;

  constructor() {
    const id = `shadowkernel-timeline-${++instances}`;
    // Until the first valid bundle arrives only the error line may show.
    this.node = html('div', 'sk-Timeline sk-mod-empty');
    this.header = new Header(this.node, `${id}-hatch`, {
      zoomIn: () => this.zoomBy(ZOOM_IN),
      zoomOut: () => this.zoomBy(ZOOM_OUT),
      fit: () => this.setView(null)
    });
    this.player = new Player(this.node, t => this.replayTo(t));
    this.plot = html('div', 'sk-Timeline-plot', this.node);
    this.plot.tabIndex = 0;
    this.plot.setAttribute('role', 'figure');
    this.chart = new Chart(this.plot, id);
    this.tooltip = new Tooltip(this.node, `${id}-tooltip`);
    this.request = new RequestPanel(this.node);
    this.error = html('div', 'sk-Timeline-error', this.node);
    this.error.setAttribute('role', 'alert');
    this.error.hidden = true;
    this.input = new Input(this.plot, this.node, this.inputTarget());
    // Rows scrolled into sight get the geometry they missed while out of it.
    this.plot.addEventListener('scroll', () => this.render(), { passive: true });
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
    this.header.show(timeline);
    this.player.setSpan(replaySpan(timeline.events));
    const open = this.request.shown;
    const reopened = open && timeline.events.find(e => e.id === open.id);
    if (reopened && reopened !== open) {
      this.request.show(reopened, this.diffSource);
    }
    this.plot.setAttribute(
      'aria-label',
      `${timeline.title}: ${plural(this.rows.branches.length, 'branch', 'branches')}, ` +
        `${plural(timeline.events.length, 'request')}. Plus and minus zoom, arrow keys pan, 0 fits all.`
    );
    this.render();
  }

  /** Say how a live timeline stands (null: it was never live). */
  setStatus(text: string | null, live = false): void {
    this.header.setStatus(text, live);
  }

  /** Where the request panel gets a version's diff (null: no live kernel). */
  diffSource: DiffSource = null;

  /** Replace the chart by a message; used when the bundle does not match the contract. */
  showError(message: string): void {
    this.error.textContent = `Cannot show this shadowkernel timeline: ${message}`;
    this.error.hidden = false;
  }

  dispose(): void {
    this.resizeObserver.disconnect();
    this.input.dispose();
    this.player.dispose();
  }

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
    const sight = { top: this.plot.scrollTop, bottom: this.plot.scrollTop + (this.plot.clientHeight || 520) };
    this.chart.draw(this.shownEvents, this.rows, this.currentView, this.plotWidth, sight);
    this.header.setZoomed(this.window !== null);
    this.refreshTooltip();
  }

  /** The events drawn: all of them, or those of the replay moment. */
  private get shownEvents(): readonly TimelineEvent[] {
    const events = this.timeline?.events ?? [];
    return this.replayAt === null ? events : eventsAt(events, this.replayAt);
  }

  private replayTo(t: number | null): void {
    this.replayAt = t;
    this.render();
  }

  private openRequest(id: number): void {
    const event = this.timeline?.events.find(e => e.id === id);
    if (event) {
      this.request.show(event, this.diffSource);
    }
  }

  private refreshTooltip(): void {
    const id = this.tooltip.target;
    if (id === null) {
      return;
    }
    const events = this.shownEvents;
    const showLane = new Set(events.map(e => e.lane)).size > 1;
    this.tooltip.refresh(
      events.find(e => e.id === id),
      this.chart.barOf(id),
      showLane
    );
  }

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

  private inputTarget(): InputTarget {
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const view = this;
    return {
      get window() {
        return view.currentView;
      },
      get plotWidth() {
        return view.plotWidth;
      },
      get hasTimeline() {
        return view.timeline !== null;
      },
      zoomBy: (factor, anchor) => this.zoomBy(factor, anchor),
      panBy: delta => this.panBy(delta),
      setView: next => this.setView(next),
      dragFrom: (from, delta) => this.setView(panView(from, delta, this.bounds)),
      timeAtClientX: clientX => {
        const x = clientX - this.chart.svg.getBoundingClientRect().left - LABEL_WIDTH;
        return x >= 0 ? xToTime(this.currentView, this.plotWidth, x) : undefined;
      },
      focusedTime: () => {
        const el = (document.activeElement as Element | null)?.closest('[data-event-id]');
        const id = el ? Number(el.getAttribute('data-event-id')) : NaN;
        const e = this.timeline?.events.find(e => e.id === id);
        return e && (e.started + e.finished) / 2;
      },
      showTooltip: (id, source) => {
        this.tooltip.show(id, source);
        this.refreshTooltip();
      },
      hideTooltip: () => {
        const shown = !this.tooltip.hidden;
        this.tooltip.hide();
        return shown;
      },
      openRequest: id => this.openRequest(id)
    };
  }

  private onResize(): void {
    const width = this.plot.clientWidth;
    if (width !== this.measuredWidth) {
      this.measuredWidth = width;
      this.render();
    }
  }

  private readonly header: Header;
  private readonly plot: HTMLDivElement;
  private readonly chart: Chart;
  private readonly tooltip: Tooltip;
  private readonly request: RequestPanel;
  private readonly player: Player;
  private readonly error: HTMLDivElement;
  private readonly input: Input;
  private readonly resizeObserver: ResizeObserver;
  private timeline: Timeline | null = null;
  private rows: Rows = { branches: [], totalTracks: 0, trackOf: new Map() };
  private bounds: View = { start: 0, end: 1 };
  /** The zoomed or panned window, or null to show (and follow) the whole timeline. */
  private window: View | null = null;
  private measuredWidth = 0;
  /** The replay moment shown, or null for the whole timeline. */
  private replayAt: number | null = null;
}
