// Helpers for locate.test.mjs: drive the spotpatch:locate plugin without Vite, read its attributes back,
// check them against the ORIGINAL source independently of the implementation, and look up source maps.
import { parse } from "@babel/parser";
import { decode } from "@jridgewell/sourcemap-codec";

import { spotpatchLocate } from "../../dist/locate/locate.js";

/** A plugin after `configResolved({ root })`, plus the warnings it logged. */
export function makePlugin(root, options, extra = {}) {
  const plugin = spotpatchLocate(options);
  const warnings = [];
  const logger = {
    warnOnce: (m) => warnings.push(m),
    warn: (m) => warnings.push(m),
    info() {},
    error() {},
  };
  plugin.configResolved({ root, logger, plugins: extra.plugins ?? [plugin] });
  return { plugin, warnings };
}

/** Call the transform hook the way Vite does (function or `{ filter, handler }` object hook). */
export function transform(plugin, code, id) {
  const hook = plugin.transform;
  const handler = typeof hook === "function" ? hook : hook.handler;
  return handler.call({ warn() {}, error(e) { throw e; } }, code, id);
}

/** Every `data-spotpatch-loc` value written in `code`, in order, read with a real JSX parser. */
export function locValues(code, { typescript = true } = {}) {
  const ast = parse(code, { sourceType: "module", plugins: typescript ? ["jsx", "typescript"] : ["jsx"] });
  const out = [];
  const stack = [ast.program];
  while (stack.length) {
    const n = stack.pop();
    if (!n || typeof n !== "object") continue;
    if (Array.isArray(n)) { for (let i = n.length - 1; i >= 0; i--) stack.push(n[i]); continue; }
    if (typeof n.type !== "string") continue;
    if (n.type === "JSXOpeningElement") {
      const tag = tagName(n.name);
      for (const a of n.attributes) {
        if (a.type === "JSXAttribute" && a.name.name === "data-spotpatch-loc") {
          const v = a.value.type === "StringLiteral" ? a.value.value : a.value.expression.value;
          out.push({ tag, value: v, ...splitLoc(v) });
        }
      }
    }
    const kids = [];
    for (const [k, v] of Object.entries(n)) if (k !== "loc" && k !== "extra" && v && typeof v === "object") kids.push(v);
    for (let i = kids.length - 1; i >= 0; i--) stack.push(kids[i]);
  }
  return out;
}

function tagName(name) {
  if (name.type === "JSXIdentifier") return name.name;
  if (name.type === "JSXMemberExpression") return `${tagName(name.object)}.${name.property.name}`;
  return `${name.namespace.name}:${name.name.name}`;
}

/** `file:line:col` split from the right (a POSIX file name may itself contain ':'). */
export function splitLoc(value) {
  const m = /^(.*):(\d+):(\d+)$/s.exec(value);
  if (!m) throw new Error(`bad loc ${JSON.stringify(value)}`);
  return { file: m[1], line: Number(m[2]), col: Number(m[3]) };
}

/** The engine's `read_file` lines: BOM dropped, split on "\n" only, trailing CR dropped. */
export function engineLines(source) {
  const body = source.startsWith("\uFEFF") ? source.slice(1) : source;
  const parts = body.split("\n");
  if (parts.at(-1) === "") parts.pop();
  return parts.map((p) => (p.endsWith("\r") ? p.slice(0, -1) : p));
}

/** The original text at engine line `line`, code-point column `col` (both 1-based), to the end of the line. */
export function textAt(source, line, col) {
  const text = engineLines(source)[line - 1];
  if (text === undefined) return undefined;
  return [...text].slice(col - 1).join("");
}

/** The 1-based engine location of the `nth` (0-based) occurrence of `needle` in `source`, in code points. */
export function locOf(source, needle, nth = 0) {
  let idx = -1;
  for (let i = 0; i <= nth; i++) {
    idx = source.indexOf(needle, idx + 1);
    if (idx < 0) throw new Error(`needle ${needle} #${nth} not found`);
  }
  const before = source.slice(0, idx).replace(/^\uFEFF/, "");
  const lines = before.split("\n");
  return { line: lines.length, col: [...lines.at(-1)].length + 1 };
}

/** Original position (0-based line, 0-based UTF-16 column) of generated 1-based line / 0-based column. */
export async function originalPositionFor(map, line, column) {
  try {
    const tm = await import("@jridgewell/trace-mapping");
    const traced = new tm.TraceMap(map);
    const p = tm.originalPositionFor(traced, { line, column });
    return p.line == null ? null : { source: p.source, line: p.line - 1, column: p.column, via: "trace-mapping" };
  } catch (e) {
    if (e?.code !== "ERR_MODULE_NOT_FOUND") throw e;
  }
  const segments = decode(map.mappings)[line - 1] ?? [];
  let best = null;
  for (const seg of segments) if (seg[0] <= column && seg.length >= 4) best = seg;
  if (!best) return null;
  return { source: map.sources[best[1]], line: best[2], column: best[3], via: "sourcemap-codec" };
}

/** 1-based line and 0-based UTF-16 column of offset `index` in `text` (generated-code coordinates). */
export function genPos(text, index) {
  const before = text.slice(0, index).split("\n");
  return { line: before.length, column: before.at(-1).length };
}
