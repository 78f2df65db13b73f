/**
 * The vite.config editor behind `spotpatch-agent init` (issue 29; contract in the issue's plan):
 *
 *   node config-edit.mjs <vite.config.{ts,mts,js,mjs,cts,cjs}> [--json]
 *   node config-edit.mjs --create <vite.config.ts|.js|.mts|.mjs>
 *
 * Reads the file (and, for a .js/.ts config, the nearest package.json: whether Vite loads the config as an
 * ES module), never writes anything, and prints ONE JSON object on stdout:
 *   {"status": "unchanged"}                 import of vite-plugin-spotpatch (any local name, or a namespace
 *                                            import called as `sp.default()`) and a call of it that comes
 *                                            first in `plugins` (or whose place cannot be seen from this file)
 *   {"status": "edit", "code": "<new text>"} the import added after the file's imports, spotpatch() FIRST
 *                                            in `plugins` (or `plugins: [spotpatch()]` added); a call that is
 *                                            an entry of the plugins array but not the first is moved to the
 *                                            front (arguments, comments and layout kept)
 *   {"status": "refuse", "reason": "<one sentence, file named by its base name only>",
 *    "paste": "<the import line>\n<the plugins line>"}
 * Exit 0, 2 only on a usage error; a crash is still a "refuse". The call after another plugin somewhere it
 * cannot be moved from (a spread, a nested array, a condition) is refused: "spotpatch() must come first in
 * plugins". A file that is not UTF-8 is never answered "edit" (a BOM is kept as it is), nor is one over
 * 5 MB read; JSON output is ASCII (\u escapes), whatever encoding the caller reads the pipe in.
 * `--create` answers "edit" with a new minimal config (the caller creates the file; the name's folder is
 * only read for its package.json).
 *
 * How the edit keeps the user's formatting: the file is parsed with Babel (exact offsets), the config
 * object and its `plugins` array are located on that tree, and the text is spliced at those offsets
 * (magic-string) — nothing else of the file is reprinted. magicast's own edit path (`addVitePlugin`,
 * recast's printer) was tried and not used: it reprints a `plugins` array it inserts into (a multi-line
 * array becomes one line, its trailing comma goes, comments move onto other elements), adds `;` to the new
 * import in a file without semicolons, puts the import above a leading `// @ts-check`, parses a copy whose
 * indentation tabs became spaces, and for `defineConfig(() => ({...}))` adds the import but no plugin.
 * magicast's `detectCodeFormat` supplies the semicolon and indentation style where the file's own imports
 * do not show it (the quotes are counted here: it takes double quotes on a tie).
 *
 * Config shapes edited: `export default {...}`, `export default defineConfig({...})` (vite's or vitest's,
 * also `vite.defineConfig`), a function config (`defineConfig(() => ({...}))`, `defineConfig((env) => { ...;
 * return {...} })` with exactly one `return` of an object literal, `export default function`), a const
 * declared once and exported by name, TS `as`/`satisfies` wrappers; `plugins` missing, an array literal, or
 * a const array literal declared once (see `pluginsArray`). Everything else is refused with the lines to
 * paste: `plugins: [spotpatch(), <what is there now>]` is valid for any value there, since Vite flattens
 * nested plugin arrays (and awaits promises) in `plugins`.
 */

import { existsSync, readFileSync, realpathSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { parse, type ParserPlugin } from "@babel/parser";
import type {
  ArrayExpression,
  BlockStatement,
  File,
  Node,
  ObjectExpression,
  ObjectMethod,
  ObjectProperty,
  ReturnStatement,
  Statement,
} from "@babel/types";
import { detectCodeFormat } from "magicast";
import MagicString from "magic-string";

export const PLUGIN_PACKAGE = "vite-plugin-spotpatch";

export type Answer =
  | { status: "unchanged" }
  | { status: "edit"; code: string }
  | { status: "refuse"; reason: string; paste: string };

export interface EditOptions {
  /**
   * Whether Vite loads this config as an ES module (its extension, else the nearest package.json's
   * `"type": "module"`). When false the plugin (an ES module only) cannot be imported there: refused.
   * Undefined: decided by the extension alone (.cjs/.cts are CommonJS).
   */
  loadedAsEsm?: boolean;
}

/** The file's own writing style for the lines this editor writes. */
interface Style {
  quote: "'" | '"';
  semi: boolean;
  /** One level of indentation. */
  indent: string;
  eol: "\n" | "\r\n";
}

/** create-vite's style: what a new config and the lines for an unreadable file are written in. */
const DEFAULT_STYLE: Style = { quote: "'", semi: false, indent: "  ", eol: "\n" };

/** A located place to put spotpatch(): the first slot of an array literal, or a new `plugins` key. */
type Target =
  | { kind: "array"; array: ArrayExpression; scope: Statement[] }
  | { kind: "object"; object: ObjectExpression }
  | { kind: "refuse"; reason: string; plugins?: Node | undefined; scope?: Statement[] | undefined; commonjs?: boolean };

/** One parsed config: its text, tree and the facts the steps below share. */
interface Module {
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
function* walk(root: Node, enterFunctions = true): Generator<Node> {
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
function unwrap(node: Node): Node {
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

function text(mod: Module, node: Node): string {
  return mod.code.slice(node.start ?? 0, node.end ?? 0);
}

function parseModule(code: string, name: string): File {
  const plugins: ParserPlugin[] = /\.[cm]?ts$/.test(name) ? ["typescript"] : [];
  return parse(code, { sourceType: "module", plugins });
}

function load(code: string, name: string): Module {
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

function styleOf(code: string, body: Statement[]): Style {
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

/**
 * How this file names vite-plugin-spotpatch's plugin function: a local name bound to the function itself
 * (`import sp from`, `import { default as sp }`, `import { spotpatch as sp }`, a require), or, failing that,
 * a namespace import (`import * as sp from`), whose function is `sp.default` (or `sp.spotpatch`).
 */
interface SpotRef {
  local: string;
  namespace: boolean;
}

/** The call that puts the plugin in `plugins`: `spotpatch()`, or `sp.default()` through a namespace import. */
function callText(ref: SpotRef): string {
  return ref.namespace ? `${ref.local}.default()` : `${ref.local}()`;
}

/** The name vite-plugin-spotpatch's plugin function has in this file (import or require), if any. */
function spotpatchRef(mod: Module): SpotRef | undefined {
  let namespace: SpotRef | undefined;
  for (const node of mod.body) {
    if (node.type === "ImportDeclaration" && node.source.value === PLUGIN_PACKAGE && node.importKind !== "type") {
      for (const specifier of node.specifiers) {
        if (specifier.type === "ImportDefaultSpecifier") return { local: specifier.local.name, namespace: false };
        if (specifier.type === "ImportNamespaceSpecifier") namespace ??= { local: specifier.local.name, namespace: true };
        if (specifier.type === "ImportSpecifier" && specifier.importKind !== "type") {
          const imported = specifier.imported.type === "Identifier" ? specifier.imported.name : specifier.imported.value;
          if (imported === "default" || imported === "spotpatch") return { local: specifier.local.name, namespace: false };
        }
      }
    }
    if (node.type === "VariableDeclaration") {
      for (const declarator of node.declarations) {
        if (declarator.id.type !== "Identifier" || !declarator.init) continue;
        // `require('vite-plugin-spotpatch')`, `.default` of it, or `(await import('vite-plugin-spotpatch')).default`.
        let init = unwrap(declarator.init);
        let viaDefault = false;
        if (init.type === "MemberExpression" && init.property.type === "Identifier" && init.property.name === "default") {
          init = unwrap(init.object);
          viaDefault = true;
        }
        const dynamic = init.type === "AwaitExpression";
        if (init.type === "AwaitExpression") init = unwrap(init.argument);
        if (isRequireOrImportOf(init) && (dynamic ? viaDefault : !(init.type === "ImportExpression" || (init.type === "CallExpression" && init.callee.type === "Import")))) {
          return { local: declarator.id.name, namespace: false };
        }
      }
    }
  }
  return namespace;
}

function isRequireOrImportOf(node: Node): boolean {
  if (node.type === "ImportExpression") return node.source.type === "StringLiteral" && node.source.value === PLUGIN_PACKAGE;
  if (node.type !== "CallExpression") return false;
  const [first] = node.arguments;
  const calleeOk = (node.callee.type === "Identifier" && node.callee.name === "require") || node.callee.type === "Import";
  return calleeOk && first?.type === "StringLiteral" && first.value === PLUGIN_PACKAGE;
}

/** Whether `node` is a call of the plugin function: `spotpatch(...)`, or `sp.default(...)` through a namespace. */
function isSpotCall(node: Node, ref: SpotRef): boolean {
  const value = unwrap(node);
  if (value.type !== "CallExpression") return false;
  const callee = unwrap(value.callee);
  if (!ref.namespace) return callee.type === "Identifier" && callee.name === ref.local;
  if (callee.type !== "MemberExpression" || callee.object.type !== "Identifier" || callee.object.name !== ref.local) return false;
  const property = callee.property;
  const name = !callee.computed && property.type === "Identifier" ? property.name : property.type === "StringLiteral" ? property.value : undefined;
  return name === "default" || name === "spotpatch";
}

function hasCallOf(mod: Module, ref: SpotRef): boolean {
  for (const node of walk(mod.ast.program)) if (isSpotCall(node, ref)) return true;
  return false;
}

/** An entry of a plugins list that is spotpatch's plugin: the call, or a const declared once that holds it. */
function isSpotElement(mod: Module, node: Node, ref: SpotRef, scope: Statement[]): boolean {
  const value = unwrap(node);
  if (isSpotCall(value, ref)) return true;
  if (value.type !== "Identifier") return false;
  const init = constInit(mod, scope, value.name) ?? (scope === mod.body ? undefined : constInit(mod, mod.body, value.name));
  return init !== undefined && isSpotCall(init, ref);
}

/**
 * What comes first along one way the plugins list can turn out (Vite flattens nested arrays and drops falsy
 * entries): nothing yet (""), spotpatch ("S"), another plugin ("O"), something this editor cannot see into
 * ("U"); "OS"/"US": another plugin / something unknown, then spotpatch later.
 */
type Order = "" | "S" | "O" | "U" | "OS" | "US";

function then(first: Order, next: Order): Order {
  if (first === "S" || first === "OS" || first === "US") return first;
  if (first === "") return next;
  const spotLater = next === "S" || next === "OS" || next === "US";
  if (first === "O") return spotLater ? "OS" : "O";
  // first === "U"
  if (next === "OS" || next === "O") return next;
  return spotLater ? "US" : "U";
}

function thenAll(firsts: Set<Order>, nexts: Set<Order>): Set<Order> {
  const out = new Set<Order>();
  for (const first of firsts) for (const next of nexts) out.add(then(first, next));
  return out;
}

/** The orders one plugins list (an array, a spread's argument, the `plugins` value) can give. */
function listOrders(mod: Module, node: Node, ref: SpotRef, scope: Statement[], depth = 0): Set<Order> {
  if (depth > 32) return new Set(["U"]);
  const value = unwrap(node);
  if (value.type === "ArrayExpression") {
    let out = new Set<Order>([""]);
    for (const element of value.elements) {
      if (!element) continue;
      const orders = element.type === "SpreadElement" ? listOrders(mod, element.argument, ref, scope, depth + 1) : itemOrders(mod, element, ref, scope, depth + 1);
      out = thenAll(out, orders);
      if ([...out].every((order) => order === "S" || order === "OS" || order === "US")) break; // decided on every way
    }
    return out;
  }
  return itemOrders(mod, value, ref, scope, depth + 1, true);
}

/** The orders one entry of a plugins list can give (`list`: the value is a whole list, not an entry). */
function itemOrders(mod: Module, node: Node, ref: SpotRef, scope: Statement[], depth: number, list = false): Set<Order> {
  if (depth > 32) return new Set(["U"]);
  const value = unwrap(node);
  if (!list && isSpotElement(mod, value, ref, scope)) return new Set(["S"]);
  switch (value.type) {
    case "ArrayExpression":
      return listOrders(mod, value, ref, scope, depth + 1);
    case "NullLiteral":
      return new Set([""]);
    case "BooleanLiteral":
      return new Set([value.value && !list ? "O" : ""]);
    case "ConditionalExpression":
      return new Set([...itemOrders(mod, value.consequent, ref, scope, depth + 1, list), ...itemOrders(mod, value.alternate, ref, scope, depth + 1, list)]);
    case "LogicalExpression": {
      const right = itemOrders(mod, value.right, ref, scope, depth + 1, list);
      if (value.operator === "&&") return new Set<Order>(["", ...right]);
      return new Set([...itemOrders(mod, value.left, ref, scope, depth + 1, list), ...right]);
    }
    case "Identifier": {
      if (value.name === "undefined" && !mod.bindings.has("undefined")) return new Set([""]);
      const init = constInit(mod, scope, value.name) ?? (scope === mod.body ? undefined : constInit(mod, mod.body, value.name));
      return init ? itemOrders(mod, init, ref, scope, depth + 1, list) : new Set(["U"]);
    }
    default:
      // Another plugin's call, object or value; a whole list built at run time is not seen into.
      return new Set([list ? "U" : "O"]);
  }
}

/** The initialiser of `const <name> = ...` among `statements`, when <name> is declared exactly once in the file. */
function constInit(mod: Module, statements: Statement[], name: string): Node | undefined {
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

/** The name an import binds `local` to from `source` ("default", "defineConfig", ...), if it is imported. */
function importedName(mod: Module, local: string): { source: string; imported: string } | undefined {
  for (const node of mod.body) {
    if (node.type !== "ImportDeclaration") continue;
    for (const specifier of node.specifiers) {
      if (specifier.local.name !== local) continue;
      if (specifier.type === "ImportDefaultSpecifier") return { source: node.source.value, imported: "default" };
      if (specifier.type === "ImportNamespaceSpecifier") return { source: node.source.value, imported: "*" };
      const imported = specifier.imported.type === "Identifier" ? specifier.imported.name : specifier.imported.value;
      return { source: node.source.value, imported };
    }
  }
  return undefined;
}

function calleeName(mod: Module, callee: Node): string {
  if (callee.type === "Identifier") return importedName(mod, callee.name)?.imported === "defineConfig" ? "defineConfig" : callee.name;
  if (callee.type === "MemberExpression" && !callee.computed && callee.property.type === "Identifier") return callee.property.name;
  return text(mod, callee);
}

function refuse(reason: string, plugins?: Node, scope?: Statement[]): Target {
  return { kind: "refuse", reason, plugins, scope };
}

function describe(node: Node): string {
  switch (node.type) {
    case "CallExpression":
      return "a function call";
    case "ConditionalExpression":
    case "LogicalExpression":
      return "a condition";
    case "Identifier":
      return `the name ${node.name}`;
    case "ClassDeclaration":
    case "ClassExpression":
      return "a class";
    default:
      return `a ${node.type}`;
  }
}

/** Steps from the default export (or a part of it) to the config object literal and on to its plugins. */
function resolveConfig(mod: Module, node: Node, scope: Statement[], depth = 0): Target {
  if (depth > 8) return refuse("the config is built through too many steps to follow");
  const value = unwrap(node);
  switch (value.type) {
    case "ObjectExpression":
      return pluginsTarget(mod, value, scope);
    case "Identifier": {
      const init = constInit(mod, scope, value.name) ?? (scope === mod.body ? undefined : constInit(mod, mod.body, value.name));
      if (!init) return refuse(`the config is the variable ${value.name}, which is not a const declared once in the file`);
      return resolveConfig(mod, init, scope, depth + 1);
    }
    case "CallExpression": {
      const name = calleeName(mod, value.callee);
      const [argument] = value.arguments;
      if (name === "defineConfig" && value.arguments.length === 1 && argument && argument.type !== "SpreadElement" && argument.type !== "ArgumentPlaceholder") {
        return resolveConfig(mod, argument, scope, depth + 1);
      }
      if (name === "mergeConfig") return refuse("the config is built with mergeConfig(...), which this editor does not follow");
      return refuse(`the config is built by a call to ${name}(...)`);
    }
    case "ArrowFunctionExpression":
    case "FunctionExpression":
    case "FunctionDeclaration": {
      if (value.body.type !== "BlockStatement") return resolveConfig(mod, value.body, scope, depth + 1);
      const returns = returnsOf(value.body);
      if (returns.length !== 1) {
        return refuse(`the config function has ${returns.length === 0 ? "no return statement" : `${returns.length} return statements`}`);
      }
      const argument = (returns[0] as ReturnStatement).argument;
      if (!argument) return refuse("the config function returns nothing");
      const returned = unwrap(argument);
      if (returned.type !== "ObjectExpression" && returned.type !== "Identifier") {
        return refuse(`the config function returns ${describe(returned)}, not an object literal`);
      }
      return resolveConfig(mod, returned, value.body.body, depth + 1);
    }
    default:
      return refuse(`the config is ${describe(value)}, not an object this editor can follow`);
  }
}

function returnsOf(block: BlockStatement): ReturnStatement[] {
  const out: ReturnStatement[] = [];
  for (const node of walk(block, false)) if (node.type === "ReturnStatement") out.push(node);
  return out;
}

function keyName(property: ObjectProperty | ObjectMethod): string | undefined {
  const key = property.key;
  if (key.type === "Identifier" && !property.computed) return key.name;
  if (key.type === "StringLiteral") return key.value;
  return undefined;
}

function pluginsTarget(mod: Module, object: ObjectExpression, scope: Statement[]): Target {
  const named = object.properties.filter((property) => property.type !== "SpreadElement" && keyName(property) === "plugins");
  if (named.length > 1) return refuse("plugins is set more than once in the config object");
  const [property] = named;
  if (!property) {
    if (object.properties.some((item) => item.type === "SpreadElement")) {
      return refuse("the config object spreads another object, which may set plugins");
    }
    if (object.properties.some((item) => item.type !== "SpreadElement" && keyName(item) === undefined)) {
      return refuse("the config object has a computed key, which may be plugins");
    }
    return { kind: "object", object };
  }
  if (property.type !== "ObjectProperty") return refuse("plugins is a method or getter in the config object");
  return pluginsArray(mod, property.value, scope);
}

/**
 * The array literal to put spotpatch() into. A `plugins` held in a variable is edited only when it is a
 * `const` initialised with an array literal and its name is declared once in the whole file (module top
 * level or the config function's body): that literal is the very array Vite receives, so putting
 * spotpatch() first in it is the same edit as in an inline array, and later `push`es still come after it.
 * A `let`/`var` may be reassigned, a name declared twice may be a different binding, anything else is
 * built at run time: refused, with a line that works whatever the value is.
 */
function pluginsArray(mod: Module, node: Node, scope: Statement[]): Target {
  const value = unwrap(node);
  if (value.type === "ArrayExpression") {
    if (value.elements.length > 0 && value.elements.every((element) => element?.type === "SpreadElement")) {
      return refuse("plugins only spreads other arrays, so where spotpatch() goes first is not in this file", value, scope);
    }
    return { kind: "array", array: value, scope };
  }
  if (value.type === "Identifier") {
    const init = constInit(mod, scope, value.name) ?? (scope === mod.body ? undefined : constInit(mod, mod.body, value.name));
    const array = init ? unwrap(init) : undefined;
    if (array?.type !== "ArrayExpression") {
      return refuse(`plugins comes from the variable ${value.name}, which is not a const array literal declared once in the file`, value, scope);
    }
    return pluginsArray(mod, array, scope);
  }
  if (value.type === "CallExpression") return refuse(`plugins is built by a call to ${calleeName(mod, value.callee)}(...)`, value, scope);
  if (value.type === "ConditionalExpression" || value.type === "LogicalExpression") {
    return refuse("plugins is chosen by a condition, so where spotpatch() belongs is the author's call", value, scope);
  }
  return refuse(`plugins is ${describe(value)}, not an array literal`, value, scope);
}

/** Where the config is: the default export, or `module.exports` (CommonJS, refused later). */
function locate(mod: Module): Target {
  const exported = mod.body.find((node) => node.type === "ExportDefaultDeclaration");
  if (exported) {
    const declaration = exported.declaration;
    if (declaration.type === "ClassDeclaration" || declaration.type === "TSDeclareFunction") {
      return refuse(`the default export is ${describe(declaration)}, not a config`);
    }
    return resolveConfig(mod, declaration, mod.body);
  }
  const commonjs = commonjsExport(mod);
  if (commonjs) {
    const found = resolveConfig(mod, commonjs, mod.body);
    const plugins = found.kind === "array" ? found.array : found.kind === "refuse" ? found.plugins : undefined;
    const scope = found.kind === "array" || found.kind === "refuse" ? found.scope : undefined;
    return {
      kind: "refuse",
      reason: `${mod.name} is CommonJS (module.exports) and vite-plugin-spotpatch is an ES module: make the config an ES module (export default, in vite.config.mjs or with "type": "module") and add these lines`,
      plugins,
      scope,
      commonjs: true,
    };
  }
  return refuse(`${mod.name} has no export default`);
}

function commonjsExport(mod: Module): Node | undefined {
  for (const node of mod.body) {
    if (node.type !== "ExpressionStatement" || node.expression.type !== "AssignmentExpression") continue;
    const left = node.expression.left;
    if (
      left.type === "MemberExpression" &&
      left.object.type === "Identifier" &&
      left.object.name === "module" &&
      left.property.type === "Identifier" &&
      left.property.name === "exports"
    ) {
      return node.expression.right;
    }
  }
  return undefined;
}

const DEFAULT_REF: SpotRef = { local: "spotpatch", namespace: false };

function importLine(style: Style, ref: SpotRef): string {
  const binding = ref.namespace ? `* as ${ref.local}` : ref.local;
  return `import ${binding} from ${style.quote}${PLUGIN_PACKAGE}${style.quote}${style.semi ? ";" : ""}`;
}

/**
 * The text of `node` with each spotpatch entry of an array literal in it taken out (with a separator),
 * and the text of the first such entry: what a paste line puts after / before.
 */
function withoutSpot(mod: Module, node: Node, ref: SpotRef, scope: Statement[]): { rest: string; spot: string | undefined } {
  const start = node.start ?? 0;
  const ms = new MagicString(mod.code.slice(start, node.end ?? start));
  let spot: string | undefined;
  for (const inner of walk(node, false)) {
    if (inner.type !== "ArrayExpression") continue;
    const elements = inner.elements;
    elements.forEach((element, i) => {
      if (!element || element.type === "SpreadElement" || !isSpotElement(mod, element, ref, scope)) return;
      spot ??= text(mod, element);
      const next = elements[i + 1];
      const previous = elements[i - 1];
      if (next) ms.remove((element.start ?? 0) - start, (next.start ?? 0) - start);
      else if (previous) ms.remove((previous.end ?? 0) - start, (element.end ?? 0) - start);
      else ms.remove((element.start ?? 0) - start, (element.end ?? 0) - start);
    });
  }
  return { rest: ms.toString(), spot };
}

/**
 * The lines a refusal asks the user to paste: the import, and `plugins` with spotpatch() first — the
 * file's own spotpatch entry (its arguments kept) when it has one, taken out of where it was.
 */
function pasteLines(mod: Module | undefined, style: Style, ref: SpotRef, plugins: Node | undefined, scope?: Statement[]): string {
  let line = `plugins: [${callText(ref)}],`;
  if (mod && plugins) {
    const value = unwrap(plugins);
    const within = scope ?? mod.body;
    const parts = value.type === "ArrayExpression" ? value.elements : [value];
    let first: string | undefined;
    const rest: string[] = [];
    for (const part of parts) {
      if (!part) {
        rest.push("");
        continue;
      }
      if (part !== value && part.type !== "SpreadElement" && isSpotElement(mod, part, ref, within)) {
        first ??= text(mod, part);
        continue;
      }
      const stripped = withoutSpot(mod, part, ref, within);
      first ??= stripped.spot;
      rest.push(stripped.rest);
    }
    const items = rest.join(", ");
    line = `plugins: [${first ?? callText(ref)}${items ? `, ${items}` : ""}],`;
  }
  return `${importLine(style, ref)}\n${line}`;
}

/** A name for the import that nothing in the file uses yet. */
function freeName(mod: Module): string {
  const used = new Set<string>();
  for (const node of walk(mod.ast.program)) if (node.type === "Identifier") used.add(node.name);
  for (const candidate of ["spotpatch", "vitePluginSpotpatch", "spotpatchPlugin"]) if (!used.has(candidate)) return candidate;
  let n = 2;
  while (used.has(`spotpatch${n}`)) n++;
  return `spotpatch${n}`;
}

/** Insert `item` as the first entry after the opening bracket/brace at `open`, in the list's own layout. */
function insertFirst(ms: MagicString, code: string, open: number, close: number, item: string, empty: boolean, style: Style): void {
  let at = open + 1;
  while (at < close && /\s/.test(code[at] as string)) at++;
  const between = code.slice(open + 1, at);
  if (empty && at === close) {
    // `[]`, `[ ]`, `{}`, or the same over several lines: the list becomes `[item]` / `{ item }`.
    if (between.includes("\n")) {
      const lineStart = code.lastIndexOf("\n", open) + 1;
      const indent = /^[ \t]*/.exec(code.slice(lineStart))?.[0] ?? "";
      ms.overwrite(open + 1, close, `${style.eol}${indent}${style.indent}${item},${style.eol}${indent}`);
    } else if (close > open + 1) {
      ms.overwrite(open + 1, close, code[open] === "{" ? ` ${item} ` : item);
    } else {
      ms.appendLeft(close, code[open] === "{" ? ` ${item} ` : item);
    }
    return;
  }
  // On the first entry's line: `[item, first` / `{ item, first`; else on a line of its own before it
  // (before the comments above the first entry too), with the first entry's indentation.
  const newline = between.lastIndexOf("\n");
  const lineBreak = newline > 0 && between[newline - 1] === "\r" ? newline - 1 : newline;
  ms.appendLeft(at, newline === -1 ? `${item}, ` : `${item},${between.slice(lineBreak)}`);
}

/** After the last top-level import (at the end of its line), else at the top below pragma comments. */
function insertImport(ms: MagicString, mod: Module, line: string, eol: string): void {
  const imports = mod.body.filter((node) => node.type === "ImportDeclaration");
  const last = imports.at(-1);
  const code = mod.code;
  if (last) {
    const end = last.end ?? 0;
    const lineEnd = code.indexOf("\n", end);
    const rest = code.slice(end, lineEnd === -1 ? code.length : lineEnd);
    if (/^[ \t]*;?[ \t]*(\/\/.*)?\r?$/.test(rest)) {
      // At the end of the import's line (after a `// comment` there), before its line break.
      const at = lineEnd === -1 ? code.length : code[lineEnd - 1] === "\r" ? lineEnd - 1 : lineEnd;
      ms.appendLeft(at, `${eol}${line}`);
    } else {
      ms.appendLeft(end, `${eol}${line}`);
    }
    return;
  }
  // No imports: below a shebang and the pragma comments that must stay first (@ts-check, /// <reference>,
  // eslint directives), above everything else with a blank line after it.
  // A byte order mark stays the file's first character.
  const bom = code.startsWith("\uFEFF") ? 1 : 0;
  let at = code.startsWith("#!", bom) ? code.indexOf("\n") + 1 : bom;
  for (const comment of mod.ast.comments ?? []) {
    const start = comment.start ?? 0;
    if (start < at) continue;
    if (code.slice(at, start).trim() !== "") break;
    if (!/^(?:@ts-|\/\s*<reference|eslint|global |jshint|@jsx|prettier-ignore)/.test(comment.value.trim())) break;
    const lineEnd = code.indexOf("\n", comment.end ?? start);
    at = lineEnd === -1 ? code.length : lineEnd + 1;
  }
  if (at === code.length && at > 0 && !code.endsWith("\n")) ms.appendLeft(at, eol);
  // One blank line after it: the one already there (below a pragma), or a new one.
  ms.appendLeft(at, /^\r?\n/.test(code.slice(at, at + 2)) ? `${line}${eol}` : `${line}${eol}${eol}`);
}

function edited(mod: Module, style: Style, target: Target & { kind: "array" | "object" }, existing: SpotRef | undefined): string {
  const ms = new MagicString(mod.code);
  const ref = existing ?? { local: freeName(mod), namespace: false };
  if (!existing) insertImport(ms, mod, importLine(style, ref), style.eol);
  const node = target.kind === "array" ? target.array : target.object;
  const empty = target.kind === "array" ? target.array.elements.length === 0 : target.object.properties.length === 0;
  const item = target.kind === "array" ? callText(ref) : `plugins: [${callText(ref)}]`;
  insertFirst(ms, mod.code, node.start ?? 0, (node.end ?? 1) - 1, item, empty, style);
  return ms.toString();
}

/** The separator comma between two entries: after `from`, past blanks, comments and closing parens. */
function commaAfter(code: string, from: number, to: number): number | undefined {
  let at = from;
  while (at < to) {
    const char = code[at] as string;
    if (char === ",") return at;
    if (char === ")" || /\s/.test(char)) at++;
    else if (code.startsWith("//", at)) at = code.includes("\n", at) ? code.indexOf("\n", at) : to;
    else if (code.startsWith("/*", at)) at = code.includes("*/", at) ? code.indexOf("*/", at) + 2 : to;
    else return undefined;
  }
  return undefined;
}

/** A comment-only rest of a line (after a separator or an entry): blanks, at most one comment, the line end. */
const LINE_TAIL = /^[ \t]*(?:\/\/.*|\/\*(?:(?!\*\/).)*\*\/[ \t]*)?\r?$/;

/**
 * Move entry `index` (> 0) of the plugins array to the front, its text (arguments, comments above it)
 * unchanged: an entry on lines of its own (with the comment lines above it and the comment after it on its
 * line) goes above the first entry's line; an entry inline with others goes in front, as insertFirst puts
 * a new one. Undefined when it cannot be moved without risk (holes, parentheses, a line comment that would
 * have to move inline).
 */
function moved(mod: Module, style: Style, array: ArrayExpression, index: number): string | undefined {
  const code = mod.code;
  const elements = array.elements;
  const element = elements[index];
  const previous = elements[index - 1];
  if (!element || !previous || elements.includes(null) || (element.extra as { parenthesized?: boolean } | undefined)?.parenthesized) return undefined;
  const start = element.start ?? 0;
  const end = element.end ?? 0;
  const comma = commaAfter(code, previous.end ?? 0, start);
  if (comma === undefined) return undefined;
  const open = array.start ?? 0;
  const close = (array.end ?? 1) - 1;
  let firstToken = open + 1;
  while (firstToken < close && /\s/.test(code[firstToken] as string)) firstToken++;
  const ms = new MagicString(code);
  const newline = code.indexOf("\n", comma);
  const lineEnd = code.indexOf("\n", end);
  const tail = lineEnd === -1 ? "]" : code.slice(end, lineEnd);
  const ownLines =
    newline !== -1 &&
    newline < start &&
    LINE_TAIL.test(code.slice(comma + 1, newline)) &&
    LINE_TAIL.test(tail.replace(/^[ \t]*,/, "")) &&
    code.slice(open + 1, firstToken).includes("\n");
  if (ownLines) {
    // From the line after the separator (a comment after the previous entry stays with it) to the end of
    // the entry's line; the block goes above the first entry's line (above the comments over it).
    const hasComma = /^[ \t]*,/.test(tail);
    const block = code.slice(newline + 1, end) + (hasComma ? "" : ",") + code.slice(end, lineEnd + 1);
    ms.remove(newline + 1, lineEnd + 1);
    // The list had no trailing comma: nor has it after the move.
    if (!hasComma) ms.remove(comma, comma + 1);
    ms.appendLeft(code.lastIndexOf("\n", firstToken) + 1, block);
    return ms.toString();
  }
  if (code.slice(comma + 1, start).includes("//")) return undefined;
  // Inline: the entry (with a block comment just before it) and one separator go; a line left blank goes too.
  let from = comma + 1;
  while (/\s/.test(code[from] as string)) from++;
  const next = elements[index + 1];
  if (next && /^[ \t]*,[ \t]*$/.test(code.slice(end, next.start ?? end))) {
    ms.remove(from, next.start ?? end);
  } else {
    const lineStart = code.lastIndexOf("\n", comma) + 1;
    const after = lineEnd === -1 ? -1 : lineEnd + 1;
    const wholeLine = after !== -1 && code.slice(lineStart, comma).trim() === "" && code.slice(end, lineEnd).trim() === "";
    ms.remove(wholeLine ? lineStart : comma, wholeLine ? after : end);
  }
  insertFirst(ms, code, open, close, code.slice(from, end), false, style);
  return ms.toString();
}

function firstLine(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).split("\n")[0] ?? "";
}

/** The largest config this editor reads: a bigger one is refused, not parsed. */
export const MAX_BYTES = 5 * 1024 * 1024;

/** The reason when spotpatch() is in plugins but not first, and cannot be moved there in this file. */
const NOT_FIRST = "spotpatch() must come first in plugins";

function tooLarge(base: string, size: number): string {
  return `${base} is too large to edit safely (${(size / 1024 / 1024).toFixed(1)} MB; the editor reads at most ${MAX_BYTES / 1024 / 1024} MB)`;
}

/** A parser or walk that ran out of stack: the file nests deeper than can be followed. */
function isStackOverflow(error: unknown): boolean {
  return error instanceof RangeError && /call stack/i.test(error.message);
}

/** The answer, and the lines to paste should the caller refuse an "edit" after all (a file not in UTF-8). */
function answerFor(code: string, base: string, options: EditOptions): { answer: Answer; paste: string } {
  let style = DEFAULT_STYLE;
  const refusal = (reason: string, paste: string): { answer: Answer; paste: string } => ({ answer: { status: "refuse", reason, paste }, paste });
  try {
    if (code.length > MAX_BYTES) return refusal(tooLarge(base, code.length), pasteLines(undefined, style, DEFAULT_REF, undefined));
    style = styleOf(code, []);
    let mod: Module;
    try {
      mod = load(code, base);
    } catch (error) {
      const reason = isStackOverflow(error) ? `${base} nests its code too deeply for this editor to parse (a very long chain of operators or deeply nested brackets)` : `${base} does not parse (${firstLine(error)})`;
      return refusal(reason, pasteLines(undefined, style, DEFAULT_REF, undefined));
    }
    style = styleOf(code, mod.body);
    const existing = spotpatchRef(mod);
    const ref = existing ?? DEFAULT_REF;
    const target = locate(mod);
    const plugins = target.kind === "array" ? target.array : target.kind === "refuse" ? target.plugins : undefined;
    const scope = (target.kind === "array" || target.kind === "refuse" ? target.scope : undefined) ?? mod.body;
    const paste = pasteLines(mod, style, ref, plugins, scope);
    // Already there: unchanged when spotpatch() comes first (or where it comes cannot be seen from here);
    // an entry of the plugins array literal itself is moved to the front; elsewhere it is refused.
    let move: number | undefined;
    let notFirst = false;
    if (existing && hasCallOf(mod, existing)) {
      const direct: number[] = [];
      if (target.kind === "array") {
        target.array.elements.forEach((element, i) => {
          if (element && element.type !== "SpreadElement" && isSpotElement(mod, element, existing, scope)) direct.push(i);
        });
      }
      if (direct.length === 1 && (direct[0] as number) > 0) move = direct[0];
      else if (plugins && listOrders(mod, plugins, existing, scope).has("OS")) notFirst = true;
      else return { answer: { status: "unchanged" }, paste };
    }
    if (target.kind === "refuse" && target.commonjs) return refusal(target.reason, paste);
    if (!(options.loadedAsEsm ?? !/\.c[jt]s$/.test(base))) {
      // Vite bundles such a config to CommonJS and require()s its imports: the ESM-only plugin fails to load.
      const ext = path.extname(base);
      const why = ext.startsWith(".c") ? "its extension" : 'the nearest package.json has no "type": "module"';
      return refusal(`Vite loads ${base} as CommonJS (${why}) and vite-plugin-spotpatch is an ES module: rename it to ${base.slice(0, -ext.length)}.m${ext.slice(-2)} and add these lines`, paste);
    }
    if (notFirst) return refusal(NOT_FIRST, paste);
    if (target.kind === "refuse") return refusal(target.reason, paste);
    let result: string;
    if (move !== undefined && target.kind === "array") {
      const text = moved(mod, style, target.array, move);
      if (text === undefined) return refusal(NOT_FIRST, paste);
      result = text;
    } else {
      result = edited(mod, style, target, existing);
    }
    const problem = verify(result, base);
    if (problem) return refusal(`the edit could not be verified (${problem})`, paste);
    return { answer: { status: "edit", code: result }, paste };
  } catch (error) {
    const reason = isStackOverflow(error) ? `${base} nests its code too deeply for this editor to parse (a very long chain of operators or deeply nested brackets)` : `the editor failed on ${base} (${firstLine(error)})`;
    return refusal(reason, pasteLines(undefined, style, DEFAULT_REF, undefined));
  }
}

/** The answer for the text of one config file (`name`: its base name, which decides TS or JS). */
export function editConfig(code: string, name: string, options: EditOptions = {}): Answer {
  return answerFor(code, path.basename(name), options).answer;
}

/**
 * The answer for the bytes of one config file. They must be UTF-8 (a BOM is kept as it is): decoding
 * anything else would turn the bytes that are not into U+FFFD in the edited file, so an "edit" of such a
 * file is refused instead (nothing is written when it is "unchanged" or refused anyway).
 */
export function editConfigBytes(bytes: Uint8Array, name: string, options: EditOptions = {}): Answer {
  const base = path.basename(name);
  if (bytes.length > MAX_BYTES) return { status: "refuse", reason: tooLarge(base, bytes.length), paste: pasteLines(undefined, DEFAULT_STYLE, DEFAULT_REF, undefined) };
  const raw = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length);
  const code = raw.toString("utf8");
  const { answer, paste } = answerFor(code, base, options);
  if (answer.status !== "edit") return answer;
  // Valid UTF-8 decodes and encodes back to the same bytes; the first difference is the first bad byte.
  const again = Buffer.from(code, "utf8");
  if (again.equals(raw)) return answer;
  let at = 0;
  while (at < raw.length && raw[at] === again[at]) at++;
  const line = raw.subarray(0, at).filter((byte) => byte === 0x0a).length + 1;
  return {
    status: "refuse",
    reason: `${base} is not UTF-8 (line ${line} has a byte that is not valid UTF-8), so an edit would change bytes you did not ask to change: save it as UTF-8, or add these lines`,
    paste,
  };
}

/** Why the edited text is not what it should be: it must parse, and spotpatch() be first in plugins. */
function verify(code: string, base: string): string | undefined {
  let mod: Module;
  try {
    mod = load(code, base);
  } catch (error) {
    return `the result does not parse: ${firstLine(error)}`;
  }
  const ref = spotpatchRef(mod);
  if (!ref) return "the import is missing from the result";
  const target = locate(mod);
  if (target.kind !== "array") return "the result's plugins could not be found again";
  const spots = target.array.elements.filter((element) => element && element.type !== "SpreadElement" && isSpotElement(mod, element, ref, target.scope));
  const first = target.array.elements[0];
  if (!first || first.type === "SpreadElement" || !isSpotElement(mod, first, ref, target.scope)) return "spotpatch() is not first in the result's plugins";
  if (spots.length !== 1) return "the result's plugins hold spotpatch() more than once";
  return undefined;
}

/** A new minimal config for a project that has none (create-vite's own style). */
export function createConfig(name: string, options: EditOptions = {}): Answer {
  const base = path.basename(name);
  const style: Style = DEFAULT_STYLE;
  if (options.loadedAsEsm === false || /\.c[jt]s$/.test(base)) {
    const ext = path.extname(base);
    return {
      status: "refuse",
      reason: `Vite would load ${base} as CommonJS (${/\.c[jt]s$/.test(base) ? "its extension" : 'the nearest package.json has no "type": "module"'}) and vite-plugin-spotpatch is an ES module: create vite.config.m${ext.endsWith("ts") ? "ts" : "js"} instead`,
      paste: pasteLines(undefined, style, DEFAULT_REF, undefined),
    };
  }
  const code = [
    "import { defineConfig } from 'vite'",
    importLine(style, DEFAULT_REF),
    "",
    "// https://vite.dev/config/",
    "export default defineConfig({",
    "  plugins: [spotpatch()],",
    "})",
    "",
  ].join("\n");
  return { status: "edit", code };
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

const CONFIG_NAME = /\.(?:ts|mts|js|mjs|cts|cjs)$/;
const USAGE = "usage: config-edit.mjs <vite.config.{ts,mts,js,mjs,cts,cjs}> [--json] | --create <vite.config.{ts,mts,js,mjs}>";

/** The command line (see the module comment). Returns the exit code. */
export function main(argv: string[], out: (line: string) => void = (line) => process.stdout.write(line)): number {
  const args = argv.filter((arg) => arg !== "--json");
  const create = args[0] === "--create";
  const files = create ? args.slice(1) : args;
  const [file] = files;
  if (files.length !== 1 || !file || file.startsWith("--") || !CONFIG_NAME.test(file)) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  let answer: Answer;
  const base = path.basename(file);
  try {
    if (create) {
      answer = createConfig(base, { loadedAsEsm: loadedAsEsm(file) });
    } else {
      const paste = pasteLines(undefined, DEFAULT_STYLE, DEFAULT_REF, undefined);
      let bytes: Buffer | undefined;
      answer = { status: "refuse", reason: `${base} cannot be read`, paste };
      try {
        // The size first: a file too large to edit is not read at all.
        const size = statSync(file).size;
        if (size > MAX_BYTES) answer = { status: "refuse", reason: tooLarge(base, size), paste };
        else bytes = readFileSync(file);
      } catch (error) {
        const reason = (error as NodeJS.ErrnoException).code === "ENOENT" ? "does not exist" : "cannot be read";
        answer = { status: "refuse", reason: `${base} ${reason}`, paste };
      }
      if (bytes) answer = editConfigBytes(bytes, base, { loadedAsEsm: loadedAsEsm(file) });
    }
  } catch (error) {
    answer = { status: "refuse", reason: `the editor failed on ${base} (${firstLine(error)})`, paste: pasteLines(undefined, DEFAULT_STYLE, DEFAULT_REF, undefined) };
  }
  if (answer.status === "refuse") answer = { ...answer, reason: withoutPaths(answer.reason, file) };
  out(`${asciiJson(answer)}\n`);
  return 0;
}

/**
 * JSON with every character past ASCII written as a \u escape: the caller gets the very same text back
 * (a byte order mark, any letter) whatever encoding it reads the output pipe in.
 */
function asciiJson(value: unknown): string {
  return JSON.stringify(value).replace(/[\u007f-\uffff]/g, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

/** A reason names files by their base name only: any absolute path that slipped in is cut to it. */
function withoutPaths(reason: string, file: string): string {
  const absolute = path.resolve(file);
  let out = reason.split(absolute).join(path.basename(file)).split(path.dirname(absolute)).join(".");
  out = out.replace(/(?:[A-Za-z]:)?[\\/](?:[^\s\\/'"()]+[\\/])+([^\s\\/'"()]+)/g, "$1");
  return out;
}

function isEntry(): boolean {
  const script = process.argv[1];
  if (!script) return false;
  try {
    return realpathSync(script) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (isEntry()) process.exitCode = main(process.argv.slice(2));
