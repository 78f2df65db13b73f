/**
 * Reading one vite.config for the editor (config-edit.ts): what is learned from the file and its folder before
 * anything is decided. Owns the size limit (MAX_BYTES), the UTF-8 check of the raw bytes (a BOM is just the
 * first character of the text), parsing with Babel into a `Module` (the tree, how often each name is declared,
 * the tree walk and the look-through of TS wrappers, a `const` declared once), the file's writing style for the
 * lines the editor adds (quotes, semicolons, indentation, line ends), and whether Vite loads the config as an ES
 * module (the extension, else the nearest package.json's "type").
 */

import { existsSync, readFileSync } from "node:fs";
import path from "node:path";

import { parse, type ParserPlugin } from "@babel/parser";
import type { File, Node, Statement } from "@babel/types";
import { detectCodeFormat } from "magicast";

/** The largest config this editor reads: a bigger one is refused, not parsed. */
export const MAX_BYTES = 5 * 1024 * 1024;

export function tooLarge(base: string, size: number): string {
  return `${base} is too large to edit safely (${(size / 1024 / 1024).toFixed(1)} MB; the editor reads at most ${MAX_BYTES / 1024 / 1024} MB)`;
}

/** A parser or walk that ran out of stack: the file nests deeper than can be followed. */
export function isStackOverflow(error: unknown): boolean {
  return error instanceof RangeError && /call stack/i.test(error.message);
}

export function firstLine(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).split("\n")[0] ?? "";
}

/**
 * The line of the first byte of `raw` that is not valid UTF-8, or undefined when it is all UTF-8: valid UTF-8
 * decodes (`code`, the text `raw` was decoded to) and encodes back to the same bytes; the first difference is
 * the first bad byte.
 */
export function notUtf8Line(raw: Buffer, code: string): number | undefined {
  const again = Buffer.from(code, "utf8");
  if (again.equals(raw)) return undefined;
  let at = 0;
  while (at < raw.length && raw[at] === again[at]) at++;
  return raw.subarray(0, at).filter((byte) => byte === 0x0a).length + 1;
}

/** The file's own writing style for the lines this editor writes. */
export interface Style {
  quote: "'" | '"';
  semi: boolean;
  /** One level of indentation. */
  indent: string;
  eol: "\n" | "\r\n";
}

/** create-vite's style: what a new config and the lines for an unreadable file are written in. */
export const DEFAULT_STYLE: Style = { quote: "'", semi: false, indent: "  ", eol: "\n" };

/** One parsed config: its text, tree and the facts the steps below share. */
export interface Module {
  code: string;
  name: string;
  ast: File;
  body: Statement[];
  /** How many times each name is declared anywhere in the file (imports, variables, params, functions). */
  bindings: Map<string, number>;
}

/** Keys of a Babel node that hold no child nodes worth walking. */
const SKIP_KEYS = new Set(["loc", "start", "end", "extra", "range", "leadingComments", "trailingComments", "innerComments", "comments", "tokens"]);

function isNode(value: unknown): value is Node {
  return typeof value === "object" && value !== null && typeof (value as { type?: unknown }).type === "string";
}

function children(node: Node): Node[] {
  const out: Node[] = [];
  for (const [key, value] of Object.entries(node)) {
    if (SKIP_KEYS.has(key)) continue;
    if (Array.isArray(value)) {
      for (const item of value) if (isNode(item)) out.push(item);
    } else if (isNode(value)) {
      out.push(value);
    }
  }
  return out;
}

/** Every node under `root` (root included); `enterFunctions: false` stops at nested functions. */
export function* walk(root: Node, enterFunctions = true): Generator<Node> {
  const stack: Node[] = [root];
  while (stack.length > 0) {
    const node = stack.pop() as Node;
    yield node;
    if (!enterFunctions && node !== root && isFunction(node)) continue;
    // One push per child, last first: a spread of a huge list (a 500,000-number array literal) overflows the stack.
    const kids = children(node);
    for (let i = kids.length - 1; i >= 0; i--) stack.push(kids[i] as Node);
  }
}

function isFunction(node: Node): boolean {
  return (
    node.type === "FunctionDeclaration" ||
    node.type === "FunctionExpression" ||
    node.type === "ArrowFunctionExpression" ||
    node.type === "ObjectMethod" ||
    node.type === "ClassMethod" ||
    node.type === "ClassPrivateMethod"
  );
}

/** The expression under TS wrappers and parentheses: `x as T`, `x satisfies T`, `x!`, `<T>x`. */
export function unwrap(node: Node): Node {
  let current = node;
  while (
    current.type === "TSAsExpression" ||
    current.type === "TSSatisfiesExpression" ||
    current.type === "TSNonNullExpression" ||
    current.type === "TSTypeAssertion" ||
    current.type === "ParenthesizedExpression"
  ) {
    current = current.expression;
  }
  return current;
}

export function text(mod: Module, node: Node): string {
  return mod.code.slice(node.start ?? 0, node.end ?? 0);
}

function parseModule(code: string, name: string): File {
  const plugins: ParserPlugin[] = /\.[cm]?ts$/.test(name) ? ["typescript"] : [];
  return parse(code, { sourceType: "module", plugins });
}

export function load(code: string, name: string): Module {
  const ast = parseModule(code, name);
  const bindings = new Map<string, number>();
  const declare = (pattern: Node | null | undefined): void => {
    if (!pattern) return;
    switch (pattern.type) {
      case "Identifier":
        bindings.set(pattern.name, (bindings.get(pattern.name) ?? 0) + 1);
        break;
      case "ObjectPattern":
        for (const property of pattern.properties) declare(property.type === "RestElement" ? property.argument : property.value);
        break;
      case "ArrayPattern":
        for (const element of pattern.elements) declare(element);
        break;
      case "AssignmentPattern":
        declare(pattern.left);
        break;
      case "RestElement":
        declare(pattern.argument);
        break;
      case "TSParameterProperty":
        declare(pattern.parameter);
        break;
      default:
        break;
    }
  };
  for (const node of walk(ast.program)) {
    if (node.type === "VariableDeclarator") declare(node.id);
    else if (node.type === "ImportDefaultSpecifier" || node.type === "ImportSpecifier" || node.type === "ImportNamespaceSpecifier") declare(node.local);
    else if (node.type === "CatchClause") declare(node.param);
    else if (node.type === "ClassDeclaration") declare(node.id);
    if (isFunction(node) && "params" in node) {
      if ((node.type === "FunctionDeclaration" || node.type === "FunctionExpression") && node.id) declare(node.id);
      for (const param of node.params) declare(param);
    }
  }
  return { code, name, ast, body: ast.program.body, bindings };
}

/** The initialiser of `const <name> = ...` among `statements`, when <name> is declared exactly once in the file. */
export function constInit(mod: Module, statements: Statement[], name: string): Node | undefined {
  if (mod.bindings.get(name) !== 1) return undefined;
  for (const statement of statements) {
    const declaration =
      statement.type === "VariableDeclaration"
        ? statement
        : statement.type === "ExportNamedDeclaration" && statement.declaration?.type === "VariableDeclaration"
          ? statement.declaration
          : undefined;
    if (declaration?.kind !== "const") continue;
    for (const declarator of declaration.declarations) {
      if (declarator.id.type === "Identifier" && declarator.id.name === name && declarator.init) return declarator.init;
    }
  }
  return undefined;
}

export function styleOf(code: string, body: Statement[]): Style {
  const detected = detectCodeFormat(code);
  const imports = body.filter((node) => node.type === "ImportDeclaration");
  const last = imports.at(-1);
  const raw = last ? code.slice(last.source.start ?? 0, (last.source.start ?? 0) + 1) : "";
  // No import to copy from: the more frequent quoted strings, single quotes (create-vite's) on a tie
  // (magicast's detectCodeFormat takes double quotes on a tie, also when the file has no string at all).
  const singles = code.match(/'[^'\n]+'/g)?.length ?? 0;
  const doubles = code.match(/"[^"\n]+"/g)?.length ?? 0;
  const quote = raw === '"' || raw === "'" ? raw : doubles > singles ? '"' : "'";
  const semi = last ? code.slice(0, last.end ?? 0).trimEnd().endsWith(";") : detected.useSemi === true;
  const indent = detected.useTabs ? "\t" : " ".repeat(detected.tabWidth && detected.tabWidth > 0 ? detected.tabWidth : 2);
  return { quote, semi, indent, eol: code.includes("\r\n") ? "\r\n" : "\n" };
}

/** Vite's own rule (isFilePathESM): the extension, else the nearest package.json's "type". */
export function loadedAsEsm(file: string): boolean {
  if (/\.m[jt]s$/.test(file)) return true;
  if (/\.c[jt]s$/.test(file)) return false;
  let dir = path.dirname(path.resolve(file));
  for (;;) {
    const manifest = path.join(dir, "package.json");
    if (existsSync(manifest)) {
      try {
        // A byte order mark is allowed there (npm and Vite strip it).
        return (JSON.parse(readFileSync(manifest, "utf8").replace(/^\uFEFF/, "")) as { type?: unknown }).type === "module";
      } catch {
        return false;
      }
    }
    const up = path.dirname(dir);
    if (up === dir) return false;
    dir = up;
  }
}
