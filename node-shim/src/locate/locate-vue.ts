/**
 * `spotpatch:locate-vue` — the dev-only locator for Vue single-file components (issue 15).
 *
 * Native elements: every native element of a `.vue` file's HTML `<template>` gets
 * `data-spotpatch-loc="<file>:<line>:<col>"`, the position of its start tag `<` in the `.vue` file, in
 * the same unit as the JSX locator (src/locate/locate.ts: lines split on "\n" only, 1-based columns in code
 * points, a UTF-8 BOM not counted; `<file>` relative to the same root, POSIX separators).
 *
 * Component usage sites: a component tag (`<Card …>`) gets NO `data-spotpatch-loc`. An attribute there
 * would be a fallthrough attribute: it would land on the component's root element and could overwrite
 * that element's own location (and warn "Extraneous non-props attributes" for fragment roots and
 * `inheritAttrs: false`). It gets a vnode lifecycle hook instead, `@vue:before-mount="() =>
 * 'spotpatch-use:<percent-encoded file:line:col>'"`: `onVnode*` props are reserved in Vue, so they never
 * reach `$attrs`, the root element or a warning; the compiler caches the handler (no extra re-render);
 * calling it does nothing. The overlay reads the site back from `instance.vnode.props` without calling it
 * (src/overlay/picker/chain-vue.ts). A tag that already has a `vue:before-mount` hook keeps only the
 * user's (its usage site is then missing from the chain). Built-ins (`<Transition>`, `<KeepAlive>`,
 * `<Teleport>`, `<Suspense>`) are not marked.
 *
 * Parsing uses Vue's own SFC compiler — the one `@vitejs/plugin-vue` uses (its `api.options.compiler`),
 * else `vue/compiler-sfc` resolved from the project — with plugin-vue's template compiler options, so an
 * element and a component are told apart exactly as the real compile will (`isCustomElement` included).
 * The plugin runs `enforce: 'pre'`, before plugin-vue compiles the file; the insertions never add a line
 * and the returned high-resolution source map keeps later maps exact. Templates in another language
 * (`lang="pug"`) or in another file (`src="…"`) are left alone with one warning. Dev server only;
 * never files under node_modules, virtual modules or sub-requests (`?vue&type=…`, `?raw`).
 */

import { createRequire } from "node:module";
import path from "node:path";

import MagicString from "magic-string";
import type { Plugin, ResolvedConfig } from "vite";

import { LOC_ATTRIBUTE, type LocateResult, type SpotpatchLocateOptions, relativeToRoot } from "./locate.js";
import { LinePositions, rootsOf } from "./locate-util.js";

/** The prefix of the usage-site payload inside the component tag's vnode hook (read by chain-vue.ts). */
export const USE_MARK = "spotpatch-use:";

const VUE_ID = /\.vue(?:\?|$)/;
const NODE_MODULES = /[\\/]node_modules[\\/]/;
const HARMLESS_QUERY_KEYS = new Set(["t", "v", "import"]);
/** Vue's built-in components (PascalCase or kebab-case): framework plumbing, not a usage the user means. */
const BUILT_IN = /^(?:Teleport|Suspense|KeepAlive|Transition|TransitionGroup|BaseTransition|teleport|suspense|keep-alive|transition|transition-group|base-transition)$/;

/** What `@vue/compiler-sfc` gives us (only the parts we use). */
interface SfcCompiler {
  parse(
    source: string,
    options: { filename: string; sourceMap: boolean; templateParseOptions?: object; ignoreEmpty?: boolean },
  ): {
    descriptor: { template: SfcTemplate | null };
    errors: unknown[];
  };
}
interface SfcTemplate {
  lang?: string;
  src?: string;
  ast?: TemplateNode;
}
interface TemplateNode {
  type: number;
  tag?: string;
  tagType?: number;
  loc: { start: { offset: number } };
  props?: Array<{ type: number; name: string; arg?: { content?: string } | null }>;
  children?: TemplateNode[];
  branches?: TemplateNode[];
}

// @vue/compiler-core NodeTypes / ElementTypes / prop types.
const ELEMENT = 1;
const TAG_ELEMENT = 0;
const TAG_COMPONENT = 1;
const ATTRIBUTE = 6;
const DIRECTIVE = 7;

/** plugin-vue's public plugin API (`api.options`). */
interface VuePluginApi {
  options?: { compiler?: SfcCompiler | null; template?: { compilerOptions?: unknown } };
}

/**
 * The Vite plugin. Dev server only (`apply: 'serve'`): a production build never contains the marks.
 * `options` is the same object `spotpatchLocate` gets (its `root` is set by `spotpatch:server`).
 */
export function spotpatchLocateVue(options: SpotpatchLocateOptions = {}): Plugin {
  let roots: string[] = [];
  let projectRoot = process.cwd();
  let warnOnce: (message: string) => void = () => {};
  let vueApi: VuePluginApi | undefined;
  let fallback: SfcCompiler | null | undefined;
  const warnedLangs = new Set<string>();

  const setRoot = (base: string): void => {
    roots = rootsOf(path.resolve(base, options.root ?? "."));
  };

  const compiler = (): SfcCompiler | null => {
    const fromPlugin = vueApi?.options?.compiler;
    if (fromPlugin) return fromPlugin;
    if (fallback === undefined) {
      try {
        fallback = createRequire(path.join(projectRoot, "package.json"))("vue/compiler-sfc") as SfcCompiler;
      } catch {
        fallback = null;
        warnOnce("vue/compiler-sfc was not found from the project root; .vue files get no source locations.");
      }
    }
    return fallback;
  };

  return {
    name: "spotpatch:locate-vue",
    enforce: "pre",
    apply: "serve",

    configResolved(config: ResolvedConfig) {
      projectRoot = config.root;
      setRoot(config.root);
      const logger = config.logger;
      warnOnce = (message) => logger.warnOnce(`[spotpatch:locate] ${message}`);
      vueApi = (config.plugins ?? []).find((p) => p.name === "vite:vue")?.api as VuePluginApi | undefined;
    },

    transform: {
      filter: { id: { include: VUE_ID, exclude: NODE_MODULES } },
      handler(code: string, id: string) {
        if (roots.length === 0) setRoot(process.cwd());
        const file = vueFile(id);
        if (file === null) return null;
        const rel = relativeToRoot(file, roots);
        if (rel === null) return null;
        const sfc = compiler();
        if (!sfc) return null;
        return injectVueLocations(code, rel, {
          compiler: sfc,
          sourceName: file,
          templateParseOptions: vueApi?.options?.template?.compilerOptions,
          onUnsupported: (what) => {
            if (warnedLangs.has(what)) return;
            warnedLangs.add(what);
            warnOnce(`${rel}: <template ${what}> gets no source locations (only inline HTML templates are located).`);
          },
        });
      },
    },
  };
}

/** The file path of a transform id, or null when it is not a plain `.vue` file we may stamp. */
function vueFile(id: string): string | null {
  if (id.startsWith("\0") || id.startsWith("virtual:")) return null;
  const q = id.indexOf("?");
  const file = q < 0 ? id : id.slice(0, q);
  if (q >= 0) {
    for (const key of new URLSearchParams(id.slice(q + 1)).keys()) {
      if (!HARMLESS_QUERY_KEYS.has(key)) return null; // ?vue&type=…, ?raw, ?url: not the SFC itself
    }
  }
  if (!file.endsWith(".vue") || file.split(/[\\/]/).includes("node_modules")) return null;
  return file;
}

export interface InjectVueOptions {
  compiler: SfcCompiler;
  /** `sources[0]` of the generated map. Default: `relFile`. */
  sourceName?: string;
  /** plugin-vue's `template.compilerOptions` (e.g. `isCustomElement`), so tags classify as it will. */
  templateParseOptions?: unknown;
  /** Called with `lang="…"` / `src="…"` when the template is not inline HTML. */
  onUnsupported?: (what: string) => void;
}

/**
 * Stamp the native elements of the SFC's template and mark its component tags (see the module comment).
 * Returns null when nothing changed, the file has no template, or it does not parse (plugin-vue reports
 * the error with its own positions).
 */
export function injectVueLocations(code: string, relFile: string, opts: InjectVueOptions): LocateResult | null {
  if (!code.includes("<template")) return null;
  let parsed: ReturnType<SfcCompiler["parse"]>;
  try {
    parsed = opts.compiler.parse(code, {
      filename: opts.sourceName ?? relFile,
      sourceMap: false,
      ignoreEmpty: true,
      // Tags and attributes are all we read: `prefixIdentifiers: false` spares a Babel parse of every
      // expression (the parse is then about 4x faster); it changes no element/component decision.
      templateParseOptions: { ...(opts.templateParseOptions as object | undefined), prefixIdentifiers: false },
    });
  } catch {
    return null;
  }
  if (parsed.errors.length > 0) return null;
  const template = parsed.descriptor.template;
  if (!template) return null;
  if (template.src) {
    opts.onUnsupported?.(`src="…"`);
    return null;
  }
  if (template.lang && template.lang !== "html") {
    opts.onUnsupported?.(`lang="${template.lang}"`);
    return null;
  }
  if (!template.ast) return null;

  const positions = new LinePositions(code);
  const s = new MagicString(code);
  let changed = false;
  for (const node of elements(template.ast)) {
    const tag = node.tag ?? "";
    const insertAt = node.loc.start.offset + 1 + tag.length; // after `<tag`, before every written attribute
    if (code.slice(node.loc.start.offset, insertAt) !== `<${tag}`) continue; // not a start tag as written
    if (node.tagType === TAG_ELEMENT) {
      if (tag === "script" || tag === "style" || hasAttribute(node, LOC_ATTRIBUTE)) continue;
      const { line, column } = positions.at(node.loc.start.offset);
      s.appendLeft(insertAt, ` ${LOC_ATTRIBUTE}="${htmlAttributeValue(`${relFile}:${line}:${column}`)}"`);
      changed = true;
    } else if (node.tagType === TAG_COMPONENT && !BUILT_IN.test(tag) && !hasBeforeMountHook(node)) {
      const { line, column } = positions.at(node.loc.start.offset);
      const payload = encodeUsePayload(`${relFile}:${line}:${column}`);
      s.appendLeft(insertAt, ` @vue:before-mount="() => '${USE_MARK}${payload}'"`);
      changed = true;
    }
  }
  if (!changed) return null;
  return {
    code: s.toString(),
    map: s.generateMap({ hires: true, source: opts.sourceName ?? relFile, includeContent: true }),
  };
}

/**
 * `file:line:col` percent-encoded down to `[A-Za-z0-9%._~-]`: safe inside a single-quoted JS string in a
 * double-quoted HTML attribute, and left alone by every later printer (no quote or escape to rewrite).
 */
export function encodeUsePayload(value: string): string {
  return encodeURIComponent(value).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

/** Text for a double-quoted HTML attribute that Vue's template parser decodes back to exactly `value`. */
export function htmlAttributeValue(value: string): string {
  // eslint-disable-next-line no-control-regex -- control characters are escaped on purpose
  return value.replace(/[&"<>\u0000-\u001f\u007f]/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** Every element node of the template, in source order (iterative: deep templates cannot overflow). */
function* elements(root: TemplateNode): Generator<TemplateNode> {
  const stack: TemplateNode[] = [root];
  while (stack.length > 0) {
    const node = stack.pop() as TemplateNode;
    if (node !== root && node.type === ELEMENT) yield node;
    const kids = [...(node.children ?? []), ...(node.branches ?? [])];
    for (let i = kids.length - 1; i >= 0; i--) stack.push(kids[i] as TemplateNode);
  }
}

function hasAttribute(node: TemplateNode, name: string): boolean {
  return (node.props ?? []).some(
    (p) => (p.type === ATTRIBUTE && p.name === name) || (p.type === DIRECTIVE && p.name === "bind" && p.arg?.content === name),
  );
}

/** The tag already carries a before-mount vnode hook (`@vue:before-mount`, `@vnode-before-mount`, `:onVnodeBeforeMount`). */
function hasBeforeMountHook(node: TemplateNode): boolean {
  return (node.props ?? []).some((p) => {
    if (p.type !== DIRECTIVE) return false;
    const arg = (p.arg?.content ?? "").replace(/-([a-z])/g, (_, c: string) => c.toUpperCase()).toLowerCase();
    if (p.name === "on") return arg === "vue:beforemount" || arg === "vnodebeforemount";
    return p.name === "bind" && arg === "onvnodebeforemount";
  });
}
