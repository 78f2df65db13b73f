/**
 * Targets beyond single elements: the element holding a text selection ("Target this text") and the
 * elements covered by a dragged rectangle (area mode).
 */
import { LOC_ATTRIBUTE, type Box, elementAt, isOverlay, localName, parentEl, queryAll, safe, viewportRect } from "./dom.js";
import { MAX_TEXT, describeElement, documentRect, nearestLocated, selectorOf } from "./describe.js";
import type { AreaElement, AreaInfo } from "../../protocol/protocol.generated.js";
import type { PickedTarget } from "./types.js";

/**
 * A target for the selection's common ancestor element (its nearest located ancestor-or-self when there
 * is one, so the target carries a source location) with the selected text as `quote` (≤ 500 characters,
 * whitespace collapsed). Null for no selection, a collapsed one, or one inside the overlay.
 */
export function targetFromSelection(selection: Selection | null): PickedTarget | null {
  return safe(() => {
    if (!selection || selection.rangeCount === 0 || selection.isCollapsed) return null;
    const range = selection.getRangeAt(0);
    const common = range.commonAncestorContainer;
    const el = common.nodeType === Node.ELEMENT_NODE ? (common as Element) : parentEl(common);
    if (!el || isOverlay(el)) return null;
    const quote = selection.toString().slice(0, MAX_TEXT * 4).replace(/\s+/g, " ").trim().slice(0, MAX_TEXT);
    if (!quote) return null;
    const located = nearestLocated(el);
    const target = describeElement(located ? located.el : el);
    target.quote = quote;
    return target;
  }, null);
}

const MAX_AREA_TARGETS = 50;

/**
 * The targets of a dragged rectangle `r` (top viewport coordinates) in `doc`: the located elements
 * (`data-spotpatch-loc`) whose border box lies inside it, outermost only, in document order; or, when
 * none is located, one region target whose info describes the smallest element holding the region.
 */
export function areaTargets(r: Box, doc: Document = document): PickedTarget[] {
  const slack = 2;
  const inside = (b: Box) =>
    b.width > 0 &&
    b.height > 0 &&
    b.x >= r.x - slack &&
    b.y >= r.y - slack &&
    b.x + b.width <= r.x + r.width + slack &&
    b.y + b.height <= r.y + r.height + slack;
  const chosen: Element[] = [];
  // querySelectorAll is in document order; a covered element whose ancestor was chosen is skipped.
  for (const el of queryAll(doc, `[${LOC_ATTRIBUTE}]`)) {
    if (chosen.length >= MAX_AREA_TARGETS) break;
    if (isOverlay(el)) continue;
    if (chosen.some((c) => c.contains(el))) continue;
    if (inside(viewportRect(el))) chosen.push(el);
  }
  if (chosen.length > 0) return chosen.map((el) => describeElement(el));
  return [regionTarget(r)];
}

/** One target for a region with no located element: the region in document coordinates, described by the
 * smallest element that holds it (selector, nearest source location) and the text shown inside it. */
export function regionTarget(r: Box): PickedTarget {
  const region = {
    x: Math.round(r.x + window.scrollX),
    y: Math.round(r.y + window.scrollY),
    width: Math.round(r.width),
    height: Math.round(r.height),
  };
  let holder = elementAt(r.x + r.width / 2, r.y + r.height / 2);
  for (let i = 0; holder && i < 64; i++) {
    const b = viewportRect(holder);
    if (b.x <= r.x && b.y <= r.y && b.x + b.width >= r.x + r.width && b.y + b.height >= r.y + r.height) break;
    holder = parentEl(holder);
  }
  const located = holder ? nearestLocated(holder) : null;
  return {
    element: null,
    region,
    area: {
      rect: region,
      viewportWidth: Math.round(window.innerWidth),
      viewportHeight: Math.round(window.innerHeight),
      elements: areaElements(r),
    },
    info: {
      tagName: "region",
      selector: holder ? selectorOf(holder) : null,
      text: holder ? textInside(holder, r) : "",
      attributes: {},
      rect: region,
    },
    source: located ? located.loc : null,
    ...(located ? { sourceFrom: "ancestor" as const } : {}),
    label: { tag: "region", ...(located ? { location: `${located.loc.file}:${located.loc.line}` } : {}) },
  };
}

/** Located elements an area target carries at most (AreaInfo.elements), and how many are looked at. */
const MAX_AREA_ELEMENTS = 8;
const MAX_AREA_SCAN = 5000;

/**
 * The located elements (`data-spotpatch-loc`) overlapping the rectangle `r` (top viewport coordinates), not
 * holding it whole (those enclose the area), largest overlap first: at most 8, each with its location, tag
 * name and border box in page coordinates. At most 5,000 located elements are looked at.
 */
export function areaElements(r: Box, doc: Document = document): NonNullable<AreaInfo["elements"]> {
  const found: { overlap: number; el: Element; box: Box }[] = [];
  let scanned = 0;
  for (const el of queryAll(doc, `[${LOC_ATTRIBUTE}]`)) {
    if (++scanned > MAX_AREA_SCAN) break;
    if (isOverlay(el)) continue;
    const b = viewportRect(el);
    const w = Math.min(r.x + r.width, b.x + b.width) - Math.max(r.x, b.x);
    const h = Math.min(r.y + r.height, b.y + b.height) - Math.max(r.y, b.y);
    if (w <= 0 || h <= 0) continue;
    if (b.x <= r.x && b.y <= r.y && b.x + b.width >= r.x + r.width && b.y + b.height >= r.y + r.height) continue;
    found.push({ overlap: w * h, el, box: b });
  }
  found.sort((a, b) => b.overlap - a.overlap);
  const out: AreaElement[] = [];
  for (const { el, box } of found) {
    if (out.length >= MAX_AREA_ELEMENTS) break;
    const located = nearestLocated(el);
    if (!located?.own) continue;
    out.push({
      source: located.loc,
      tagName: (localName(el) || "element").slice(0, 64),
      rect: {
        x: Math.round(box.x + window.scrollX),
        y: Math.round(box.y + window.scrollY),
        width: Math.round(box.width),
        height: Math.round(box.height),
      },
    });
  }
  return out as NonNullable<AreaInfo["elements"]>;
}

/** The text of `holder`'s text nodes whose element lies (partly) inside `r`: ≤ 2,000 nodes, ≤ 500 chars. */
function textInside(holder: Element, r: Box): string {
  return safe(() => {
    const walker = (holder.ownerDocument ?? document).createTreeWalker(holder, NodeFilter.SHOW_TEXT);
    let out = "";
    let last: Element | null = null;
    let lastInside = false;
    for (let n = walker.nextNode(), i = 0; n && i < 2000 && out.length < MAX_TEXT; n = walker.nextNode(), i++) {
      const data = (n as Text).data;
      if (!data.trim()) continue;
      const parent = n.parentElement;
      if (!parent || isOverlay(parent)) continue;
      if (parent !== last) {
        last = parent;
        const tag = localName(parent);
        const b = viewportRect(parent);
        lastInside =
          tag !== "script" && tag !== "style" && b.width > 0 && b.x < r.x + r.width && b.x + b.width > r.x && b.y < r.y + r.height && b.y + b.height > r.y;
      }
      if (lastInside) out += ` ${data.slice(0, MAX_TEXT).replace(/\s+/g, " ")}`;
    }
    return out.trim().slice(0, MAX_TEXT);
  }, "");
}

export { documentRect };
