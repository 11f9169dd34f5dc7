/**
 * The tooltip of one bar, on hover and on keyboard focus. Its lines are the bar's
 * aria-label, so keyboard and screen-reader users get what the pointer shows.
 */
import { describeEvent, TimelineEvent } from './layout';
import { html, lines } from './dom';

export class Tooltip {
  constructor(private readonly container: HTMLElement, id: string) {
    this.node = html('div', 'sk-Timeline-tooltip', container);
    this.node.id = id;
    this.node.setAttribute('role', 'tooltip');
    this.node.hidden = true;
  }

  get hidden(): boolean {
    return this.node.hidden;
  }

  /** The event id the tooltip is for, or null. */
  get target(): number | null {
    return this.shownFor?.id ?? null;
  }

  show(id: number, source: Element): void {
    this.shownFor = { id, source };
  }

  hide(): void {
    this.shownFor?.source.removeAttribute('aria-describedby');
    this.shownFor = null;
    this.node.hidden = true;
  }

  /** Redraw for its bar (`el`, undefined when that bar left the window), after a live
   * update changed its data or a zoom step its position. */
  refresh(event: TimelineEvent | undefined, el: Element | undefined, showLane: boolean): void {
    if (!this.shownFor) {
      return;
    }
    if (!event || !el) {
      this.hide();
      return;
    }
    this.node.replaceChildren(...lines(describeEvent(event, showLane)));
    this.node.hidden = false;
    el.setAttribute('aria-describedby', this.node.id);
    const box = this.container.getBoundingClientRect();
    const bar = (el.querySelector('.sk-Timeline-serve') ?? el).getBoundingClientRect();
    const tip = this.node.getBoundingClientRect();
    const left = Math.min(Math.max(0, bar.left - box.left), Math.max(0, box.width - tip.width));
    const above = bar.top - box.top - tip.height - 6;
    const top = above >= 0 ? above : bar.bottom - box.top + 6;
    this.node.style.left = `${left}px`;
    this.node.style.top = `${top}px`;
  }

  private readonly node: HTMLDivElement;
  private shownFor: { id: number; source: Element } | null = null;
}
