/**
 * The text the editor writes into one config: the import line (after the file's last import, else below its
 * pragma comments), spotpatch() put first in the plugins array or `plugins: [spotpatch()]` added to the config
 * object (`edited`), an entry of the plugins array moved to the front (`moved`), and the lines a refusal asks
 * the user to paste (`pasteLines`).
 *
 * How the edit keeps the user's formatting: the file is parsed with Babel (exact offsets), the config
 * object and its `plugins` array are located on that tree (config-locate.ts), and the text is spliced at those
 * offsets (magic-string) — nothing else of the file is reprinted. magicast's own edit path (`addVitePlugin`,
 * recast's printer) was tried and not used: it reprints a `plugins` array it inserts into (a multi-line
 * array becomes one line, its trailing comma goes, comments move onto other elements), adds `;` to the new
 * import in a file without semicolons, puts the import above a leading `// @ts-check`, parses a copy whose
 * indentation tabs became spaces, and for `defineConfig(() => ({...}))` adds the import but no plugin.
 * magicast's `detectCodeFormat` supplies the semicolon and indentation style where the file's own imports
 * do not show it (config-read.ts's `styleOf`).
 */

import type { ArrayExpression, Node, Statement } from "@babel/types";
import MagicString from "magic-string";

import type { Target } from "./config-locate.js";
import { type Module, type Style, text, unwrap, walk } from "./config-read.js";
import { callText, isSpotElement, PLUGIN_PACKAGE, type SpotRef } from "./config-spot.js";

export function importLine(style: Style, ref: SpotRef): string {
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
export function pasteLines(mod: Module | undefined, style: Style, ref: SpotRef, plugins: Node | undefined, scope?: Statement[]): string {
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

export function edited(mod: Module, style: Style, target: Target & { kind: "array" | "object" }, existing: SpotRef | undefined): string {
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
export function moved(mod: Module, style: Style, array: ArrayExpression, index: number): string | undefined {
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
