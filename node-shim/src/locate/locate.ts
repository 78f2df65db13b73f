/**
 * `spotpatch:locate` — a dev-only Vite transform that stamps every intrinsic JSX element with
 * `data-spotpatch-loc="<file>:<line>:<col>"` (docs/design.md §15), so the overlay can turn a clicked DOM
 * element into a source location for the engine.
 *
 * - `<file>`: the module path relative to the project root (Vite's `config.root`, or `options.root`),
 *   POSIX separators, never absolute. Files outside the root are left alone.
 * - `<line>`: 1-based; lines are split on "\n" only, exactly as the engine's `read_file` numbers them
 *   (a lone "\r", U+2028 or U+2029 does NOT start a new line here, although JavaScript/Babel count them).
 * - `<col>`: 1-based column of the `<` of the opening element, counted in Unicode code points of the
 *   original line (a character outside the BMP counts once; a UTF-8 BOM on line 1 is not counted), i.e.
 *   the same unit as Python's `len(line[:i])` on the engine's lines.
 *
 * Parsing this way (instead of reading positions out of compiled output or React fibers) is what keeps
 * the line right: the plugin runs `enforce: 'pre'`, so it sees the file as it is on disk, before
 * `@vitejs/plugin-react` / Vite's oxc JSX transform rewrite it. The inserted attribute never adds a
 * line, and the returned high-resolution source map keeps stack traces and later maps exact.
 *
 * `.jsx` and `.tsx` here; HTML pages (`transformIndexHtml`) and HTML written into `innerHTML` /
 * `outerHTML` / `insertAdjacentHTML` literals of plain `.js`/`.ts` modules in src/locate/locate-html.ts and
 * src/locate/locate-script.ts (same attribute, same unit).
 * Intrinsic elements (`<div>`, `<svg>`, `<my-widget>`) get `data-spotpatch-loc`: that is the element the
 * user clicks, at its definition site inside the component. Component usages (`<Card>`, `<ui.Card>`) get
 * `data-spotpatch-use` instead (the usage chain, issue 15), except under Solid, whose run time keeps no
 * component tree to read it from. Fragments (`<>`, `<Fragment>`, `<React.Fragment>`) get nothing.
 */

import path from "node:path";

import { parse } from "@babel/parser";
import MagicString from "magic-string";
import type { Plugin, ResolvedConfig } from "vite";

import { injectHtmlLocations } from "./locate-html.js";
import { injectScriptMarkupLocations } from "./locate-script.js";
import { type AstNode, LinePositions, rootsOf, walk } from "./locate-util.js";

export const LOC_ATTRIBUTE = "data-spotpatch-loc";
/** The prop a component usage (`<Card>`) gets: where that instance is used, `file:line:col` of its `<`.
 * A different name than LOC_ATTRIBUTE, so a component that spreads its props onto its root element can
 * never overwrite that element's own location. Read back from the framework's component tree at run time
 * (src/overlay/picker/chain.ts), never from the DOM. */
export const USE_ATTRIBUTE = "data-spotpatch-use";

export interface SpotpatchLocateOptions {
  /** Directory the `<file>` part is relative to. Default: Vite's resolved `config.root`. A relative
   * value is resolved against `config.root` (e.g. `'../..'` for the repository root of a monorepo app). */
  root?: string;
}

export interface LocateResult {
  code: string;
  map: ReturnType<MagicString["generateMap"]>;
}

/** Ids the transform looks at (the hook filter; the handler checks again for Vite versions without filters). */
const SCRIPT_ID = /\.(?:[jt]sx|[cm]?[jt]s)(?:\?|$)/;
const NODE_MODULES = /[\\/]node_modules[\\/]/;
/** Query keys that do not change what the module is: cache busters and Vite's import marker. */
const HARMLESS_QUERY_KEYS = new Set(["t", "v", "import"]);

/** Plugins that compile JSX in a `pre` transform: listed before us, they would leave us nothing to locate
 * (or regenerated code with wrong lines — the classic "wrong line when plugin order is wrong" bug). */
const JSX_COMPILER_NAMES = /^(vite:react-compiler|vite:react-swc|vite:react-babel|vite:preact-jsx|solid)$/;

/**
 * The Vite plugin. Dev server only (`apply: 'serve'`); a production build never contains the attributes.
 */
export function spotpatchLocate(options: SpotpatchLocateOptions = {}): Plugin {
  let roots: string[] = [];
  let warnOnce: (message: string) => void = () => {};
  let usage = true; // stamp component usages (USE_ATTRIBUTE); off under Solid (see the module comment)

  const setRoot = (base: string): void => {
    roots = rootsOf(path.resolve(base, options.root ?? "."));
  };

  return {
    name: "spotpatch:locate",
    enforce: "pre",
    apply: "serve",

    configResolved(config: ResolvedConfig) {
      setRoot(config.root);
      const logger = config.logger;
      warnOnce = (message) => logger.warnOnce(`[spotpatch:locate] ${message}`);
      const plugins = config.plugins ?? [];
      usage = !plugins.some((p) => p.name === "solid");
      const self = plugins.findIndex((p) => p.name === "spotpatch:locate");
      const before = plugins.slice(0, self < 0 ? 0 : self).filter((p) => JSX_COMPILER_NAMES.test(p.name) && p.transform);
      if (before.length > 0) {
        warnOnce(
          `${before.map((p) => p.name).join(", ")} transforms JSX before spotpatch:locate; source locations ` +
            `may be missing or wrong. List spotpatchLocate() (or spotpatch()) before the React plugin.`,
        );
      }
    },

    transform: {
      filter: { id: { include: SCRIPT_ID, exclude: NODE_MODULES } },
      handler(code: string, id: string) {
        if (roots.length === 0) setRoot(process.cwd()); // used without a resolved config (tests, other hosts)
        const file = mapId(id);
        if (file === null) return null;
        const rel = relativeToRoot(file, roots);
        if (rel === null) return null;
        if (!/\.[jt]sx$/.test(file)) {
          return injectScriptMarkupLocations(code, rel, { typescript: /\.[cm]?ts$/.test(file), jsx: false, sourceName: file });
        }
        const result = injectLocations(code, rel, {
          typescript: file.endsWith(".tsx"),
          usage,
          sourceName: file,
          onCompiled: () =>
            warnOnce(`${rel} reached spotpatch:locate already compiled from JSX; list spotpatchLocate() first.`),
        });
        return result;
      },
    },

    // HTML pages (index.html and any other page the dev server serves): before every other plugin's
    // change (`pre`), so positions are those of the file on disk; tags other plugins inject get none.
    transformIndexHtml: {
      order: "pre",
      handler(html: string, ctx: { filename: string }) {
        if (roots.length === 0) setRoot(process.cwd());
        const file = ctx.filename;
        if (!file || NODE_MODULES.test(file)) return html;
        const rel = relativeToRoot(path.resolve(file), roots);
        if (rel === null) return html;
        return injectHtmlLocations(html, rel) ?? html;
      },
    },
  };
}

/** The file path of a transform id, or null when the id is not a plain script source file we may stamp. */
function mapId(id: string): string | null {
  if (id.startsWith("\0") || id.startsWith("virtual:")) return null;
  const q = id.indexOf("?");
  const file = q < 0 ? id : id.slice(0, q);
  if (q >= 0) {
    for (const key of new URLSearchParams(id.slice(q + 1)).keys()) {
      if (!HARMLESS_QUERY_KEYS.has(key)) return null; // ?raw, ?url, ?worker_file, ?vue&type=… : not ours
    }
  }
  if (!/\.(?:[jt]sx|[cm]?[jt]s)$/.test(file) || /\.d\.[cm]?ts$/.test(file)) return null;
  if (NODE_MODULES.test(file) || file.split(/[\\/]/).includes("node_modules")) return null;
  return file;
}

/** `file` relative to the first root that contains it, POSIX separators; null when outside every root. */
export function relativeToRoot(file: string, roots: readonly string[]): string | null {
  if (!path.isAbsolute(file)) return null;
  for (const root of roots) {
    const rel = path.relative(root, file);
    if (rel === "" || path.isAbsolute(rel)) continue; // the root itself; another drive (Windows)
    const posix = rel.split(path.sep).join("/"); // on POSIX a backslash is a file-name character: keep it
    if (posix === ".." || posix.startsWith("../")) continue;
    if (posix.split("/").includes("node_modules")) return null;
    return posix;
  }
  return null;
}

export interface InjectOptions {
  /** Parse with the `typescript` plugin (for `.tsx`). */
  typescript: boolean;
  /** `sources[0]` of the generated map (the module's file path). Default: `relFile`. */
  sourceName?: string;
  /** Stamp component usages with `data-spotpatch-use` (default true). */
  usage?: boolean;
  /** Called when the file contains no JSX but looks compiled from JSX (an earlier plugin ran first). */
  onCompiled?: () => void;
}

/**
 * Stamp every intrinsic JSX element of `code` that has no `data-spotpatch-loc` yet with
 * `data-spotpatch-loc="<relFile>:<line>:<col>"`. Returns null when nothing changed or the code does not
 * parse (the real compiler reports the syntax error, with its own positions).
 */
export function injectLocations(code: string, relFile: string, opts: InjectOptions): LocateResult | null {
  const compiledCheck = (): null => {
    if (opts.onCompiled && /\bjsxDEV\(|\/jsx-(?:dev-)?runtime["']|React\.createElement\(/.test(code)) opts.onCompiled();
    return null;
  };
  if (!code.includes("<")) return compiledCheck();
  let ast: { program: unknown };
  try {
    ast = parse(code, {
      sourceType: "module",
      plugins: opts.typescript ? ["jsx", "typescript"] : ["jsx"],
      errorRecovery: false,
      attachComment: false,
    });
  } catch {
    return null;
  }

  const positions = new LinePositions(code);
  const s = new MagicString(code);
  let sawJsx = false;
  let changed = false;

  for (const node of walk(ast.program)) {
    if (node.type === "JSXFragment") sawJsx = true;
    if (node.type !== "JSXOpeningElement") continue;
    sawJsx = true;
    const name = node.name as AstNode | undefined;
    if (!name) continue;
    const intrinsic = name.type === "JSXIdentifier" && isIntrinsic(String(name.name));
    const component = !intrinsic && opts.usage !== false && name.type !== "JSXNamespacedName" && !isFragment(name);
    if (!intrinsic && !component) continue;
    const attribute = intrinsic ? LOC_ATTRIBUTE : USE_ATTRIBUTE;
    if (hasAttribute(node, attribute)) continue;
    const start = node.start as number;
    const { line, column } = positions.at(start);
    const value = `${relFile}:${line}:${column}`;
    // After the tag name and any type arguments (`<div<T>>` parses in .tsx); before every written attribute.
    const typeArgs = (node.typeArguments ?? node.typeParameters) as AstNode | undefined | null;
    const insertAt = (typeArgs?.end as number | undefined) ?? (name.end as number);
    s.appendLeft(insertAt, ` ${attribute}=${jsxAttributeValue(value)}`);
    changed = true;
  }

  if (!sawJsx) return compiledCheck();
  if (!changed) return null;
  return {
    code: s.toString(),
    map: s.generateMap({ hires: true, source: opts.sourceName ?? relFile, includeContent: true }),
  };
}

/** Intrinsic (DOM) tag per the JSX compilers' rule: starts lower-case, or is not an identifier (`my-el`). */
function isIntrinsic(tag: string): boolean {
  return /^[a-z]/.test(tag) || tag.includes("-");
}

function hasAttribute(opening: AstNode, attribute: string): boolean {
  const attributes = (opening.attributes ?? []) as AstNode[];
  return attributes.some((a) => {
    const n = a.name as AstNode | undefined;
    return a.type === "JSXAttribute" && n?.type === "JSXIdentifier" && n.name === attribute;
  });
}

/** `<Fragment>`, `<React.Fragment>`, `<x.Fragment>`: no props but `key` and `children` allowed. */
function isFragment(name: AstNode): boolean {
  if (name.type === "JSXIdentifier") return name.name === "Fragment";
  if (name.type === "JSXMemberExpression") return (name.property as AstNode).name === "Fragment";
  return false;
}

/**
 * A JSX attribute value that reads back as exactly `value`. JSX string attributes have no escapes and
 * decode HTML entities, so anything beyond plain printable text (quotes, `&`, braces, backslashes,
 * control or line-separator characters, surrogates) goes into a `{"…"}` JSON string expression.
 * Non-ASCII letters and spaces are fine in plain form.
 */
export function jsxAttributeValue(value: string): string {
  // eslint-disable-next-line no-control-regex -- control characters need the quoted form on purpose
  if (!/["&{}<>\\\u0000-\u001f\u007f-\u009f\u2028\u2029\ud800-\udfff]/.test(value)) return `"${value}"`;
  const json = JSON.stringify(value).replace(/\u2028/g, "\\u2028").replace(/\u2029/g, "\\u2029");
  return `{${json}}`;
}

