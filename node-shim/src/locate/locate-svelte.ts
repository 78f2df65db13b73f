/**
 * `spotpatch:locate-svelte` — the dev-only Svelte 5 locator (issue 15): every native element of a
 * `.svelte` component gets `data-spotpatch-loc="<file>:<line>:<col>"`, in the same units as the JSX
 * locator (src/locate/locate.ts: path relative to the project root, 1-based line split on "\n" only, 1-based
 * column in code points).
 *
 * How: a `pre` transform parses the file with the project's own Svelte parser (`svelte/compiler`
 * `parse(…, {modern: true})`) and inserts the attribute right after the tag name of every
 * `RegularElement` and `<svelte:element>` (an attribute there lands on whichever element it creates).
 * The hook runs with `order: 'pre'`, before `vite-plugin-svelte`'s preprocess and compile hooks whatever
 * the plugin order, so it sees the file as it is on disk; the inserted text never adds a line and the
 * returned map (word-boundary resolution) reaches the Svelte compiler through Vite. (vite-plugin-svelte
 * 7.3 chains earlier maps into the compile and Vite chains them again, sveltejs/vite-plugin-svelte#1401:
 * lines stay exact, template columns after a stamped tag drift; docs/node-shim.md "Svelte".) Because
 * the attribute is part of the compiled template, it is there for elements in `{#each}`, `{#if}`,
 * `{#await}`, snippets (an element written in a snippet or in a component's children carries the
 * location of the file it is written in) and in SSR output. Not stamped: `<title>` in `<svelte:head>`
 * (Svelte forbids attributes there), components, `<slot>`, `<svelte:fragment>`.
 *
 * Why not copy `element.__svelte_meta.loc` at run time: that needs a MutationObserver over the whole
 * page, its file is relative to the Vite process's cwd (absolute outside it), and its column is a
 * 0-based UTF-16 offset that differs from the engine's column after any astral character.
 *
 * The usage chain (src/overlay/picker/chain-svelte.ts) reads Svelte's own dev component stack
 * (`__svelte_meta.parent`, entries `{type: 'component', file, line, column, componentTag}`, added to Svelte 5 by sveltejs/svelte#16255; older versions give no chain).
 * Its line is exact, but its column is counted by Svelte on the stamped text (shifted by every attribute
 * inserted before it on the same line) in Svelte's units, and its file is Svelte's `filename`. So the
 * `post` half of this plugin appends to each compiled client module one registry statement mapping
 * Svelte's `line:column` of each component usage in the file to the engine's column and the source tag,
 * under the project-relative path. The registry is a global keyed by `Symbol.for("spotpatch.svelte")`;
 * it cannot collide with an element's own `data-spotpatch-loc` (it is not an attribute at all).
 *
 * Never in `vite build` (`apply: 'serve'`), never for `node_modules`, virtual modules or `?query` ids.
 */

import { createRequire } from "node:module";
import path from "node:path";

import MagicString from "magic-string";
import type { Plugin, ResolvedConfig } from "vite";

import { LOC_ATTRIBUTE, jsxAttributeValue, relativeToRoot, type LocateResult, type SpotpatchLocateOptions } from "./locate.js";
import { LinePositions, rootsOf } from "./locate-util.js";

/** The global the compiled modules register their component usages in (read by chain-svelte.ts). */
export const SVELTE_REGISTRY_KEY = "spotpatch.svelte";

const SVELTE_ID = /\.svelte(?:\?|$)/;
const NODE_MODULES = /[\\/]node_modules[\\/]/;
const HARMLESS_QUERY_KEYS = new Set(["t", "v", "import"]);
/** Modern-AST node types of component usages (Svelte's dev stack entries of type 'component'). */
const COMPONENT_TYPES = new Set(["Component", "SvelteComponent", "SvelteSelf"]);

/** `parse` of `svelte/compiler` (the subset we use). */
type SvelteParse = (
  source: string,
  options: { modern: true; filename?: string | undefined },
) => { fragment: SvelteNode };
type SvelteNode = { type: string; start: number; end: number; name?: string; [key: string]: unknown };

/** One component usage: Svelte's `line:column` key → `[engine column, tag as written]`. */
export type UsageTable = Record<string, [number, string]>;

export interface SvelteLocateResult extends LocateResult {
  /** Component usages in the file (see `UsageTable`); empty when it uses none. */
  usages: UsageTable;
}

/**
 * Stamp every native element of the Svelte component `code`. Returns null when nothing changed (no
 * elements and no component usages). Throws what `parse` throws (the caller lets the compiler report it).
 */
export function injectSvelteLocations(
  code: string,
  relFile: string,
  parse: SvelteParse,
  opts: { sourceName?: string } = {},
): SvelteLocateResult | null {
  // Svelte's parser and compiler drop a leading BOM before they count offsets and columns.
  const bom = code.charCodeAt(0) === 0xfeff ? 1 : 0;
  const root = parse(bom ? code.slice(1) : code, { modern: true, filename: opts.sourceName });
  const positions = new LinePositions(code);
  const s = new MagicString(code);
  const inserted: Array<{ at: number; length: number }> = [];
  const components: SvelteNode[] = [];

  for (const node of fragmentNodes(root.fragment)) {
    const start = node.start + bom; // offset in `code`
    if (COMPONENT_TYPES.has(node.type)) components.push({ ...node, start });
    if (node.type !== "RegularElement" && node.type !== "SvelteElement") continue;
    const name = String(node.name ?? "");
    const nameEnd = start + 1 + name.length;
    if (code[start] !== "<" || code.slice(start + 1, nameEnd) !== name) continue; // not as written
    if (hasAttribute(node, LOC_ATTRIBUTE)) continue;
    const { line, column } = positions.at(start);
    const text = ` ${LOC_ATTRIBUTE}=${jsxAttributeValue(`${relFile}:${line}:${column}`)}`;
    s.appendLeft(nameEnd, text);
    inserted.push({ at: nameEnd, length: text.length });
  }
  if (inserted.length === 0 && components.length === 0) return null;

  const out = s.toString();
  const usages: UsageTable = {};
  for (const node of components) {
    // Where Svelte's locator will put this tag in the stamped text: same line, 0-based UTF-16 column.
    let shifted = node.start;
    for (const { at, length } of inserted) if (at <= node.start) shifted += length;
    const { line, column } = positions.at(node.start);
    const svelteColumn = shifted - (out.lastIndexOf("\n", shifted - 1) + 1) - (line === 1 ? bom : 0);
    usages[`${line}:${svelteColumn}`] = [column, String(node.name ?? "")];
  }
  return {
    code: out,
    map: s.generateMap({ hires: "boundary", source: opts.sourceName ?? relFile, includeContent: true }),
    usages,
  };
}

/** Every template node under `fragment` in source order (blocks, snippets, element children). */
function* fragmentNodes(fragment: SvelteNode): Generator<SvelteNode> {
  const stack: SvelteNode[] = [fragment];
  while (stack.length > 0) {
    const node = stack.pop() as SvelteNode;
    if (node.type !== "Fragment") yield node;
    const children: SvelteNode[] = [];
    if (node.type === "Fragment") children.push(...((node.nodes as SvelteNode[] | undefined) ?? []));
    else {
      // Blocks keep their fragments under different keys (fragment, consequent, alternate, body,
      // fallback, pending, then, catch): take every Fragment-typed property, never expressions.
      for (const value of Object.values(node)) {
        if (value && typeof value === "object" && (value as SvelteNode).type === "Fragment") children.push(value as SvelteNode);
      }
    }
    for (let i = children.length - 1; i >= 0; i--) stack.push(children[i] as SvelteNode);
  }
}

function hasAttribute(node: SvelteNode, name: string): boolean {
  const attributes = (node.attributes as SvelteNode[] | undefined) ?? [];
  return attributes.some((a) => a.type === "Attribute" && a.name === name);
}

/** The file path of a transform id, or null when it is not a plain `.svelte` source file we may stamp. */
function svelteFile(id: string): string | null {
  if (id.startsWith("\0") || id.startsWith("virtual:")) return null;
  const q = id.indexOf("?");
  const file = q < 0 ? id : id.slice(0, q);
  if (q >= 0) {
    for (const key of new URLSearchParams(id.slice(q + 1)).keys()) {
      if (!HARMLESS_QUERY_KEYS.has(key)) return null; // ?svelte&type=style, ?raw, ?url: not the component
    }
  }
  if (!file.endsWith(".svelte") || NODE_MODULES.test(file)) return null;
  return file;
}

/** The registry statement appended to a compiled module (one line, after all of Svelte's output). */
export function registryStatement(relFile: string, usages: UsageTable): string {
  const key = JSON.stringify(SVELTE_REGISTRY_KEY);
  const entry = JSON.stringify({ file: relFile, usages }).replace(/\u2028/g, "\\u2028").replace(/\u2029/g, "\\u2029");
  return `\n;(globalThis[Symbol.for(${key})] ??= new Map()).set(${JSON.stringify(relFile)}, ${entry});\n`;
}

/**
 * The two Vite plugins (dev server only): `spotpatch:locate-svelte` stamps the source before the Svelte
 * compiler, `spotpatch:locate-svelte-registry` appends the usage registry to its client output.
 * `options` is the object `spotpatch()` shares with the JSX locator (its `root` is the project root).
 */
export function spotpatchLocateSvelte(options: SpotpatchLocateOptions = {}): Plugin[] {
  let roots: string[] = [];
  let projectRoot = process.cwd();
  let parse: SvelteParse | null | undefined; // undefined: not looked up yet; null: no Svelte here
  let warnOnce: (message: string) => void = () => {};
  const tables = new Map<string, { rel: string; usages: UsageTable }>();

  const loadParse = (): SvelteParse | null => {
    if (parse !== undefined) return parse;
    parse = null;
    // The project's own Svelte first (the one vite-plugin-svelte compiles with), then ours.
    for (const base of [path.join(projectRoot, "package.json"), import.meta.url]) {
      try {
        const compiler = createRequire(base)("svelte/compiler") as { parse?: SvelteParse; VERSION?: string };
        const major = Number((compiler.VERSION ?? "").split(".")[0]);
        if (typeof compiler.parse === "function" && major >= 5) {
          parse = compiler.parse;
          break;
        }
      } catch {
        /* not installed there */
      }
    }
    if (parse === null) warnOnce("no Svelte 5 `svelte/compiler` found from the project root; .svelte elements get no source location.");
    return parse;
  };

  const locate: Plugin = {
    name: "spotpatch:locate-svelte",
    enforce: "pre",
    apply: "serve",
    configResolved(config: ResolvedConfig) {
      projectRoot = config.root;
      roots = rootsOf(path.resolve(config.root, options.root ?? "."));
      warnOnce = (message) => config.logger.warnOnce(`[spotpatch:locate-svelte] ${message}`);
    },
    transform: {
      order: "pre",
      filter: { id: { include: SVELTE_ID, exclude: NODE_MODULES } },
      handler(code: string, id: string) {
        const file = svelteFile(id);
        if (file === null) return null;
        if (roots.length === 0) roots = rootsOf(path.resolve(projectRoot, options.root ?? "."));
        const rel = relativeToRoot(file, roots);
        if (rel === null) return null;
        const svelteParse = loadParse();
        if (svelteParse === null) return null;
        let result: SvelteLocateResult | null;
        try {
          result = injectSvelteLocations(code, rel, svelteParse, { sourceName: file });
        } catch {
          tables.delete(file);
          return null; // a syntax error: the Svelte compiler reports it with its own positions
        }
        if (result === null || Object.keys(result.usages).length === 0) tables.delete(file);
        else tables.set(file, { rel, usages: result.usages });
        return result && { code: result.code, map: result.map };
      },
    },
  };

  const registry: Plugin = {
    name: "spotpatch:locate-svelte-registry",
    apply: "serve",
    transform: {
      order: "post",
      filter: { id: { include: SVELTE_ID, exclude: NODE_MODULES } },
      handler(code: string, id: string) {
        const file = svelteFile(id);
        if (file === null) return null;
        const consumer = (this as { environment?: { config?: { consumer?: string } } }).environment?.config?.consumer;
        if (consumer === "server") return null; // SSR output: no page to read the chain in
        const table = tables.get(file);
        if (!table) return null;
        // Appended after all of Svelte's output, nothing moves: `map: null` keeps the existing map.
        return { code: code + registryStatement(table.rel, table.usages), map: null };
      },
    },
  };

  return [locate, registry];
}
