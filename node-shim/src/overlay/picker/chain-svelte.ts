// The Svelte usage chain of a picked element (issue 15): the usage site of each enclosing component
// instance, innermost first, at most MAX_SITES. Read from Svelte 5's own dev metadata: every element a
// component creates has `__svelte_meta = { loc, parent }`, where `parent` is the dev stack at creation
// time, a linked list of `{ type: 'component' | 'if' | 'each' | 'render' | …, file, line, column,
// componentTag?, parent }` (sveltejs/svelte#16255; an older Svelte 5 has no `parent`, hence no chain).
// A 'component' entry is a `<Card …>` tag: `file` is the file it is written in (Svelte's `filename`),
// `line` 1-based, `column` 0-based on the text Svelte compiled.
//
// That text carries our `data-spotpatch-loc` attributes, so Svelte's column is shifted on lines where an
// element precedes the tag, and its file is relative to Vite's cwd (or absolute). The locator therefore
// registers, per stamped file, its project-relative path and a table `"line:svelteColumn" → [engine
// column, tag]` (src/locate/locate-svelte.ts). An entry whose file or column is not in that table (a library
// component, a stale module) is left out rather than reported at a guessed place.
import type { UsageSite } from "../../protocol/protocol.generated.js";

/** At most this many usage sites (the protocol bounds `Target.usageChain` the same way). */
export const MAX_SITES = 5;
/** How far up the dev stack (and the DOM, for an element Svelte did not create) we look. */
const MAX_STEPS = 200;
const REGISTRY_KEY = "spotpatch.svelte";

interface DevStackEntry {
  type?: unknown;
  file?: unknown;
  line?: unknown;
  column?: unknown;
  componentTag?: unknown;
  parent?: DevStackEntry | null;
}
interface RegisteredFile {
  file: string;
  usages: Record<string, [number, string]>;
}

/** The usage chain of `el` (see the header); [] when the page is not a Svelte dev build. */
export function svelteUsageChain(el: Element): UsageSite[] {
  const registry = (globalThis as Record<symbol, unknown>)[Symbol.for(REGISTRY_KEY)];
  if (!(registry instanceof Map)) return [];
  let node: Element | null = el;
  let meta: { parent?: DevStackEntry | null } | undefined;
  for (let i = 0; node && i < MAX_STEPS; i++, node = node.parentElement) {
    meta = (node as unknown as { __svelte_meta?: { parent?: DevStackEntry | null } | null }).__svelte_meta ?? undefined;
    if (meta) break;
  }
  const sites: UsageSite[] = [];
  let entry = meta?.parent ?? null;
  for (let i = 0; entry && sites.length < MAX_SITES && i < MAX_STEPS; i++, entry = entry.parent ?? null) {
    if (entry.type !== "component" || typeof entry.file !== "string") continue;
    const registered = resolveFile(registry as Map<string, RegisteredFile>, entry.file);
    const usage = registered?.usages?.[`${String(entry.line)}:${String(entry.column)}`];
    if (!registered || !Array.isArray(usage) || typeof entry.line !== "number") continue;
    const [column, tag] = usage;
    if (typeof column !== "number" || typeof tag !== "string" || typeof registered.file !== "string") continue;
    if (typeof entry.componentTag === "string" && entry.componentTag !== tag) continue; // stale table
    const site: UsageSite = { file: registered.file, line: entry.line, column };
    if (!tag.startsWith("svelte:")) site.component = tag;
    sites.push(site);
  }
  return sites;
}

/**
 * The registered file Svelte calls `svelteFile`: the same path, or one that ends with the other at a
 * "/" boundary (Svelte's is relative to the Vite process's cwd, ours to the project root); null when
 * none or more than one match.
 */
function resolveFile(registry: Map<string, RegisteredFile>, svelteFile: string): RegisteredFile | null {
  const name = svelteFile.replace(/\\/g, "/");
  const exact = registry.get(name);
  if (exact) return exact;
  let found: RegisteredFile | null = null;
  for (const [rel, value] of registry) {
    if (!name.endsWith(`/${rel}`) && !rel.endsWith(`/${name}`)) continue;
    if (found) return null; // ambiguous: two project files fit
    found = value;
  }
  return found;
}
