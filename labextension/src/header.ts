/**
 * The parts above the chart: title, "simulated" badge, zoom toolbar, legend and summary.
 * It owns no state: the view tells it what to show and it calls back on button clicks.
 */
import { KINDS, summaryLines, Timeline } from './layout';
import { button, html, lines, svg } from './dom';

export interface ZoomActions {
  zoomIn(): void;
  zoomOut(): void;
  fit(): void;
}

export class Header {
  constructor(parent: HTMLElement, hatchId: string, actions: ZoomActions) {
    this.bar = html('div', 'sk-Timeline-header', parent);
    this.title = html('span', 'sk-Timeline-title', this.bar);
    this.badge = html('span', 'sk-Timeline-badge', this.bar, 'simulated');
    this.badge.title = 'These events come from a simulation, not from real language servers';
    this.status = html('span', 'sk-Timeline-status', this.bar);
    this.status.setAttribute('role', 'status');
    this.status.hidden = true;
    this.toolbar = html('div', 'sk-Timeline-toolbar', this.bar);
    this.toolbar.setAttribute('role', 'toolbar');
    this.toolbar.setAttribute('aria-label', 'Timeline zoom');
    button(this.toolbar, '+', 'Zoom in (+)', actions.zoomIn);
    this.zoomOut = button(this.toolbar, '−', 'Zoom out (-)', actions.zoomOut);
    this.fit = button(this.toolbar, 'Fit', 'Show the whole timeline (0)', actions.fit);
    buildLegend(parent, hatchId);
    this.summary = html('div', 'sk-Timeline-summary', parent);
  }

  /** The row above the chart, where the view adds its live status. */
  readonly bar: HTMLDivElement;

  show(timeline: Timeline): void {
    this.title.textContent = timeline.title;
    this.badge.hidden = !timeline.simulated;
    this.summary.replaceChildren(...lines(summaryLines(timeline.summary)));
  }

  /** How a live timeline stands ("live", "kernel restarted: showing the last state"),
   * or null for a timeline that was never live. */
  setStatus(text: string | null, live = false): void {
    this.status.hidden = text === null;
    this.status.textContent = text ?? '';
    this.status.classList.toggle('sk-mod-live', live);
  }

  /** Zoom out and Fit only make sense while zoomed or panned. */
  setZoomed(zoomed: boolean): void {
    this.zoomOut.disabled = !zoomed;
    this.fit.disabled = !zoomed;
  }

  private readonly title: HTMLElement;
  private readonly badge: HTMLElement;
  private readonly status: HTMLElement;
  private readonly toolbar: HTMLElement;
  private readonly summary: HTMLElement;
  private readonly zoomOut: HTMLButtonElement;
  private readonly fit: HTMLButtonElement;
}

function buildLegend(parent: HTMLElement, hatchId: string): HTMLElement {
  const legend = html('ul', 'sk-Timeline-legend', parent);
  legend.setAttribute('aria-label', 'Legend');
  const entries: [string, string, string][] = [
    ...KINDS.map((kind): [string, string, string] => [kind, 'serve', kind]),
    ['lint', 'switch', 'switching branch'],
    ['lint', 'wait', 'waiting in queue'],
    ['lint', 'failed', 'failed']
  ];
  for (const [kind, part, text] of entries) {
    const item = html('li', '', legend);
    swatch(item, part === 'serve' ? kind : 'neutral', part, hatchId);
    html('span', '', item, text);
  }
  return legend;
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
