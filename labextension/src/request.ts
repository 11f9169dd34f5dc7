/**
 * The request panel: what one bar's request was (click or Enter on the bar), and from
 * there its version's diff against the branch's base, which only a live kernel can tell.
 */
import { requestRows, TimelineEvent } from './layout';
import { button, html } from './dom';

/** Asks the kernel for a version's diff; null when there is no live kernel. */
export type DiffSource = ((branch: string, version: number) => Promise<string>) | null;

export class RequestPanel {
  constructor(parent: HTMLElement) {
    this.node = html('section', 'sk-Timeline-request', parent);
    this.node.hidden = true;
    const head = html('div', 'sk-Timeline-request-head', this.node);
    this.heading = html('span', 'sk-Timeline-request-title', head);
    this.diffButton = button(head, 'Show diff', "Show the version's diff against the branch's base");
    button(head, 'Close', 'Close the request', () => this.hide());
    this.rows = html('dl', 'sk-Timeline-request-rows', this.node);
    this.diff = html('pre', 'sk-Timeline-diff', this.node);
    this.diff.setAttribute('aria-label', 'Diff against the base');
    this.diffButton.addEventListener('click', () => void this.showDiff());
  }

  /** The event shown, or null while closed. */
  get shown(): TimelineEvent | null {
    return this.node.hidden ? null : this.event;
  }

  show(event: TimelineEvent, diffSource: DiffSource): void {
    this.event = event;
    this.diffSource = diffSource;
    this.node.hidden = false;
    this.node.setAttribute('aria-label', `Request ${event.id}`);
    this.heading.textContent = `Request ${event.id}`;
    this.rows.replaceChildren();
    for (const [name, value] of requestRows(event)) {
      html('dt', '', this.rows, name);
      html('dd', '', this.rows, value);
    }
    this.diff.hidden = true;
    this.diffButton.disabled = diffSource === null;
    this.diffButton.title = diffSource ? "Show the version's diff against the branch's base" : 'The diff needs the live kernel';
  }

  hide(): void {
    this.node.hidden = true;
  }

  private async showDiff(): Promise<void> {
    const event = this.event;
    if (!event || !this.diffSource) {
      return;
    }
    this.diff.hidden = false;
    this.diff.textContent = 'asking the kernel…';
    try {
      const text = await this.diffSource(event.branch, event.version);
      this.diff.textContent = text || 'no changes against the base';
    } catch (error) {
      this.diff.textContent = `no diff: ${(error as Error).message}`;
    }
  }

  private readonly node: HTMLElement;
  private readonly heading: HTMLElement;
  private readonly rows: HTMLElement;
  private readonly diff: HTMLPreElement;
  private readonly diffButton: HTMLButtonElement;
  private event: TimelineEvent | null = null;
  private diffSource: DiffSource = null;
}
