/**
 * vite-plugin-spotpatch in one parsed config (config-read.ts's `Module`): the name its plugin function has
 * there (an import of any local name, a namespace import called as `sp.default()`, a require or an awaited
 * dynamic import), whether and where a call of it is, and what comes first along each way the `plugins` list
 * can turn out (`listOrders`: spotpatch, another plugin, or something this editor cannot see into), which
 * decides between "unchanged", a move to the front and "spotpatch() must come first in plugins".
 */

import type { Node, Statement } from "@babel/types";

import { constInit, type Module, unwrap, walk } from "./config-read.js";

export const PLUGIN_PACKAGE = "vite-plugin-spotpatch";

/**
 * How this file names vite-plugin-spotpatch's plugin function: a local name bound to the function itself
 * (`import sp from`, `import { default as sp }`, `import { spotpatch as sp }`, a require), or, failing that,
 * a namespace import (`import * as sp from`), whose function is `sp.default` (or `sp.spotpatch`).
 */
export interface SpotRef {
  local: string;
  namespace: boolean;
}

/** The call that puts the plugin in `plugins`: `spotpatch()`, or `sp.default()` through a namespace import. */
export function callText(ref: SpotRef): string {
  return ref.namespace ? `${ref.local}.default()` : `${ref.local}()`;
}

/** The name the editor gives the plugin function in a file that does not import it yet (or cannot be read). */
export const DEFAULT_REF: SpotRef = { local: "spotpatch", namespace: false };

/** The name vite-plugin-spotpatch's plugin function has in this file (import or require), if any. */
export function spotpatchRef(mod: Module): SpotRef | undefined {
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

export function hasCallOf(mod: Module, ref: SpotRef): boolean {
  for (const node of walk(mod.ast.program)) if (isSpotCall(node, ref)) return true;
  return false;
}

/** An entry of a plugins list that is spotpatch's plugin: the call, or a const declared once that holds it. */
export function isSpotElement(mod: Module, node: Node, ref: SpotRef, scope: Statement[]): boolean {
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
export function listOrders(mod: Module, node: Node, ref: SpotRef, scope: Statement[], depth = 0): Set<Order> {
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
