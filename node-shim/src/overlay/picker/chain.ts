/**
 * The component usage chain of a picked element (issue 15; docs/node-shim.md "Support by framework"):
 * where each enclosing component instance is used, innermost first — for a `<button>` inside a shared
 * `Button` inside `Card` on a page: the `<Button>` usage in Card.tsx, then the `<Card>` usage in the page,
 * and so on up, at most MAX_CHAIN sites. Sent as `Target.usageChain` so the agent can tell "this button"
 * (the usage) from "every button" (the component's own markup).
 *
 * One gatherer per framework, each reading its own dev-time component tree; the first that finds a chain
 * wins. Every site is checked here once more: a project-relative path only (never absolute, `..`, a
 * drive letter or node_modules), positive line/column, bounded strings. Never throws.
 */
import { isArray } from "../../protocol/arrays.js";
import type { UsageSite } from "../../protocol/protocol.generated.js";
import { preactUsageChain } from "./chain-preact.js";
import { reactUsageChain } from "./chain-react.js";
import { svelteUsageChain } from "./chain-svelte.js";
import { vueUsageChain } from "./chain-vue.js";
import { isProjectPath } from "./chain-site.js";
import { safe } from "./dom.js";

export const MAX_CHAIN = 5;
export { USE_ATTRIBUTE, isProjectPath, parseUse } from "./chain-site.js";
const MAX_COMPONENT = 200;

/** The gatherers, tried in order. Each returns raw sites (checked by `cleanChain`), innermost first. */
const GATHERERS: Array<(el: Element) => UsageSite[]> = [reactUsageChain, preactUsageChain, vueUsageChain, svelteUsageChain];

/** The usage chain of `el` (≤ MAX_CHAIN sites, innermost first), [] when no framework exposes one. */
export function usageChain(el: Element): UsageSite[] {
  for (const gather of GATHERERS) {
    const chain = cleanChain(safe(() => gather(el), [] as UsageSite[]));
    if (chain.length > 0) return chain;
  }
  return [];
}

/** Only well-formed, project-relative sites; consecutive duplicates dropped; at most MAX_CHAIN. */
export function cleanChain(sites: readonly UsageSite[]): UsageSite[] {
  const out: UsageSite[] = [];
  for (const site of isArray(sites) ? sites : []) {
    if (!site || typeof site.file !== "string" || !isProjectPath(site.file)) continue;
    const line = site.line;
    const column = site.column ?? 1;
    if (!Number.isInteger(line) || line < 1 || !Number.isInteger(column) || column < 1) continue;
    const clean: UsageSite = { file: site.file, line, column };
    if (typeof site.component === "string" && site.component) clean.component = site.component.slice(0, MAX_COMPONENT);
    const last = out[out.length - 1];
    if (last && last.file === clean.file && last.line === clean.line && last.column === clean.column) continue;
    out.push(clean);
    if (out.length === MAX_CHAIN) break;
  }
  return out;
}
