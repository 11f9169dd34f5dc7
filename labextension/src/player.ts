/**
 * Replay controls: play, pause and a scrubber over the session's time. The player owns
 * the replay clock (requestAnimationFrame while playing) and tells the view the moment
 * to show, or null for "now" (the whole, possibly still growing, timeline).
 */
import { formatMs, View } from './layout';
import { advance } from './replay';
import { html } from './dom';

/** Scrubber steps: fine enough for a smooth drag, coarse enough to be a plain integer. */
const STEPS = 1000;

export class Player {
  constructor(parent: HTMLElement, private readonly onTime: (t: number | null) => void) {
    const bar = html('div', 'sk-Timeline-player', parent);
    bar.setAttribute('role', 'group');
    bar.setAttribute('aria-label', 'Replay');
    this.play = html('button', 'sk-Timeline-button', bar, '▶');
    this.play.type = 'button';
    this.play.addEventListener('click', () => (this.playing ? this.pause() : this.start()));
    this.scrubber = html('input', 'sk-Timeline-scrubber', bar);
    this.scrubber.type = 'range';
    this.scrubber.min = '0';
    this.scrubber.max = String(STEPS);
    this.scrubber.value = String(STEPS);
    this.scrubber.setAttribute('aria-label', 'Replay time');
    // Its arrow keys are its own, not the notebook's (Lumino checks from the target up).
    this.scrubber.setAttribute('data-lm-suppress-shortcuts', 'true');
    this.scrubber.addEventListener('input', () => {
      this.pause();
      this.moveTo(this.timeOf(Number(this.scrubber.value)));
    });
    this.clock = html('span', 'sk-Timeline-clock', bar, 'now');
    this.labelPlay();
  }

  /** The session's span; the scrubber maps onto it. */
  setSpan(span: View): void {
    this.span = span;
    this.syncScrubber();
  }

  get playing(): boolean {
    return this.frame !== 0;
  }

  start(): void {
    if (this.t === null || this.t >= this.span.end) {
      this.moveTo(this.span.start);
    }
    let last = performance.now();
    const tick = (now: number): void => {
      const t = advance(this.t ?? this.span.start, now - last, this.span);
      last = now;
      this.moveTo(t);
      this.frame = t < this.span.end ? requestAnimationFrame(tick) : 0;
      this.labelPlay();
    };
    this.frame = requestAnimationFrame(tick);
    this.labelPlay();
  }

  pause(): void {
    cancelAnimationFrame(this.frame);
    this.frame = 0;
    this.labelPlay();
  }

  dispose(): void {
    this.pause();
  }

  /** Show moment `t`; the scrubber's right end is "now", following the live timeline. */
  private moveTo(t: number): void {
    this.t = t >= this.span.end && !this.playing ? null : t;
    this.syncScrubber();
    this.onTime(this.t);
  }

  private timeOf(step: number): number {
    return this.span.start + (step / STEPS) * (this.span.end - this.span.start);
  }

  private syncScrubber(): void {
    const width = this.span.end - this.span.start;
    const step = this.t === null || width <= 0 ? STEPS : Math.round(((this.t - this.span.start) / width) * STEPS);
    this.scrubber.value = String(step);
    const text = this.t === null ? 'now' : `at ${formatMs(this.t)}`;
    this.clock.textContent = text;
    this.scrubber.setAttribute('aria-valuetext', text);
  }

  private labelPlay(): void {
    const label = this.playing ? 'Pause replay' : 'Play replay';
    this.play.textContent = this.playing ? '❚❚' : '▶';
    this.play.title = label;
    this.play.setAttribute('aria-label', label);
  }

  private readonly play: HTMLButtonElement;
  private readonly scrubber: HTMLInputElement;
  private readonly clock: HTMLElement;
  private span: View = { start: 0, end: 0 };
  private t: number | null = null;
  private frame = 0;
}
