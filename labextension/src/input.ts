/**
 * Zoom and pan input: the wheel, drags, hover, focus and keys on the plot, turned into
 * calls on an `InputTarget` (the view). No drawing and no view state here.
 */
import { span, View } from './layout';

const ZOOM_STEP = 1.5;
const PAN_STEP = 0.2;
/** A drag shorter than this is a click (focus a bar), not a pan. */
const DRAG_THRESHOLD_PX = 3;

/** What input needs from the view. */
export interface InputTarget {
  /** The visible window. */
  readonly window: View;
  readonly plotWidth: number;
  readonly hasTimeline: boolean;
  zoomBy(factor: number, anchor?: number): boolean;
  panBy(delta: number): boolean;
  /** A window to show, or null to fit everything. */
  setView(view: View | null): void;
  /** Pan keeping the span: `view` is the window the drag started from. */
  dragFrom(view: View, delta: number): void;
  timeAtClientX(clientX: number): number | undefined;
  /** The middle (in time) of the focused bar, if a bar has focus. */
  focusedTime(): number | undefined;
  showTooltip(id: number, source: Element): void;
  hideTooltip(): boolean;
  /** Enter on a bar (or a click): open its request. */
  openRequest(id: number): void;
}

export const ZOOM_IN = 1 / ZOOM_STEP;
export const ZOOM_OUT = ZOOM_STEP;

function barId(target: EventTarget | null): [number, Element] | undefined {
  const el = (target as Element | null)?.closest?.('[data-event-id]');
  return el ? [Number(el.getAttribute('data-event-id')), el] : undefined;
}

export class Input {
  constructor(
    private readonly plot: HTMLElement,
    private readonly keys: HTMLElement,
    private readonly target: InputTarget
  ) {
    plot.addEventListener('wheel', this.onWheel, { passive: false });
    plot.addEventListener('pointerdown', this.onPointerDown);
    plot.addEventListener('pointermove', this.onPointerMove);
    plot.addEventListener('pointerup', this.onPointerUp);
    plot.addEventListener('pointercancel', this.onPointerUp);
    plot.addEventListener('pointerover', this.onPointerOver);
    plot.addEventListener('pointerout', this.onPointerOut);
    plot.addEventListener('focusin', this.onFocusIn);
    plot.addEventListener('focusout', this.onFocusOut);
    keys.addEventListener('keydown', this.onKeyDown);
  }

  dispose(): void {
    this.keys.removeEventListener('keydown', this.onKeyDown);
  }

  /** The wheel zooms around the pointer; sideways scrolling pans. When the view cannot
   * change (already fully zoomed out) the wheel is left to scroll the notebook. */
  private readonly onWheel = (event: WheelEvent): void => {
    const t = this.target;
    const scale = event.deltaMode === WheelEvent.DOM_DELTA_LINE ? 16 : 1;
    const handled =
      Math.abs(event.deltaX) > Math.abs(event.deltaY)
        ? t.panBy((event.deltaX * scale * span(t.window)) / t.plotWidth)
        : t.zoomBy(Math.exp(event.deltaY * scale * 0.002), t.timeAtClientX(event.clientX));
    if (handled) {
      event.preventDefault();
    }
  };

  private readonly onPointerDown = (event: PointerEvent): void => {
    if (event.button === 0) {
      this.drag = { pointerId: event.pointerId, x: event.clientX, view: this.target.window, moved: false };
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
      this.target.hideTooltip();
    }
    this.target.dragFrom(drag.view, (-dx * span(drag.view)) / this.target.plotWidth);
  };

  /** A press and release without a drag on a bar is a click: it opens the request. */
  private readonly onPointerUp = (event: PointerEvent): void => {
    const drag = this.drag;
    if (drag?.pointerId !== event.pointerId) {
      return;
    }
    if (this.plot.hasPointerCapture(event.pointerId)) {
      this.plot.releasePointerCapture(event.pointerId);
    }
    this.plot.classList.remove('sk-mod-dragging');
    this.drag = null;
    const bar = barId(event.target);
    if (!drag.moved && event.type === 'pointerup' && bar) {
      this.target.openRequest(bar[0]);
    }
  };

  private readonly onPointerOver = (event: PointerEvent): void => {
    const bar = barId(event.target);
    if (bar && !this.drag?.moved) {
      this.target.showTooltip(...bar);
    }
  };

  private readonly onPointerOut = (event: PointerEvent): void => {
    const from = barId(event.target)?.[1];
    const to = barId(event.relatedTarget)?.[1];
    if (from && from !== to && from !== document.activeElement) {
      this.target.hideTooltip();
    }
  };

  private readonly onFocusIn = (event: FocusEvent): void => {
    const bar = barId(event.target);
    if (bar) {
      this.target.showTooltip(...bar);
    }
  };

  private readonly onFocusOut = (event: FocusEvent): void => {
    if (barId(event.target)) {
      this.target.hideTooltip();
    }
  };

  /** +/- zoom (around the focused bar), arrows pan, 0 fits, Enter opens the focused bar's
   * request, Escape hides the tooltip. Handled keys stop here so they do not also trigger
   * notebook shortcuts. */
  private readonly onKeyDown = (event: KeyboardEvent): void => {
    const t = this.target;
    // Form controls (the replay scrubber) keep their own keys.
    const inControl = (event.target as Element | null)?.closest?.('input, select, textarea');
    if (event.altKey || event.ctrlKey || event.metaKey || !t.hasTimeline || inControl) {
      return;
    }
    const step = span(t.window) * PAN_STEP;
    switch (event.key) {
      case '+':
      case '=':
        t.zoomBy(ZOOM_IN, t.focusedTime());
        break;
      case '-':
      case '_':
        t.zoomBy(ZOOM_OUT, t.focusedTime());
        break;
      case 'ArrowLeft':
        t.panBy(-step);
        break;
      case 'ArrowRight':
        t.panBy(step);
        break;
      case '0':
        t.setView(null);
        break;
      case 'Enter': {
        const bar = barId(document.activeElement);
        if (!bar || !this.plot.contains(bar[1])) {
          return;
        }
        t.openRequest(bar[0]);
        break;
      }
      case 'Escape':
        if (!t.hideTooltip()) {
          return;
        }
        break;
      default:
        return;
    }
    event.preventDefault();
    event.stopPropagation();
  };

  private drag: { pointerId: number; x: number; view: View; moved: boolean } | null = null;
}
