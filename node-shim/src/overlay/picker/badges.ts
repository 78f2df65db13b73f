/**
 * Numbered badges pinned to picked elements, driven by events only (nothing polls): passive scroll
 * (capture) and resize listeners, transitionend/animationend/load (capture), a ResizeObserver on each
 * element and on the root element, and one MutationObserver per document holding a target. Each of those
 * only schedules a re-position; all of them together cost at most one animation frame per change, then
 * nothing: with nothing moving, no callback runs. `setVisible(false)` (the panel closed) hides the badges
 * and removes every listener and observer; `setVisible(true)` brings them back where their elements are.
 * (A move no event reports, e.g. a CSS animation moving the element, shows at the next event.)
 *
 * A badge whose element leaves the DOM is first re-found, since a framework re-render (HMR) often
 * replaces the node rather than moving it: the element now at the recorded selector, or the only element
 * with the same tag and the same source file (own `data-spotpatch-loc`) and text. A match (same tag, same
 * file; at the same line and column only with the same text, else it is a sibling instance of the same
 * markup, e.g. the next list item) re-binds the badge; the target object is updated in place (element, info, source, label) and
 * `onRebound(n, target)` is called. When nothing matches within REFIND_MS, the badge disappears and
 * `onDetached(n)` is called once. Region targets are pinned to their document coordinates.
 */
import { describeElement, nearestLocated, boundedText } from "./describe.js";
import {
  LOC_ATTRIBUTE,
  connected,
  hitAt,
  isOverlay,
  localName,
  openShadow,
  ownerDoc,
  queryAll,
  safe,
  type Box,
  viewportRect,
} from "./dom.js";
import type { Badges, PickedTarget } from "./types.js";

interface Entry {
  n: number;
  target: PickedTarget;
  el: HTMLDivElement;
  last: string;
  /** When the element was first seen detached (re-find window), 0 while attached. */
  lostAt: number;
}

const SIZE = 22;
/** How long a detached target is looked for (a re-render may put the new node in later). */
export const REFIND_MS = 600;
const MAX_CANDIDATES = 2000;
const WINDOW_EVENTS = ["transitionend", "animationend", "load"] as const;

export function createBadges(
  layer: HTMLElement,
  onDetached: (n: number) => void,
  onRebound?: (n: number, target: PickedTarget) => void,
): Badges {
  const doc = layer.ownerDocument;
  const entries = new Map<number, Entry>();
  const detached = new Set<PickedTarget>();
  let frame = 0;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let visible = true;
  let resize: ResizeObserver | null = null;
  let mutations: MutationObserver | null = null;
  const observedDocs = new Set<Document>();

  const schedule = (): void => {
    if (!frame && visible && entries.size > 0) frame = requestAnimationFrame(tick);
  };
  const onEvent = (): void => schedule();
  let listening = false;
  const listen = (on: boolean): void => {
    if (on === listening) return;
    listening = on;
    if (on) {
      window.addEventListener("scroll", onEvent, { capture: true, passive: true });
      window.addEventListener("resize", onEvent, { passive: true });
      for (const type of WINDOW_EVENTS) window.addEventListener(type, onEvent, { capture: true, passive: true });
      resize = typeof ResizeObserver === "function" ? new ResizeObserver(onEvent) : null;
      mutations = typeof MutationObserver === "function" ? new MutationObserver(onEvent) : null;
      safe(() => resize?.observe(doc.documentElement), undefined);
      for (const e of entries.values()) observe(e.target.element);
    } else {
      window.removeEventListener("scroll", onEvent, { capture: true });
      window.removeEventListener("resize", onEvent);
      for (const type of WINDOW_EVENTS) window.removeEventListener(type, onEvent, { capture: true });
      resize?.disconnect();
      resize = null;
      mutations?.disconnect();
      mutations = null;
      observedDocs.clear();
      if (frame) cancelAnimationFrame(frame);
      frame = 0;
      clearTimeout(timer);
      timer = undefined;
    }
  };
  const sync = (): void => listen(visible && entries.size > 0);

  function observe(element: Element | null): void {
    if (!element || !listening) return;
    safe(() => resize?.observe(element), undefined);
    const d = ownerDoc(element);
    if (d && mutations && !observedDocs.has(d)) {
      observedDocs.add(d);
      safe(
        () => mutations?.observe(d, { childList: true, subtree: true, attributes: true, characterData: true }),
        undefined,
      );
    }
  }

  function position(e: Entry): void {
    const t = e.target;
    let r: Box;
    if (t.element) {
      if (!connected(t.element)) {
        const found = refind(t);
        if (found) {
          rebind(e, found);
        } else {
          lost(e);
          return;
        }
      }
      e.lostAt = 0;
      r = viewportRect(t.element);
    } else if (t.region) {
      r = { x: t.region.x - scrollX, y: t.region.y - scrollY, width: t.region.width, height: t.region.height };
    } else return;
    const hidden = r.width === 0 && r.height === 0;
    const [x, y] = hidden ? [0, 0] : place(r, t.element ? (ownerDoc(t.element) === document ? t.element : null) : "region");
    const key = hidden ? "hidden" : `${Math.round(x)},${Math.round(y)}`;
    if (key === e.last) return;
    e.last = key;
    e.el.style.display = hidden ? "none" : "flex";
    e.el.style.transform = `translate(${x}px, ${y}px)`;
  }

  /** Not found (yet): hidden while the re-find window lasts, then gone with onDetached once. */
  function lost(e: Entry): void {
    const now = performance.now();
    if (!e.lostAt) {
      e.lostAt = now;
      e.last = "lost";
      e.el.style.display = "none";
    }
    if (now - e.lostAt < REFIND_MS) {
      // One more look when the window ends (mutations before then look again on their own).
      if (!timer) {
        timer = setTimeout(() => {
          timer = undefined;
          schedule();
        }, REFIND_MS - (now - e.lostAt) + 10);
      }
      return;
    }
    remove(e);
    if (!detached.has(e.target)) {
      detached.add(e.target);
      safe(() => onDetached(e.n), undefined);
    }
  }

  function rebind(e: Entry, element: Element): void {
    const old = e.target.element;
    if (old) safe(() => resize?.unobserve(old), undefined);
    const fresh = describeElement(element);
    const t = e.target;
    t.element = element;
    t.info = fresh.info;
    t.source = fresh.source;
    t.label = fresh.label;
    if (fresh.sourceFrom) t.sourceFrom = fresh.sourceFrom;
    else delete t.sourceFrom;
    if (fresh.usageChain) t.usageChain = fresh.usageChain;
    else delete t.usageChain;
    if (fresh.frame) t.frame = fresh.frame;
    else delete t.frame;
    observe(element);
    if (onRebound) safe(() => onRebound(e.n, t), undefined);
  }

  function tick(): void {
    frame = 0;
    for (const e of [...entries.values()]) position(e);
    sync();
  }

  function remove(e: Entry): void {
    e.el.remove();
    if (e.target.element) safe(() => resize?.unobserve(e.target.element as Element), undefined);
    entries.delete(e.n);
  }

  function make(n: number): HTMLDivElement {
    const el = doc.createElement("div");
    el.setAttribute("part", "badge");
    el.setAttribute("data-spotpatch-badge", String(n));
    el.setAttribute("aria-hidden", "true");
    el.textContent = String(n);
    el.style.cssText =
      "position:fixed;left:0;top:0;pointer-events:none;z-index:2147483645;box-sizing:border-box;" +
      `width:${SIZE}px;height:${SIZE}px;border-radius:50%;display:none;align-items:center;justify-content:center;` +
      "font:600 12px/1 system-ui,sans-serif;color:#fff;background:#2563eb;border:2px solid #fff;" +
      "box-shadow:0 1px 4px rgba(0,0,0,.35);";
    layer.append(el);
    return el;
  }

  return {
    update(list) {
      const wanted = new Map(list.map((item) => [item.n, item.target]));
      for (const e of [...entries.values()]) {
        if (wanted.get(e.n) !== e.target) remove(e);
      }
      for (const [n, target] of wanted) {
        if (entries.has(n) || detached.has(target)) continue;
        const e: Entry = { n, target, el: make(n), last: "", lostAt: 0 };
        entries.set(n, e);
        observe(target.element);
      }
      sync();
      if (visible) for (const e of [...entries.values()]) position(e);
      sync();
    },
    setVisible(on) {
      if (on === visible) return;
      visible = on;
      for (const e of entries.values()) {
        e.last = "";
        if (!on) e.el.style.display = "none";
      }
      sync();
      if (on) for (const e of [...entries.values()]) position(e);
      sync();
    },
    destroy() {
      for (const e of [...entries.values()]) remove(e);
      listen(false);
    },
  };
}

/** The element that replaced a detached target's element, or null: the element now at the recorded
 * selector, else the only element with the same tag, own source file and text. It must have the same tag
 * and (when the target had a source) the same source file; never the overlay itself. */
/**
 * Where a badge goes: outside the element's box, so it never covers the element's own text (issue 26):
 * left of its first line, which keeps it on the same line as what it marks (above or below, a badge reads
 * as the neighbour's in a list) unless that covers a neighbour's text; then above the box, else below it.
 */
/** `element`: the picked element in the top document, `"region"` for an area (only text counts there), null
 * for an element inside a frame (no hit test). */
function place(r: Box, element: Element | "region" | null): [number, number] {
  const gap = 2;
  const left: [number, number] = [r.x - SIZE - gap, r.y + (Math.min(r.height, SIZE) - SIZE) / 2];
  const above: [number, number] = [r.x, r.y - SIZE - gap];
  const below: [number, number] = [r.x, r.y + r.height + gap];
  const first = clampSpot(r.x >= SIZE + gap ? left : above);
  if (!element) return first;
  const spots = (r.x >= SIZE + gap ? [left, above, below] : [above, below]).map(clampSpot);
  // A spot outside the box can still cover a neighbour's text (the word just before an inline element):
  // take the first spot where no other element's text is, else the first (issue 26, finding 14).
  return spots.find((s) => !coversText(s, element)) ?? first;
}

function clampSpot([x, y]: [number, number]): [number, number] {
  return [Math.min(Math.max(x, 0), innerWidth - SIZE), Math.min(Math.max(y, 0), innerHeight - SIZE)];
}

/** Whether a badge at `spot` would cover anything of the page but empty space of `element`'s ancestors:
 * another element (a sibling's text, an image) or an ancestor's own text there. One hit test per spot,
 * only when a badge moves; never for elements inside frames (their hit test is the frame's). */
function coversText(spot: [number, number], element: Element | "region"): boolean {
  return safe(() => coversTextAt(spot, element), false);
}

function coversTextAt([x, y]: [number, number], element: Element | "region"): boolean {
  const box = { left: x, top: y, right: x + SIZE, bottom: y + SIZE };
  // The centre and four points just inside the corners: a word can end under one edge of the badge.
  const points: [number, number][] = [[x + SIZE / 2, y + SIZE / 2], [x + 2, y + 2], [x + SIZE - 2, y + 2],
    [x + 2, y + SIZE - 2], [x + SIZE - 2, y + SIZE - 2]];
  const checked = new Set<Element>();
  for (const [px, py] of points) {
    const hit = hitAt(px, py);
    if (!hit || checked.has(hit)) continue;
    checked.add(hit);
    if (element !== "region" && !hit.contains(element)) return true;
    if (ownTextMeets(hit, box)) return true;
  }
  return false;
}

/** Whether one of `el`'s own text nodes (not its children's) has a line box meeting `box`. */
function ownTextMeets(el: Element, box: { left: number; top: number; right: number; bottom: number }): boolean {
  let seen = 0;
  for (const node of Array.from(el.childNodes)) {
    if (node.nodeType !== 3 || !node.textContent?.trim()) continue;
    if (++seen > 32) return false;
    const range = document.createRange();
    range.selectNodeContents(node);
    for (const t of Array.from(range.getClientRects())) {
      if (t.left < box.right && box.left < t.right && t.top < box.bottom && box.top < t.bottom) return true;
    }
  }
  return false;
}

function refind(t: PickedTarget): Element | null {
  const old = t.element;
  if (!old) return null;
  const d = ownerDoc(old);
  if (!d) return null;
  const tag = t.info.tagName;
  const file = t.source?.file;
  const fits = (el: Element | null): el is Element => {
    if (!el || el === old || !connected(el) || isOverlay(el) || localName(el) !== tag) return false;
    if (!file) return true;
    const loc = nearestLocated(el);
    if (!loc || loc.loc.file !== file) return false;
    if (t.sourceFrom === "element" && !loc.own) return false;
    // Same place in the code but other text: another instance of the same markup (a list item that
    // moved up when the picked one was removed), not the picked element re-rendered.
    const samePlace = loc.loc.line === t.source?.line && loc.loc.column === t.source?.column;
    return !samePlace || boundedText(el) === t.info.text;
  };
  const bySelector = t.info.selector ? atSelector(d, t.info.selector) : null;
  if (fits(bySelector)) return bySelector;
  if (!file || t.sourceFrom !== "element") return null;
  const candidates = queryAll(d, `[${LOC_ATTRIBUTE}^=${cssString(file + ":")}]`)
    .slice(0, MAX_CANDIDATES)
    .filter(fits);
  if (candidates.length === 1) return candidates[0]!;
  const same = candidates.filter((el) => boundedText(el) === t.info.text);
  return same.length === 1 ? same[0]! : null;
}

/** The element at a selector written by selectorOf (`host >>> inner` through open shadow roots). */
function atSelector(d: Document, selector: string): Element | null {
  let root: Document | ShadowRoot | null = d;
  let el: Element | null = null;
  for (const part of selector.split(" >>> ")) {
    if (!root) return null;
    const scope: Document | ShadowRoot = root;
    el = safe(() => scope.querySelector(part), null);
    if (!el) return null;
    root = openShadow(el);
  }
  return el;
}

function cssString(s: string): string {
  return `"${s.replace(/["\\]/g, "\\$&").replace(/[\n\r\f]/g, " ")}"`;
}
