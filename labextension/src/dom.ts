/**
 * The three DOM builders every part of the view uses. Everything is built with
 * textContent and attributes, never HTML strings, which is why the renderer can declare
 * itself safe for untrusted notebooks.
 */

const SVG_NS = 'http://www.w3.org/2000/svg';

export function svg<K extends keyof SVGElementTagNameMap>(
  tag: K,
  attrs: Record<string, string | number> = {},
  parent?: Element
): SVGElementTagNameMap[K] {
  const el = document.createElementNS(SVG_NS, tag);
  setAttrs(el, attrs);
  parent?.appendChild(el);
  return el;
}

export function html<K extends keyof HTMLElementTagNameMap>(
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

/** Set attributes, rounding numbers to 0.01 and skipping those already equal (a live
 * update or a zoom step then touches only what moved). */
export function setAttrs(el: Element, attrs: Record<string, string | number>): void {
  for (const [name, value] of Object.entries(attrs)) {
    const text = typeof value === 'number' ? String(Math.round(value * 100) / 100) : value;
    if (el.getAttribute(name) !== text) {
      el.setAttribute(name, text);
    }
  }
}

/** One line per text, as divs: the tooltip, the summary and the request panel. */
export function lines(texts: readonly string[]): HTMLDivElement[] {
  return texts.map(text => html('div', '', undefined, text));
}

/** A toolbar button whose accessible name (and tooltip) is `label`. */
export function button(parent: Element, text: string, label: string, action?: () => void): HTMLButtonElement {
  const b = html('button', 'sk-Timeline-button', parent, text);
  b.type = 'button';
  b.title = label;
  b.setAttribute('aria-label', label);
  if (action) {
    b.addEventListener('click', action);
  }
  return b;
}
