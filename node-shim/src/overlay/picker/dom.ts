/**
 * DOM access that a hostile page cannot break: the native methods captured when this module loads
 * (a page that later replaces `Element.prototype.getAttribute` or an element's own
 * `getBoundingClientRect` does not reach us), every read wrapped so a throwing getter yields a default,
 * and the geometry of same-origin iframes (an element's rect in the top page's viewport).
 */

/** SpotPatch's own host element: never picked, never badged, never paused. */
export const HOST_TAG = "spotpatch-overlay";
export const LOC_ATTRIBUTE = "data-spotpatch-loc";

const EP = Element.prototype;
const NP = Node.prototype;
const DP = Document.prototype;
const native = {
  getAttribute: EP.getAttribute,
  getAttributeNames: EP.getAttributeNames,
  getRect: EP.getBoundingClientRect,
  querySelectorAll: EP.querySelectorAll,
  docElementFromPoint: DP.elementFromPoint,
  docElementsFromPoint: DP.elementsFromPoint,
  getRootNode: NP.getRootNode,
  localName: Object.getOwnPropertyDescriptor(EP, "localName")?.get,
  parentElement: Object.getOwnPropertyDescriptor(NP, "parentElement")?.get,
  parentNode: Object.getOwnPropertyDescriptor(NP, "parentNode")?.get,
  firstElementChild: Object.getOwnPropertyDescriptor(EP, "firstElementChild")?.get,
  nextElementSibling: Object.getOwnPropertyDescriptor(EP, "nextElementSibling")?.get,
  previousElementSibling: Object.getOwnPropertyDescriptor(EP, "previousElementSibling")?.get,
  shadowRoot: Object.getOwnPropertyDescriptor(EP, "shadowRoot")?.get,
  isConnected: Object.getOwnPropertyDescriptor(NP, "isConnected")?.get,
  ownerDocument: Object.getOwnPropertyDescriptor(NP, "ownerDocument")?.get,
};

/** The top document's topmost page element at viewport point (x, y), under the overlay's own (badges
 * included), through the native hit test (a page's override is never called), or null. */
export function hitAt(x: number, y: number): Element | null {
  const all = safe(() => native.docElementsFromPoint.call(document, x, y), [] as Element[]);
  for (const el of all) if (!isOverlay(el)) return el;
  return null;
}

/** `fn()`, or `fallback` when it throws (a hostile override, a detached node, a cross-origin frame). */
export function safe<T>(fn: () => T, fallback: T): T {
  try {
    return fn();
  } catch {
    return fallback;
  }
}

function getter<T>(g: ((this: unknown) => unknown) | undefined, node: unknown, fallback: T): T {
  if (!g) return fallback;
  return safe(() => (g.call(node) as T) ?? fallback, fallback);
}

export const attr = (el: Element, name: string): string | null => safe(() => native.getAttribute.call(el, name), null);
export const attrNames = (el: Element): string[] => safe(() => native.getAttributeNames.call(el), []);
export const localName = (el: Element): string => getter(native.localName, el, "") || "element";
export const parentEl = (node: Node): Element | null => getter(native.parentElement, node, null);
export const firstChildEl = (el: Element): Element | null => getter(native.firstElementChild, el, null);
export const nextEl = (el: Element): Element | null => getter(native.nextElementSibling, el, null);
export const prevEl = (el: Element): Element | null => getter(native.previousElementSibling, el, null);
export const connected = (node: Node): boolean => getter(native.isConnected, node, false);
export const ownerDoc = (node: Node): Document | null => getter(native.ownerDocument, node, null);
export const openShadow = (el: Element): ShadowRoot | null => getter(native.shadowRoot, el, null);
export const rootNode = (node: Node): Node => safe(() => native.getRootNode.call(node), node);
export const queryAll = (el: Element | Document, selector: string): Element[] =>
  safe(() => Array.from((el instanceof Document ? el.querySelectorAll(selector) : native.querySelectorAll.call(el, selector)) as ArrayLike<Element>), []);

/** The element's parent, crossing out of a shadow root to its host (composed tree), never into the overlay. */
export function composedParent(el: Element): Element | null {
  const p = parentEl(el);
  if (p) return p;
  const root = rootNode(el);
  return root instanceof ShadowRoot ? root.host : null;
}

/** True for SpotPatch's own host element and anything inside it. */
export function isOverlay(node: Node | null): boolean {
  let n: Node | null = node;
  for (let i = 0; n && i < 64; i++) {
    if (n instanceof Element && localName(n) === HOST_TAG) return true;
    const root = rootNode(n);
    if (root instanceof ShadowRoot) n = root.host;
    else return false;
  }
  return false;
}

export interface Box {
  x: number;
  y: number;
  width: number;
  height: number;
}

/** The iframe element holding `doc` when it is a same-origin child frame of the top page, else null. */
export function frameElementOf(doc: Document): HTMLIFrameElement | null {
  return safe(() => (doc.defaultView?.frameElement as HTMLIFrameElement | null) ?? null, null);
}

/** Offset of `doc`'s viewport inside the top page's viewport (sum over same-origin iframes, content box). */
export function frameOffset(doc: Document | null): { x: number; y: number } {
  let x = 0;
  let y = 0;
  let d = doc;
  for (let i = 0; d && d !== document && i < 8; i++) {
    const frame = frameElementOf(d);
    if (!frame) break;
    const r = rawRect(frame);
    x += r.x + frame.clientLeft + parsePx(safe(() => getComputedStyle(frame).paddingLeft, "0"));
    y += r.y + frame.clientTop + parsePx(safe(() => getComputedStyle(frame).paddingTop, "0"));
    d = ownerDoc(frame);
  }
  return { x, y };
}

function parsePx(v: string): number {
  const n = parseFloat(v);
  return Number.isFinite(n) ? n : 0;
}

/** The element's border box in its own document's viewport (zeros when it cannot be read). */
export function rawRect(el: Element): Box {
  return safe(() => {
    const r = native.getRect.call(el);
    return { x: r.left, y: r.top, width: r.width, height: r.height };
  }, { x: 0, y: 0, width: 0, height: 0 });
}

/** The element's border box in the top page's viewport (same-origin iframe offsets added). */
export function viewportRect(el: Element): Box {
  const r = rawRect(el);
  const doc = ownerDoc(el);
  if (!doc || doc === document) return r;
  const o = frameOffset(doc);
  return { x: r.x + o.x, y: r.y + o.y, width: r.width, height: r.height };
}

/** The same-origin document of an iframe, or null (cross-origin, not loaded, sandboxed). */
export function frameDocument(frame: Element): Document | null {
  if (localName(frame) !== "iframe" && localName(frame) !== "frame") return null;
  return safe(() => {
    const doc = (frame as HTMLIFrameElement).contentDocument;
    // Touching the document proves access (a cross-origin frame gives null or throws).
    return doc && doc.documentElement ? doc : null;
  }, null);
}

/**
 * The deepest page element at the top-viewport point (x, y): descends into open shadow roots and
 * same-origin iframes; a cross-origin iframe is returned as the iframe itself. Null over the overlay
 * (its host) or outside any element.
 */
export function elementAt(x: number, y: number, doc: Document = document): Element | null {
  let d = doc;
  let ox = 0;
  let oy = 0;
  if (d !== document) {
    const o = frameOffset(d);
    ox = o.x;
    oy = o.y;
  }
  for (let depth = 0; depth < 8; depth++) {
    let el = safe(() => native.docElementFromPoint.call(d, x - ox, y - oy), null as Element | null);
    if (!el) return null;
    if (isOverlay(el)) return null;
    for (let i = 0; i < 16; i++) {
      const shadow = openShadow(el);
      if (!shadow) break;
      const inner = safe(() => shadow.elementFromPoint(x - ox, y - oy), null as Element | null);
      if (!inner || inner === el || isOverlay(inner)) break;
      el = inner;
    }
    const inner = frameDocument(el);
    if (!inner) return el;
    const o = frameOffset(inner);
    ox = o.x;
    oy = o.y;
    d = inner;
  }
  return null;
}

/** The path of a same-origin iframe's document (pathname + search, ≤ 300 chars), or undefined at the top. */
export function framePath(doc: Document | null): string | undefined {
  if (!doc || doc === document) return undefined;
  return safe(() => {
    const loc = doc.defaultView?.location;
    return loc ? `${loc.pathname}${loc.search}`.slice(0, 300) : undefined;
  }, undefined);
}

/** The same-origin documents of the page: the top document and its iframes', depth ≤ 3, ≤ 32 documents. */
export function sameOriginDocuments(top: Document = document): Document[] {
  const out: Document[] = [top];
  for (let i = 0; i < out.length && out.length < 32; i++) {
    const d = out[i]!;
    if (depthOf(d) >= 3) continue;
    for (const frame of queryAll(d, "iframe, frame")) {
      const inner = frameDocument(frame);
      if (inner && !out.includes(inner)) out.push(inner);
      if (out.length >= 32) break;
    }
  }
  return out;
}

function depthOf(doc: Document, top: Document = document): number {
  let n = 0;
  for (let d: Document | null = doc; d && d !== top && n < 8; n++) {
    const f = frameElementOf(d);
    if (!f) break;
    d = ownerDoc(f);
  }
  return n;
}
