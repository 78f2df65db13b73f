/**
 * What SpotPatch tells the engine about an element (`PickedTarget`): bounded `ElementInfo`, the source
 * location from `data-spotpatch-loc`, and the component name the framework's dev build exposes.
 *
 * Source rule: the element's own `data-spotpatch-loc` when it has one (`sourceFrom: "element"`), else the
 * nearest ancestor's in the composed tree (`sourceFrom: "ancestor"`: e.g. a `<b>` inside a located
 * `<p>`, or an element rendered by a component from node_modules), else null ("source unknown").
 *
 * Component names (dev builds only; never a file path from the framework, which may be absolute):
 * - React: the `__reactFiber$…` (≥17) / `__reactInternalInstance$…` (16) key of the element; walk
 *   `return` to the nearest function/class component (memo and forwardRef unwrapped), its displayName/name.
 * - Vue 3: `__vueParentComponent` (the element's own or its nearest ancestor's), `type.__name ?? type.name`,
 *   walking `parent` past anonymous components.
 * - Svelte 5: `__svelte_meta.loc.file`'s base name without `.svelte` (the component file of the markup).
 */
import { finder } from "@medv/finder";

import type { ElementInfo, SourceLocation } from "../../protocol/protocol.generated.js";
import {
  LOC_ATTRIBUTE,
  attr,
  attrNames,
  composedParent,
  framePath,
  localName,
  ownerDoc,
  parentEl,
  rootNode,
  safe,
  viewportRect,
} from "./dom.js";
import { isProjectPath, usageChain } from "./chain.js";
import type { PickedTarget } from "./types.js";

export const MAX_TEXT = 500;
const MAX_ATTR = 500;
const MAX_SELECTOR = 1000;
const MAX_COMPONENT = 200;
const ATTRS = ["id", "class", "role", "name", "type", "href", "alt", "title", "data-testid"];
const ARIA = /^aria-[a-z0-9-]+$/;

/** `file:line:col` → a SourceLocation (file may itself contain ':'), or null when malformed. */
export function parseLoc(value: string | null): SourceLocation | null {
  if (!value || value.length > 1100) return null;
  const m = /^(.+):(\d+):(\d+)$/.exec(value);
  if (!m) return null;
  const file = m[1]!;
  const line = Number(m[2]);
  const column = Number(m[3]);
  if (file.length > 1024 || !(line >= 1) || !(column >= 1)) return null;
  // The locator writes project-relative paths only: anything else is the page's own forgery, never sent.
  if (!isProjectPath(file)) return null;
  return { file, line, column };
}

/** The element's own location, else the nearest located ancestor's (composed tree, ≤ 256 levels). */
export function nearestLocated(el: Element): { el: Element; loc: SourceLocation; own: boolean } | null {
  let cur: Element | null = el;
  for (let i = 0; cur && i < 256; i++) {
    const loc = parseLoc(attr(cur, LOC_ATTRIBUTE));
    if (loc) return { el: cur, loc, own: cur === el };
    cur = composedParent(cur);
  }
  return null;
}

/** Up to `max` characters of the element's text (text nodes only, whitespace collapsed): no layout, no
 * giant string even when the element holds megabytes of text. */
export function boundedText(el: Element, max = MAX_TEXT): string {
  return safe(() => {
    const doc = ownerDoc(el) ?? document;
    const walker = doc.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    let out = "";
    for (let n = walker.nextNode(), steps = 0; n && steps < 5000; n = walker.nextNode(), steps++) {
      const p = n.parentNode as Element | null;
      const tag = p ? localName(p) : "";
      if (tag === "script" || tag === "style" || tag === "noscript" || tag === "template") continue;
      out += (n as Text).data.slice(0, max * 2).replace(/\s+/g, " ");
      if (out.length > max * 2) break;
    }
    return out.trim().slice(0, max);
  }, "");
}

function attributes(el: Element): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of ATTRS) {
    const v = attr(el, name);
    if (v !== null && v !== "") out[name] = v.slice(0, MAX_ATTR);
  }
  const names = attrNames(el).slice(0, 200);
  let aria = 0;
  for (const name of names) {
    if (aria >= 8) break;
    if (!ARIA.test(name)) continue;
    const v = attr(el, name);
    if (v !== null) {
      out[name] = v.slice(0, MAX_ATTR);
      aria++;
    }
  }
  return out;
}

/** A unique CSS selector (@medv/finder, bounded in time and checks), or a plain nth-of-type path. Inside
 * an open shadow root the selector is relative to it, prefixed by the host's selector and " >>> ". */
export function selectorOf(el: Element, depth = 0): string | null {
  const root = rootNode(el);
  let inner: string | null = safe(
    () =>
      finder(el, {
        root: root as unknown as Element,
        timeoutMs: 40,
        maxNumberOfPathChecks: 400,
        seedMinLength: 3,
        className: (name) => name.length < 40 && !/^(css|sc|jsx|svelte)-[\w-]+$/.test(name) && /^[a-zA-Z][\w-]*$/.test(name),
        attr: (name, value) => (name === "data-testid" || name === "name" || name === "role") && value.length < 60,
      }),
    null,
  );
  if (inner === null) inner = pathSelector(el);
  if (root instanceof ShadowRoot && depth < 4) {
    const host = selectorOf(root.host, depth + 1);
    if (host) inner = `${host} >>> ${inner}`;
  }
  return inner && inner.length <= MAX_SELECTOR ? inner : inner ? inner.slice(-MAX_SELECTOR) : null;
}

function pathSelector(el: Element): string {
  const parts: string[] = [];
  let cur: Element | null = el;
  for (let i = 0; cur && i < 32; i++) {
    const tag = localName(cur);
    if (tag === "html") {
      parts.unshift("html");
      break;
    }
    const parent = parentEl(cur);
    let nth = 1;
    for (let s = cur.previousElementSibling, k = 0; s && k < 10000; s = s.previousElementSibling, k++) {
      if (localName(s) === tag) nth++;
    }
    parts.unshift(`${CSS.escape(tag)}:nth-of-type(${nth})`);
    cur = parent;
  }
  return parts.join(" > ");
}

/** The name of the component that rendered `el`, when the framework's dev build tells (see the module comment). */
export function componentName(el: Element): string | undefined {
  const name = safe(() => reactName(el) ?? vueName(el) ?? svelteName(el), undefined);
  return name ? name.slice(0, MAX_COMPONENT) : undefined;
}

type Fiber = { type?: unknown; return?: Fiber | null };

function reactName(el: Element): string | undefined {
  let fiber: Fiber | undefined;
  const keys = Object.keys(el);
  for (let i = 0; i < keys.length && i < 64; i++) {
    const k = keys[i]!;
    if (k.startsWith("__reactFiber$") || k.startsWith("__reactInternalInstance$")) {
      fiber = (el as unknown as Record<string, Fiber>)[k];
      break;
    }
  }
  for (let i = 0; fiber && i < 200; i++, fiber = fiber.return ?? undefined) {
    const name = typeName(fiber.type);
    if (name) return name;
  }
  return undefined;
}

function typeName(type: unknown, depth = 0): string | undefined {
  if (!type || depth > 3) return undefined;
  if (typeof type === "function") {
    const t = type as { displayName?: unknown; name?: unknown };
    const n = typeof t.displayName === "string" ? t.displayName : typeof t.name === "string" ? t.name : "";
    return n || undefined;
  }
  if (typeof type === "object") {
    const t = type as { displayName?: unknown; render?: unknown; type?: unknown };
    if (typeof t.displayName === "string" && t.displayName) return t.displayName;
    return typeName(t.render, depth + 1) ?? typeName(t.type, depth + 1); // forwardRef, memo
  }
  return undefined;
}

type VueInstance = { type?: { __name?: unknown; name?: unknown }; parent?: VueInstance | null };

function vueName(el: Element): string | undefined {
  let cur: Element | null = el;
  let inst: VueInstance | undefined;
  for (let i = 0; cur && i < 64 && !inst; i++) {
    inst = (cur as unknown as { __vueParentComponent?: VueInstance }).__vueParentComponent;
    cur = parentEl(cur);
  }
  for (let i = 0; inst && i < 64; i++, inst = inst.parent ?? undefined) {
    const t = inst.type;
    const n = typeof t?.__name === "string" ? t.__name : typeof t?.name === "string" ? t.name : "";
    if (n) return n;
  }
  return undefined;
}

function svelteName(el: Element): string | undefined {
  let cur: Element | null = el;
  for (let i = 0; cur && i < 64; i++) {
    const meta = (cur as unknown as { __svelte_meta?: { loc?: { file?: unknown } } }).__svelte_meta;
    const file = meta?.loc?.file;
    if (typeof file === "string" && file) {
      const base = file.split(/[\\/]/).pop() ?? "";
      return base.replace(/\.svelte$/, "") || undefined;
    }
    cur = parentEl(cur);
  }
  return undefined;
}

/** Document coordinates (top page) of the element's border box. */
export function documentRect(el: Element): { x: number; y: number; width: number; height: number } {
  const r = viewportRect(el);
  return { x: round(r.x + window.scrollX), y: round(r.y + window.scrollY), width: round(r.width), height: round(r.height) };
}

const round = (n: number): number => Math.round(n * 10) / 10;

/** Everything the panel and the engine get for one element. Never throws (hostile pages get defaults). */
export function describeElement(element: Element): PickedTarget {
  const tag = localName(element).slice(0, 64) || "element";
  const info: ElementInfo = {
    tagName: tag,
    selector: selectorOf(element),
    text: boundedText(element),
    attributes: attributes(element),
    rect: documentRect(element),
  };
  const component = componentName(element);
  const located = nearestLocated(element);
  const source: SourceLocation | null = located ? { ...located.loc, ...(component ? { component } : {}) } : null;
  const target: PickedTarget = {
    element,
    info,
    source,
    label: { tag, ...(component ? { component } : {}), ...(source ? { location: `${source.file}:${source.line}` } : {}) },
  };
  if (located) target.sourceFrom = located.own ? "element" : "ancestor";
  const chain = safe(() => usageChain(element), []);
  if (chain.length > 0) target.usageChain = chain;
  const frame = framePath(ownerDoc(element));
  if (frame) target.frame = frame;
  return target;
}

/** The cheap part of describeElement, for the hover label (no selector, no text). */
export function quickLabel(element: Element): PickedTarget["label"] {
  const tag = localName(element).slice(0, 64) || "element";
  const component = componentName(element);
  const located = nearestLocated(element);
  return {
    tag,
    ...(component ? { component } : {}),
    ...(located ? { location: `${located.loc.file}:${located.loc.line}` } : {}),
  };
}
