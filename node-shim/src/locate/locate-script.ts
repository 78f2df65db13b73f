/**
 * Locations for HTML written inside plain scripts (issue 15): the markup a module assigns to
 * `el.innerHTML` / `el.outerHTML` or passes to `el.insertAdjacentHTML(position, markup)`, written as a
 * string or template literal — how the official `vanilla` Vite templates build their page. Each element
 * start tag in that literal gets ` data-spotpatch-loc="file:line:col"` written into the literal itself, so
 * the element the script creates carries the location of its markup in the module.
 *
 * Only literals in those three places are touched (never any other string), template-literal expressions
 * are never written into, and a tag whose name comes from an expression (`<${tag}>`) is left alone.
 */

import { parse } from "@babel/parser";
import MagicString from "magic-string";

import { type ScriptMarkup, scriptMarkupInsertions } from "./locate-html.js";
import { type AstNode, LinePositions, walk } from "./locate-util.js";

/** Cheap pre-check: a module without these words has no markup sink to stamp. */
export const MARKUP_SINK = /\b(?:innerHTML|outerHTML|insertAdjacentHTML)\b/;

const PROPERTY_SINKS = new Set(["innerHTML", "outerHTML"]);

export interface ScriptLocateResult {
  code: string;
  map: ReturnType<MagicString["generateMap"]>;
}

/**
 * Stamp the markup literals of `code` (see the module comment). Null when there is none, nothing to
 * stamp, or the code does not parse (the real compiler reports that).
 */
export function injectScriptMarkupLocations(
  code: string,
  relFile: string,
  opts: { typescript: boolean; jsx: boolean; sourceName?: string },
): ScriptLocateResult | null {
  if (!MARKUP_SINK.test(code)) return null;
  let ast: { program: unknown };
  try {
    const plugins: Array<"jsx" | "typescript"> = [];
    if (opts.jsx) plugins.push("jsx");
    if (opts.typescript) plugins.push("typescript");
    ast = parse(code, { sourceType: "module", plugins, errorRecovery: false, attachComment: false });
  } catch {
    return null;
  }
  const positions = new LinePositions(code);
  const insertions: Array<[number, string]> = [];
  for (const node of walk(ast.program)) {
    const literal = sinkLiteral(node);
    if (!literal) continue;
    const markup = markupOf(code, literal);
    if (!markup) continue;
    for (const [at, text] of scriptMarkupInsertions(markup, relFile, positions)) {
      const inHole = markup.holes.some(([from, to]) => at - markup.offset > from && at - markup.offset <= to);
      if (!inHole) insertions.push([at, text]);
    }
  }
  if (insertions.length === 0) return null;
  const s = new MagicString(code);
  for (const [at, text] of insertions) s.appendLeft(at, text);
  return {
    code: s.toString(),
    map: s.generateMap({ hires: true, source: opts.sourceName ?? relFile, includeContent: true }),
  };
}

/** The string/template literal written to a markup sink by `node`, if `node` is such a write. */
function sinkLiteral(node: AstNode): AstNode | null {
  if (node.type === "AssignmentExpression" && node.operator === "=" || node.type === "AssignmentExpression" && node.operator === "+=") {
    const left = node.left as AstNode;
    if ((left.type === "MemberExpression" || left.type === "OptionalMemberExpression") && PROPERTY_SINKS.has(propertyName(left) ?? "")) {
      return literalOrNull(node.right as AstNode);
    }
  }
  if (node.type === "CallExpression" || node.type === "OptionalCallExpression") {
    const callee = node.callee as AstNode;
    const args = node.arguments as AstNode[];
    if ((callee.type === "MemberExpression" || callee.type === "OptionalMemberExpression") && propertyName(callee) === "insertAdjacentHTML") {
      return args[1] ? literalOrNull(args[1]) : null;
    }
  }
  return null;
}

function propertyName(member: AstNode): string | null {
  const property = member.property as AstNode;
  if (!member.computed && property.type === "Identifier") return String(property.name);
  if (member.computed && property.type === "StringLiteral") return String(property.value);
  return null;
}

function literalOrNull(node: AstNode): AstNode | null {
  return node.type === "TemplateLiteral" || node.type === "StringLiteral" ? node : null;
}

function markupOf(code: string, literal: AstNode): ScriptMarkup | null {
  const start = literal.start as number;
  const end = literal.end as number;
  const quote = code[start];
  if (quote !== "`" && quote !== "'" && quote !== '"') return null;
  const offset = start + 1;
  const raw = code.slice(offset, end - 1);
  if (!raw.includes("<")) return null;
  const holes: Array<[number, number]> = [];
  if (literal.type === "TemplateLiteral") {
    const quasis = literal.quasis as AstNode[];
    for (let i = 0; i + 1 < quasis.length; i++) {
      holes.push([(quasis[i]!.end as number) - offset, (quasis[i + 1]!.start as number) - offset]);
    }
  }
  return { raw, offset, holes, quote };
}
