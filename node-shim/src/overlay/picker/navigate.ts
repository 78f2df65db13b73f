/**
 * The picker's keyboard: where keyboard picking starts, the element an arrow key moves to (composed tree:
 * open shadow roots and same-origin iframes), and which key events belong to the overlay's text boxes.
 */
import {
  HOST_TAG,
  LOC_ATTRIBUTE,
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
  queryAll,
  safe,
  viewportRect,
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

/** True when Enter aimed at the overlay belongs to the focused control there: a button (or link, summary) of the
 * panel, except the one that starts pick mode ("Pick elements", marked `data-sp-pick-start`), where a keyboard user walks and
 * picks right away. Enter on Submit submits, never picks (newcomer finding, issue 26). */
export function enterForOverlayControl(e: KeyboardEvent): boolean {
  const origin = safe(() => e.composedPath()[0], null) as Element | null;
  if (!origin || !(origin instanceof Element)) return false;
  const control = safe(() => origin.closest('button, a[href], summary, [role="button"], [role="menuitem"]'), null);
  return !!control && !safe(() => control.hasAttribute("data-sp-pick-start"), false);
}

/** How keyboard picking found its first element: the focus, the viewport centre, or (the centre being
 * empty page) the first visible located element, else the first visible focusable element. */
export type StartedFrom = "focus" | "centre" | "located" | "focusable" | "none";

const NEVER_START = ["html", "body", "head"];
const FOCUSABLE = 'a[href], button, input, select, textarea, summary, [tabindex]:not([tabindex="-1"]), [contenteditable="true"]';
const MAX_SCAN = 2000;

/** Where keyboard picking starts: the focused element (through open shadow roots), else the element at
 * the viewport centre; never `<html>`, `<body>` or `<head>` (an empty centre): then the first visible
 * element with a source location, else the first visible focusable element. */
export function startElement(hit: (x: number, y: number) => Element | null): { el: Element | null; from: StartedFrom } {
  let el: Element | null = document.activeElement;
  for (let i = 0; el && i < 16; i++) {
    const inner = openShadow(el)?.activeElement ?? null;
    if (!inner) break;
    el = inner;
  }
  if (el && !isOverlay(el) && !NEVER_START.includes(localName(el))) {
    // A focused same-origin iframe: its own focused element.
    const inner = frameDocument(el)?.activeElement;
    if (inner && !NEVER_START.includes(localName(inner))) return { el: inner, from: "focus" };
    return { el, from: "focus" };
  }
  const centre = hit(innerWidth / 2, innerHeight / 2);
  if (centre && !isOverlay(centre) && !NEVER_START.includes(localName(centre))) return { el: centre, from: "centre" };
  const located = firstVisible(`[${LOC_ATTRIBUTE}]`);
  if (located) return { el: located, from: "located" };
  const focusable = firstVisible(FOCUSABLE);
  if (focusable) return { el: focusable, from: "focusable" };
  return { el: null, from: "none" };
}

/** The element keyboard picking starts on (startElement without saying how). */
export function initialElement(hit: (x: number, y: number) => Element | null): Element | null {
  return startElement(hit).el;
}

/** The first element (document order, top document, ≤ MAX_SCAN looked at) matching `selector` with a box
 * inside the viewport. */
function firstVisible(selector: string): Element | null {
  const list = queryAll(document, selector);
  for (let i = 0; i < list.length && i < MAX_SCAN; i++) {
    const el = list[i]!;
    if (isOverlay(el) || NEVER_START.includes(localName(el))) continue;
    const r = viewportRect(el);
    if (r.width > 0 && r.height > 0 && r.x < innerWidth && r.y < innerHeight && r.x + r.width > 0 && r.y + r.height > 0) {
      return el;
    }
  }
  return null;
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
