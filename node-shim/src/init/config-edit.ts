/**
 * The vite.config editor behind `spotpatch-agent init` (issue 29; contract in the plan):
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
 * This module holds the contract above: the command line (reading the file, the JSON on stdout, reasons cut to
 * base names) and the answer (what is decided in which order, and the check of an edit by parsing it again).
 * The rest, each module split by concern and bundled back into one file by scripts/build-config-edit.mjs:
 *   config-read.ts    the size limit, the UTF-8 check, the parse and its tree walk, the file's writing style
 *                     (quotes, semicolons, indentation, line ends), and the package type (ESM or CommonJS)
 *   config-locate.ts  the config object and its `plugins` array across the config shapes followed
 *   config-spot.ts    vite-plugin-spotpatch's import and calls in the file, and whether its call comes first
 *   config-write.ts   the edits (insert the import, insert or move the call; spliced, never reprinted) and
 *                     the lines to paste
 */

import { readFileSync, realpathSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { locate } from "./config-locate.js";
import { DEFAULT_STYLE, firstLine, isStackOverflow, load, loadedAsEsm, MAX_BYTES, type Module, notUtf8Line, type Style, styleOf, tooLarge } from "./config-read.js";
import { DEFAULT_REF, hasCallOf, isSpotElement, listOrders, spotpatchRef } from "./config-spot.js";
import { edited, importLine, moved, pasteLines } from "./config-write.js";

export { loadedAsEsm, MAX_BYTES } from "./config-read.js";
export { PLUGIN_PACKAGE } from "./config-spot.js";

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

/** The reason when spotpatch() is in plugins but not first, and cannot be moved there in this file. */
const NOT_FIRST = "spotpatch() must come first in plugins";

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
  const line = notUtf8Line(raw, code);
  if (line === undefined) return answer;
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
