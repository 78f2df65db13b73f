/**
 * Preact's usage chain (Preact 10 and 11): Preact keeps no pointer from a DOM node to its vnode, but the
 * container it rendered into holds the root vnode (`_children`, mangled `__k`), each vnode its children
 * (`__k`) and a host vnode its DOM node (`_dom`, mangled `__e`) — the mangled names Preact's devtools rely
 * on. The picked element's host vnode is found by a bounded depth-first search from the nearest such
 * container; the component vnodes on the path down to it, innermost first, whose props carry
 * `data-spotpatch-use` (written by the locator on every component usage in project JSX) are the usage
 * sites.
 */
import type { UsageSite } from "../../protocol/protocol.generated.js";
import { USE_ATTRIBUTE, parseUse } from "./chain-site.js";
import { parentEl } from "./dom.js";

type VNode = { type?: unknown; props?: Record<string, unknown> | null; __k?: Array<VNode | null> | null; __e?: unknown };

const MAX_VNODES = 20_000;
const MAX_DEPTH = 400;

export function preactUsageChain(el: Element): UsageSite[] {
  const root = rootVNode(el);
  if (!root) return [];
  const path = pathTo(root, el);
  const out: UsageSite[] = [];
  for (let i = path.length - 1; i >= 0; i--) {
    const v = path[i]!;
    if (typeof v.type !== "function") continue;
    const t = v.type as { displayName?: unknown; name?: unknown };
    const name = typeof t.displayName === "string" ? t.displayName : typeof t.name === "string" ? t.name : "";
    const site = parseUse(v.props?.[USE_ATTRIBUTE], name || undefined);
    if (site) out.push(site);
  }
  return out;
}

/** The root vnode of the nearest ancestor Preact rendered into. */
function rootVNode(el: Element): VNode | undefined {
  let cur: Element | null = parentEl(el);
  for (let i = 0; cur && i < 256; i++, cur = parentEl(cur)) {
    const k = (cur as unknown as { __k?: unknown }).__k;
    if (k && typeof k === "object" && !Array.isArray(k) && "type" in k) return k;
  }
  return undefined;
}

/** The vnodes from `root` down to the host vnode of `el` (both included); [] when not found. */
function pathTo(root: VNode, el: Element): VNode[] {
  const stack: Array<{ v: VNode; depth: number }> = [{ v: root, depth: 0 }];
  const path: VNode[] = [];
  for (let seen = 0; stack.length > 0 && seen < MAX_VNODES; seen++) {
    const { v, depth } = stack.pop()!;
    path.length = depth;
    path.push(v);
    if (v.__e === el && typeof v.type === "string") return path;
    const kids = Array.isArray(v.__k) ? v.__k : [];
    if (depth + 1 >= MAX_DEPTH) continue;
    for (let i = kids.length - 1; i >= 0; i--) {
      const kid = kids[i];
      if (kid && typeof kid === "object") stack.push({ v: kid, depth: depth + 1 });
    }
  }
  return [];
}
