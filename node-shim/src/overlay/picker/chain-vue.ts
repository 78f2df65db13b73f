/**
 * The Vue usage chain of a picked element (issue 15): for each component instance enclosing the element,
 * innermost first, where that component is used — the `file:line:col` of its tag (`<Card …>`) in the
 * parent's template — and the component's name. At most MAX_SITES sites.
 *
 * Where it comes from (Vue 3 dev builds): the element's `__vueParentComponent` (its own, else the
 * nearest ancestor's) is the instance that rendered it; `instance.parent` walks up to the page. The
 * usage site rides on `instance.vnode.props.onVnodeBeforeMount`, a handler `() =>
 * 'spotpatch-use:<percent-encoded site>'` that src/locate/locate-vue.ts put on every component tag of a project
 * `.vue` template. It is read from the handler's source text (the captured native
 * `Function.prototype.toString`), never called. Instances without one — components used from
 * node_modules, render functions, the root app — add no site but do not end the walk. A site is kept
 * only when it is project-relative (no absolute path, no `..`, no node_modules); a site equal to the
 * previous one (an async component's wrapper and its inner component) is listed once, with the inner
 * name. Never throws: a hostile page gets an empty or shorter chain.
 */
import type { UsageSite } from "../../protocol/protocol.generated.js";
import { composedParent, safe } from "./dom.js";

/** Same string as `USE_MARK` in src/locate/locate-vue.ts (the overlay bundle must not import Node code). */
const USE_MARK = "spotpatch-use:";
export const MAX_SITES = 5;
const MAX_HOPS = 64;
const MAX_NAME = 200;
const MAX_FILE = 1024;
const fnToString = Function.prototype.toString;

type VueInstance = {
  type?: { __name?: unknown; name?: unknown } | null;
  parent?: VueInstance | null;
  vnode?: { props?: Record<string, unknown> | null } | null;
};

/** The usage sites of the Vue components enclosing `el`, innermost first (see the module comment). */
export function vueUsageChain(el: Element): UsageSite[] {
  return safe(() => chain(el), []);
}

function chain(el: Element): UsageSite[] {
  let inst: VueInstance | undefined;
  let cur: Element | null = el;
  for (let i = 0; cur && i < MAX_HOPS && !inst; i++) {
    const candidate = safe(() => (cur as unknown as { __vueParentComponent?: unknown }).__vueParentComponent, undefined);
    if (candidate && typeof candidate === "object") inst = candidate;
    cur = composedParent(cur);
  }
  const sites: UsageSite[] = [];
  const seen = new Set<VueInstance>();
  for (let i = 0; inst && i < MAX_HOPS && sites.length < MAX_SITES && !seen.has(inst); i++) {
    seen.add(inst);
    const current: VueInstance = inst;
    const site = safe(() => usageSite(current), null);
    if (site) {
      const previous = sites[sites.length - 1];
      const same = previous && previous.file === site.file && previous.line === site.line && previous.column === site.column;
      if (!same) sites.push(site);
    }
    const parent = safe(() => current.parent, null);
    inst = parent && typeof parent === "object" ? parent : undefined;
  }
  return sites;
}

/** The site marked on the instance's vnode, with the component's name; null when unmarked or invalid. */
function usageSite(inst: VueInstance): UsageSite | null {
  const hook = inst.vnode?.props?.onVnodeBeforeMount;
  // a user's own before-mount hook merged with ours makes an array (mergeProps)
  const candidates: unknown[] = Array.isArray(hook) ? hook.slice(0, 8) : [hook];
  for (const fn of candidates) {
    if (typeof fn !== "function") continue;
    const value = payload(fnToString.call(fn));
    const loc = value === null ? null : projectLoc(value);
    if (!loc) continue;
    const name = componentName(inst);
    return { ...loc, ...(name ? { component: name } : {}) };
  }
  return null;
}

/** The decoded `file:line:col` after USE_MARK in a handler's source, or null. */
function payload(source: string): string | null {
  if (source.length > 4096) return null;
  const at = source.indexOf(USE_MARK);
  if (at < 0) return null;
  const m = /^[A-Za-z0-9%._~-]{1,4000}/.exec(source.slice(at + USE_MARK.length));
  if (!m) return null;
  try {
    return decodeURIComponent(m[0]);
  } catch {
    return null;
  }
}

/** `file:line:col` → a site, when the file is project-relative (never absolute, `..` or node_modules). */
function projectLoc(value: string): { file: string; line: number; column: number } | null {
  const m = /^(.+):(\d+):(\d+)$/s.exec(value);
  if (!m) return null;
  const file = m[1]!;
  const line = Number(m[2]);
  const column = Number(m[3]);
  if (file.length > MAX_FILE || !(line >= 1) || !(column >= 1)) return null;
  if (file.startsWith("/") || file.startsWith("\\") || /^[A-Za-z]:/.test(file)) return null;
  const parts = file.split(/[\\/]/);
  if (parts.includes("..") || parts.includes("node_modules")) return null;
  return { file, line, column };
}

function componentName(inst: VueInstance): string | undefined {
  const t = inst.type;
  const n = typeof t?.__name === "string" ? t.__name : typeof t?.name === "string" ? t.name : "";
  return n ? n.slice(0, MAX_NAME) : undefined;
}
