// The location-accuracy harness (issue 15, acceptance 1): for every element of a rendered page that comes
// from a project file, is its `data-spotpatch-loc="file:line:col"` there, and is the element's start tag
// `<tag` at exactly that line and column of that file? Shared by every framework's accuracy test.
//
// Which elements "come from a project file": every element of the page's document (light DOM, `<html>`
// included), minus the elements the TOOLING adds, each counted under its reason in `excluded`:
//   - the SpotPatch overlay host `<spotpatch-overlay>` (its shadow tree is not in the light DOM anyway)
//     and SpotPatch's own injected `<script>` (src under /@id/__x00__virtual:spotpatch…);
//   - Vite's `<script src="/@vite/client">` and its `<style data-vite-dev-id>` (imported CSS);
//   - inline module scripts a framework plugin injects into index.html (the React Refresh preamble);
//   - whatever the caller lists in `exclude: [{ selector, reason }]` (e.g. elements a library or a
//     script builds at run time with no markup anywhere in the project). Callers must give a reason;
//     excluded counts are returned so a test can assert them.
// Everything else counts, including elements rendered by a component of the project (its own file) and
// elements a script inserts from markup written in a project file (vanilla `innerHTML = \`<div>…\``).
// An element whose location points into node_modules or outside the project is a miss, never skipped.
//
// Lines and columns are checked as the engine's `read_file` numbers them (see src/locate/locate.ts): lines split
// on "\n" only (a trailing "\r" dropped, a UTF-8 BOM dropped), columns 1-based in Unicode code points.
import { readFileSync } from "node:fs";
import path from "node:path";

/** The attribute every locator writes (src/locate/locate.ts LOC_ATTRIBUTE). */
export const LOC_ATTRIBUTE = "data-spotpatch-loc";

/** Elements the tooling injects (see the header); each `[selector, reason]`. */
export const TOOLING_EXCLUSIONS = [
  ["spotpatch-overlay", "SpotPatch overlay host"],
  ['script[src*="virtual:spotpatch"]', "SpotPatch loader script"],
  ['script[src^="/@vite/"]', "Vite client script"],
  ["style[data-vite-dev-id]", "Vite CSS injection"],
  ["script[type=module]:not([src])", "framework plugin preamble"],
];

/**
 * Measure `page` (a playwright Page) against the files of `projectDir` (the git top level: locations are
 * relative to it). `exclude`: more `{ selector, reason }` (see the header).
 *
 * Returns `{ total, located, exact, excluded: {reason: count}, misses: [{ element, loc, problem }] }`:
 * `total` elements counted, `located` of them carry a location, `exact` of them point at their own start
 * tag. Each miss names the element (`tag#id.class "text…"`), its location (or null) and what is wrong.
 * An inline module script listed as tooling is only excluded when it has no location (the project's
 * own inline scripts in index.html are stamped and then counted).
 */
export async function measureLocations(page, projectDir, { exclude = [] } = {}) {
  for (const entry of exclude) {
    if (!entry?.selector || !entry?.reason) throw new Error("each exclude entry needs a selector and a reason");
  }
  const rules = [...TOOLING_EXCLUSIONS, ...exclude.map((e) => [e.selector, e.reason])];
  const elements = await page.evaluate(
    ({ rules, attribute }) => {
      const describe = (el) => {
        let s = el.localName;
        if (el.id) s += `#${el.id}`;
        const cls = typeof el.className === "string" ? el.className.trim().split(/\s+/).filter(Boolean) : [];
        if (cls.length) s += `.${cls.slice(0, 2).join(".")}`;
        const text = (el.textContent ?? "").replace(/\s+/g, " ").trim().slice(0, 30);
        return text ? `${s} "${text}"` : s;
      };
      const out = [];
      for (const el of document.querySelectorAll("*")) {
        const loc = el.getAttribute(attribute);
        let reason = null;
        for (const [selector, why] of rules) {
          const hit = el.matches(selector) || (selector === "spotpatch-overlay" && el.closest(selector));
          if (!hit) continue;
          if (selector.startsWith("script[type=module]:not") && loc !== null) continue; // the project's own
          reason = why;
          break;
        }
        out.push({ tag: el.localName, element: describe(el), loc, excluded: reason });
      }
      return out;
    },
    { rules, attribute: LOC_ATTRIBUTE },
  );

  const files = new Map();
  const result = { total: 0, located: 0, exact: 0, excluded: {}, misses: [] };
  for (const item of elements) {
    if (item.excluded) {
      result.excluded[item.excluded] = (result.excluded[item.excluded] ?? 0) + 1;
      continue;
    }
    result.total++;
    if (item.loc === null) {
      result.misses.push({ element: item.element, loc: null, problem: "no location" });
      continue;
    }
    result.located++;
    const problem = checkLocation(item.tag, item.loc, projectDir, files);
    if (problem) result.misses.push({ element: item.element, loc: item.loc, problem });
    else result.exact++;
  }
  return result;
}

/** Null when `loc` points at `<tag` in its file; otherwise what is wrong, readably. */
export function checkLocation(tag, loc, projectDir, files = new Map()) {
  const m = /^(.*):(\d+):(\d+)$/s.exec(loc);
  if (!m) return `malformed location ${JSON.stringify(loc)}`;
  const [, file, lineText, colText] = m;
  if (path.isAbsolute(file) || file.split(/[\\/]/).includes("..")) return `path not project-relative: ${file}`;
  if (file.split(/[\\/]/).includes("node_modules")) return `path under node_modules: ${file}`;
  let lines = files.get(file);
  if (lines === undefined) {
    try {
      lines = engineLines(readFileSync(path.join(projectDir, file), "utf8"));
    } catch (error) {
      files.set(file, null);
      return `cannot read ${file}: ${error.code ?? error.message}`;
    }
    files.set(file, lines);
  }
  if (lines === null) return `cannot read ${file}`;
  const line = Number(lineText);
  const col = Number(colText);
  const text = lines[line - 1];
  if (text === undefined) return `${file} has ${lines.length} lines, not ${line}`;
  const at = [...text].slice(col - 1).join("");
  const re = new RegExp(`^<${escapeRegExp(tag)}(?=[\\s/>]|$)`, "i");
  if (re.test(at)) return null;
  const found = nearestTag(lines, tag, line);
  const hint = found ? `; nearest <${tag} at ${found.line}:${found.col}` : `; no <${tag} in ${file}`;
  return `expected <${tag} at ${file}:${line}:${col}, found ${JSON.stringify(at.slice(0, 24))}${hint}`;
}

/** The engine's `read_file` lines: BOM dropped, split on "\n" only, a trailing "\r" dropped. */
export function engineLines(source) {
  const body = source.startsWith("\uFEFF") ? source.slice(1) : source;
  const parts = body.split("\n");
  if (parts.at(-1) === "") parts.pop();
  return parts.map((p) => (p.endsWith("\r") ? p.slice(0, -1) : p));
}

/** A one-line summary for assertion messages: counts and up to `limit` misses. */
export function formatMeasurement(r, limit = 15) {
  const head = `${r.exact}/${r.total} exact, ${r.located}/${r.total} located; excluded ${JSON.stringify(r.excluded)}`;
  const misses = r.misses.slice(0, limit).map((m) => `\n  ${m.element} @ ${m.loc ?? "-"}: ${m.problem}`);
  const more = r.misses.length > limit ? `\n  … ${r.misses.length - limit} more` : "";
  return head + misses.join("") + more;
}

function nearestTag(lines, tag, around) {
  const re = new RegExp(`<${escapeRegExp(tag)}(?=[\\s/>]|$)`, "i");
  let best = null;
  lines.forEach((text, i) => {
    const m = re.exec(text);
    if (!m) return;
    const distance = Math.abs(i + 1 - around);
    if (!best || distance < best.distance) best = { line: i + 1, col: [...text.slice(0, m.index)].length + 1, distance };
  });
  return best;
}

function escapeRegExp(s) {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
