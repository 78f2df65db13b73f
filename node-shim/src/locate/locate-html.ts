/**
 * Locations for markup that is not JSX (issue 15): the elements of HTML pages (`index.html` and any other
 * HTML page the dev server serves, through `transformIndexHtml`) and of HTML written inside scripts
 * (`el.innerHTML = \`<section>…\``, as the official `vanilla` templates do). Same attribute, same
 * `file:line:col` unit as the JSX locator (src/locate/locate.ts), read with parse5, a spec-compliant HTML parser
 * with source locations — never a regular expression.
 *
 * Dev only: these run from `spotpatch:locate`, which has `apply: 'serve'`.
 */

import { parse, parseFragment } from "parse5";
import type { DefaultTreeAdapterMap } from "parse5";
import MagicString from "magic-string";

import { LinePositions } from "./locate-util.js";

export const HTML_LOC_ATTRIBUTE = "data-spotpatch-loc";

type Node = DefaultTreeAdapterMap["node"];
type Element = DefaultTreeAdapterMap["element"];

/** One element start tag found in markup: offset of its `<` and of the end of its tag name. */
interface StartTag {
  start: number;
  nameEnd: number;
}

/** Every element start tag written in `markup` (implied `<html>`, `<head>`, `<body>` have none). */
function startTags(markup: string, fragment: boolean): StartTag[] {
  const root = fragment
    ? parseFragment(markup, { sourceCodeLocationInfo: true })
    : parse(markup, { sourceCodeLocationInfo: true });
  const out: StartTag[] = [];
  const stack: Node[] = [root];
  while (stack.length > 0) {
    const node = stack.pop() as Node;
    const el = node as Element;
    if (typeof el.tagName === "string") {
      const tag = el.sourceCodeLocation?.startTag;
      const written = tag ? markup.slice(tag.startOffset + 1, tag.startOffset + 1 + el.tagName.length) : "";
      // Only a start tag really written here (parse5 may synthesize one, e.g. for a stray `</p>`).
      if (tag && written.toLowerCase() === el.tagName.toLowerCase() && !el.attrs.some((a) => a.name === HTML_LOC_ATTRIBUTE)) {
        out.push({ start: tag.startOffset, nameEnd: tag.startOffset + 1 + el.tagName.length });
      }
    }
    const children = [...((node as { childNodes?: Node[] }).childNodes ?? [])];
    const content = (node as { content?: Node }).content; // <template> contents
    if (content) children.push(content);
    for (let i = children.length - 1; i >= 0; i--) stack.push(children[i] as Node);
  }
  return out.sort((a, b) => a.start - b.start);
}

/** `value` as a double-quoted HTML attribute value. */
function htmlAttributeValue(value: string): string {
  return `"${value.replace(/&/g, "&amp;").replace(/"/g, "&quot;")}"`;
}

/**
 * Stamp every element start tag of the HTML page `html` with `data-spotpatch-loc="<relFile>:<line>:<col>"`
 * (positions in `html` itself, as the engine numbers lines). Null when there is no element to stamp.
 */
export function injectHtmlLocations(html: string, relFile: string): string | null {
  const bom = html.charCodeAt(0) === 0xfeff ? 1 : 0; // parse5 expects decoded text, without the BOM
  const tags = startTags(html.slice(bom), false);
  if (tags.length === 0) return null;
  const positions = new LinePositions(html);
  const s = new MagicString(html);
  for (const tag of tags) {
    const { line, column } = positions.at(tag.start + bom);
    s.appendLeft(tag.nameEnd + bom, ` ${HTML_LOC_ATTRIBUTE}=${htmlAttributeValue(`${relFile}:${line}:${column}`)}`);
  }
  return s.toString();
}

/**
 * One piece of markup inside a script: the literal's text (`raw`: as written, between the quotes or
 * backticks) and the offset of its first character in the module. Template-literal expressions are
 * given as `holes` ([start, end) offsets within `raw`, `${…}` included): they are blanked out for the
 * parse (same length, newlines kept, so every offset stays true), and never written into.
 */
export interface ScriptMarkup {
  raw: string;
  offset: number;
  holes: Array<[number, number]>;
  /** How an inserted value must be escaped: inside a template literal or a quoted string. */
  quote: "`" | "'" | '"';
}

/**
 * The insertions that stamp every element start tag of `markup` (an HTML fragment written in a script):
 * `[offset in the module, text]`, positions of the module's `positions`.
 */
export function scriptMarkupInsertions(markup: ScriptMarkup, relFile: string, positions: LinePositions): Array<[number, string]> {
  let text = markup.raw;
  for (const [from, to] of markup.holes) {
    text = text.slice(0, from) + text.slice(from, to).replace(/[^\n]/g, "x") + text.slice(to);
  }
  const out: Array<[number, string]> = [];
  for (const tag of startTags(text, true)) {
    const { line, column } = positions.at(markup.offset + tag.start);
    const value = htmlAttributeValue(`${relFile}:${line}:${column}`);
    out.push([markup.offset + tag.nameEnd, ` ${HTML_LOC_ATTRIBUTE}=${escapeForLiteral(value, markup.quote)}`]);
  }
  return out;
}

/** `text` safe inside a JS literal delimited by `quote` (backslashes, the quote, `${`, line breaks). */
function escapeForLiteral(text: string, quote: ScriptMarkup["quote"]): string {
  let out = text.replace(/\\/g, "\\\\").replace(/\u2028/g, "\\u2028").replace(/\u2029/g, "\\u2029");
  out = out.replace(/\n/g, "\\n").replace(/\r/g, "\\r");
  if (quote === "`") out = out.replace(/`/g, "\\`").replace(/\$\{/g, "\\${");
  else out = out.split(quote).join(`\\${quote}`);
  return out;
}
