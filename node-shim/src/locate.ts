/**
 * `spotpatch:locate` — a dev-only Vite transform that stamps every intrinsic JSX element with
 * `data-spotpatch-loc="<file>:<line>:<col>"` (DESIGN.md §15), so the overlay can turn a clicked DOM
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
 * Only `.jsx` and `.tsx` for now; Vue (`.vue` templates) and Svelte get their own locators later.
 * Only intrinsic elements (`<div>`, `<svg>`, `<my-widget>`) are stamped: that is the element the user
 * clicks, at its definition site inside the component. Components (`<Card>`, `<ui.Card>`) and fragments
 * (`<>`, `<React.Fragment>`) render no DOM node of their own and get nothing.
 */

import { realpathSync } from "node:fs";
import path from "node:path";

import { parse } from "@babel/parser";
import MagicString from "magic-string";
import type { Plugin, ResolvedConfig } from "vite";

export const LOC_ATTRIBUTE = "data-spotpatch-loc";

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
const JSX_ID = /\.[jt]sx(?:\?|$)/;
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

  const setRoot = (base: string): void => {
    const root = path.resolve(base, options.root ?? ".");
    roots = [root];
    try {
      // Vite hands us real paths (symlinks resolved); a symlinked root (macOS /tmp, pnpm/monorepo links)
      // would otherwise make every file look "outside the root" or produce a doubled path.
      const real = realpathSync.native(root);
      if (real !== root) roots.push(real);
    } catch {
      /* root does not exist (yet): keep the lexical one */
    }
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
      filter: { id: { include: JSX_ID, exclude: NODE_MODULES } },
      handler(code: string, id: string) {
        if (roots.length === 0) setRoot(process.cwd()); // used without a resolved config (tests, other hosts)
        const file = mapId(id);
        if (file === null) return null;
        const rel = relativeToRoot(file, roots);
        if (rel === null) return null;
        const result = injectLocations(code, rel, {
          typescript: file.endsWith(".tsx"),
          sourceName: file,
          onCompiled: () =>
            warnOnce(`${rel} reached spotpatch:locate already compiled from JSX; list spotpatchLocate() first.`),
        });
        return result;
      },
    },
  };
}

/** The file path of a transform id, or null when the id is not a plain `.jsx`/`.tsx` source file we may stamp. */
function mapId(id: string): string | null {
  if (id.startsWith("\0") || id.startsWith("virtual:")) return null;
  const q = id.indexOf("?");
  const file = q < 0 ? id : id.slice(0, q);
  if (q >= 0) {
    for (const key of new URLSearchParams(id.slice(q + 1)).keys()) {
      if (!HARMLESS_QUERY_KEYS.has(key)) return null; // ?raw, ?url, ?worker_file, ?vue&type=… : not ours
    }
  }
  if (!/\.[jt]sx$/.test(file)) return null;
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
    }) as { program: unknown };
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
    if (!name || name.type !== "JSXIdentifier" || !isIntrinsic(String(name.name))) continue;
    if (hasLocAttribute(node)) continue;
    const start = node.start as number;
    const { line, column } = positions.at(start);
    const value = `${relFile}:${line}:${column}`;
    // After the tag name and any type arguments (`<div<T>>` parses in .tsx); before every written attribute.
    const typeArgs = (node.typeArguments ?? node.typeParameters) as AstNode | undefined | null;
    const insertAt = (typeArgs?.end as number | undefined) ?? (name.end as number);
    s.appendLeft(insertAt, ` ${LOC_ATTRIBUTE}=${jsxAttributeValue(value)}`);
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

function hasLocAttribute(opening: AstNode): boolean {
  const attributes = (opening.attributes ?? []) as AstNode[];
  return attributes.some((a) => {
    const n = a.name as AstNode | undefined;
    return a.type === "JSXAttribute" && n?.type === "JSXIdentifier" && n.name === LOC_ATTRIBUTE;
  });
}

/**
 * A JSX attribute value that reads back as exactly `value`. JSX string attributes have no escapes and
 * decode HTML entities, so anything beyond plain printable text (quotes, `&`, braces, backslashes,
 * control or line-separator characters, surrogates) goes into a `{"…"}` JSON string expression.
 * Non-ASCII letters and spaces are fine in plain form.
 */
export function jsxAttributeValue(value: string): string {
  if (!/["&{}<>\\\u0000-\u001f\u007f-\u009f\u2028\u2029\ud800-\udfff]/.test(value)) return `"${value}"`;
  const json = JSON.stringify(value).replace(/\u2028/g, "\\u2028").replace(/\u2029/g, "\\u2029");
  return `{${json}}`;
}

/** Offsets (UTF-16, as Babel gives them) → engine line/column (see the module comment for the unit). */
class LinePositions {
  private readonly starts: number[] = [0];
  private readonly bom: boolean;

  constructor(private readonly code: string) {
    for (let i = code.indexOf("\n"); i >= 0; i = code.indexOf("\n", i + 1)) this.starts.push(i + 1);
    this.bom = code.charCodeAt(0) === 0xfeff;
  }

  at(offset: number): { line: number; column: number } {
    let lo = 0;
    let hi = this.starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if ((this.starts[mid] as number) <= offset) lo = mid;
      else hi = mid - 1;
    }
    let from = this.starts[lo] as number;
    if (lo === 0 && this.bom) from = Math.min(1, offset);
    let column = 1;
    for (let i = from; i < offset; i++) {
      const c = this.code.charCodeAt(i);
      // the low half of a surrogate pair is the same code point as its high half
      if (c >= 0xdc00 && c <= 0xdfff && i > from && isHigh(this.code.charCodeAt(i - 1))) continue;
      column++;
    }
    return { line: lo + 1, column };
  }
}

function isHigh(c: number): boolean {
  return c >= 0xd800 && c <= 0xdbff;
}

type AstNode = { type: string; start?: number | null; end?: number | null; [key: string]: unknown };

const SKIP_KEYS = new Set(["loc", "range", "extra", "leadingComments", "trailingComments", "innerComments", "comments", "tokens"]);

/** Every AST node under `root`, in source order, without recursion (deep JSX cannot overflow the stack). */
function* walk(root: unknown): Generator<AstNode> {
  const stack: unknown[] = [root];
  while (stack.length > 0) {
    const value = stack.pop();
    if (value === null || typeof value !== "object") continue;
    if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i--) stack.push(value[i]);
      continue;
    }
    const node = value as AstNode;
    if (typeof node.type !== "string") continue;
    yield node;
    const children: unknown[] = [];
    for (const key of Object.keys(node)) {
      if (SKIP_KEYS.has(key)) continue;
      const child = node[key];
      if (child !== null && typeof child === "object") children.push(child);
    }
    for (let i = children.length - 1; i >= 0; i--) stack.push(children[i]);
  }
}
