/**
 * The picker's keyboard: where keyboard picking starts, the element an arrow key moves to (composed tree:
 * open shadow roots and same-origin iframes), and which key events belong to the overlay's text boxes.
 */
import {
  HOST_TAG,
  composedParent,
  firstChildEl,
  frameDocument,
  frameElementOf,
  isOverlay,
  localName,
  nextEl,
  openShadow,
  ownerDoc,
  prevEl,
  safe,
} from "./dom.js";

/** True when a key event aimed at the overlay belongs to a text control there (the instruction box, a
 * select): typing there never walks or picks. On the overlay's buttons (e.g. "Pick elements", just
 * pressed) the picker's keys still work, so a keyboard user can walk and pick right away. */
export function typingInOverlay(e: KeyboardEvent): boolean {
  const origin = safe(() => e.composedPath()[0], null) as Element | null;
  if (!origin || !(origin instanceof Element)) return false;
  const tag = localName(origin);
  return (
    tag === "input" ||
    tag === "textarea" ||
    tag === "select" ||
    safe(() => (origin as HTMLElement).isContentEditable, false)
  );
}

/** Where keyboard picking starts: the focused element (through open shadow roots) or the viewport centre. */
export function initialElement(hit: (x: number, y: number) => Element | null): Element | null {
  let el: Element | null = document.activeElement;
  for (let i = 0; el && i < 16; i++) {
    const inner = openShadow(el)?.activeElement ?? null;
    if (!inner) break;
    el = inner;
  }
  if (el && !isOverlay(el) && el !== document.body && el !== document.documentElement) {
    // A focused same-origin iframe: its own focused element.
    const inner = frameDocument(el)?.activeElement;
    if (inner && inner !== inner.ownerDocument.body) return inner;
    return el;
  }
  return hit(innerWidth / 2, innerHeight / 2);
}

/** The element an arrow key moves to from `el` (composed tree: shadow roots and same-origin iframes). */
export function walk(el: Element, key: string): Element | null {
  const skip = (n: Element | null, step: (e: Element) => Element | null): Element | null => {
    for (let i = 0; n && i < 1000; i++) {
      if (localName(n) !== HOST_TAG && !["script", "style", "template", "head", "meta", "link"].includes(localName(n))) return n;
      n = step(n);
    }
    return null;
  };
  switch (key) {
    case "ArrowUp": {
      const doc = ownerDoc(el);
      if (doc && el === doc.body) return frameElementOf(doc) ?? null;
      const p = composedParent(el);
      return p && p !== doc?.documentElement ? p : null;
    }
    case "ArrowDown": {
      const inner = frameDocument(el);
      if (inner?.body) return inner.body;
      const shadow = openShadow(el);
      const first = (shadow?.firstElementChild ?? null) || firstChildEl(el);
      return skip(first, nextEl);
    }
    case "ArrowLeft":
      return skip(prevEl(el), prevEl);
    case "ArrowRight":
      return skip(nextEl(el), nextEl);
  }
  return null;
}
