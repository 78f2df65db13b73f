/**
 * Finding the config object and its `plugins` array in one parsed config (config-read.ts's `Module`): where
 * spotpatch() goes (`Target`: the first slot of an array literal, or a new `plugins` key in the config object),
 * or why it cannot be put there from this file (a refusal, with the `plugins` value found, if any, for the
 * lines to paste).
 *
 * Config shapes followed: `export default {...}`, `export default defineConfig({...})` (vite's or vitest's,
 * also `vite.defineConfig`), a function config (`defineConfig(() => ({...}))`, `defineConfig((env) => { ...;
 * return {...} })` with exactly one `return` of an object literal, `export default function`), a const
 * declared once and exported by name, TS `as`/`satisfies` wrappers; `plugins` missing, an array literal, or
 * a const array literal declared once (see `pluginsArray`). Everything else is refused with the lines to
 * paste: `plugins: [spotpatch(), <what is there now>]` is valid for any value there, since Vite flattens
 * nested plugin arrays (and awaits promises) in `plugins`. A CommonJS config (`module.exports`) is located
 * too (for its paste lines) but always refused.
 */

import type { ArrayExpression, BlockStatement, Node, ObjectExpression, ObjectMethod, ObjectProperty, ReturnStatement, Statement } from "@babel/types";

import { constInit, type Module, text, unwrap, walk } from "./config-read.js";

/** A located place to put spotpatch(): the first slot of an array literal, or a new `plugins` key. */
export type Target =
  | { kind: "array"; array: ArrayExpression; scope: Statement[] }
  | { kind: "object"; object: ObjectExpression }
  | { kind: "refuse"; reason: string; plugins?: Node | undefined; scope?: Statement[] | undefined; commonjs?: boolean };

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
export function locate(mod: Module): Target {
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
