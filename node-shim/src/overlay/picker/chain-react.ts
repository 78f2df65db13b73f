/**
 * React's usage chain (dev builds): the element's fiber (`__reactFiber$…`, React ≥ 17) and its `return`
 * ancestors. Each function/class component fiber (forwardRef and memo too) whose props carry
 * `data-spotpatch-use` — written by the locator on every component usage in project JSX — is one usage
 * site: the component's name and where that instance is used. Components from node_modules have no such
 * prop and are passed over. Reads props only; never calls into React.
 */
import type { UsageSite } from "../../protocol/protocol.generated.js";
import { USE_ATTRIBUTE, parseUse } from "./chain-site.js";

type Fiber = { type?: unknown; return?: Fiber | null; memoizedProps?: unknown; pendingProps?: unknown };

const MAX_FIBERS = 2000;
const MAX_SITES = 10;

export function reactUsageChain(el: Element): UsageSite[] {
  let fiber = fiberOf(el);
  const out: UsageSite[] = [];
  for (let i = 0; fiber && i < MAX_FIBERS && out.length < MAX_SITES; i++, fiber = fiber.return ?? undefined) {
    const name = componentName(fiber.type);
    if (name === undefined) continue;
    const props = (fiber.memoizedProps ?? fiber.pendingProps) as Record<string, unknown> | null | undefined;
    const site = parseUse(props && typeof props === "object" ? props[USE_ATTRIBUTE] : undefined, name || undefined);
    if (site) out.push(site);
  }
  return out;
}

function fiberOf(el: Element): Fiber | undefined {
  const keys = Object.keys(el);
  for (let i = 0; i < keys.length && i < 64; i++) {
    const k = keys[i]!;
    if (k.startsWith("__reactFiber$") || k.startsWith("__reactInternalInstance$")) {
      return (el as unknown as Record<string, Fiber>)[k];
    }
  }
  return undefined;
}

const FORWARD_REF = Symbol.for("react.forward_ref");
const MEMO = Symbol.for("react.memo");

/** The name of a component type ("" when anonymous); undefined when `type` is not a component
 * (a host element's string, a fragment, a context provider, …). */
function componentName(type: unknown, depth = 0): string | undefined {
  if (depth > 3 || !type) return undefined;
  if (typeof type === "function") {
    const t = type as { displayName?: unknown; name?: unknown };
    return typeof t.displayName === "string" ? t.displayName : typeof t.name === "string" ? t.name : "";
  }
  if (typeof type === "object") {
    const t = type as { $$typeof?: unknown; displayName?: unknown; render?: unknown; type?: unknown };
    if (t.$$typeof !== FORWARD_REF && t.$$typeof !== MEMO) return undefined;
    if (typeof t.displayName === "string" && t.displayName) return t.displayName;
    return componentName(t.$$typeof === FORWARD_REF ? t.render : t.type, depth + 1) ?? "";
  }
  return undefined;
}
