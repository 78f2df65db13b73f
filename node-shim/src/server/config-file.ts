/**
 * `spotpatch.config.json` at the project root (the git top level): one trusted configuration for
 * `spotpatch-agent run` and this plugin (docs/node-shim.md "One configuration").
 *
 * The rule: the file's top-level keys (`TRUSTED_KEYS`: `TrustedConfig`'s keys) are the
 * base; each of those keys given in `spotpatch(options)` replaces the file's value of that key as a
 * whole (no deep merge: `limits` in the options replaces the file's `limits`). The file's `$schema`
 * key is for editors only: it is checked to be a string and never reaches the engine. The plugin's
 * own options (`command`, `python`, `allowRemoteAccess`, `overlay`) are not allowed in the file.
 * The file is read at every dev-server start (and `server.restart()`); the plugin watches it and
 * restarts the dev server when it changes (src/server/dev-config.ts).
 */

import { readFileSync, statSync } from "node:fs";
import path from "node:path";

import type { ErrorObject } from "ajv";

import type { TrustedConfig } from "../protocol/protocol.generated.js";
import { validatorFor } from "../protocol/schema.js";

export const CONFIG_FILE = "spotpatch.config.json";
export const TRUSTED_KEYS = ["providers", "checks", "limits", "modes", "sandbox", "suggestions", "audit"] as const;
const PLUGIN_ONLY_KEYS = ["command", "python", "allowRemoteAccess", "overlay"];

/**
 * The trusted config of `<projectRoot>/spotpatch.config.json` (without `$schema`), or undefined when
 * the file does not exist. Throws a `ConfigFileError` naming the file and every bad key when it is not valid.
 */
export function readConfigFile(projectRoot: string): TrustedConfig | undefined {
  const file = path.join(projectRoot, CONFIG_FILE);
  let bytes: Buffer;
  try {
    // A FIFO would block the dev server's start for good; a folder says EISDIR anyway.
    const stat = statSync(file);
    if (!stat.isFile()) throw invalid("is not a regular file", [], "make it a regular file, or remove it.");
    // Read and checked before anything parses it: schema validation time grows faster than the file.
    if (stat.size > MAX_CONFIG_FILE_BYTES)
      throw invalid(`is ${stat.size} bytes, over the ${MAX_CONFIG_FILE_BYTES} a config may have`, [], SIZE_FIX);
    bytes = readFileSync(file);
  } catch (error) {
    if (!(error as NodeJS.ErrnoException).code) throw error;
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw invalid(`cannot be read (${(error as NodeJS.ErrnoException).code ?? "read error"})`, [], "make it readable by the user running Vite.");
  }
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes); // no silent U+FFFD: `run` refuses such a file too
  } catch {
    throw invalid("is not UTF-8 text", [], JSON_FIX);
  }
  let value: unknown;
  try {
    value = JSON.parse(text.startsWith("\uFEFF") ? text.slice(1) : text); // a BOM is allowed, as by `run`
  } catch (error) {
    throw invalid(`is not valid JSON: ${jsonProblem((error as Error).message)}`, [], JSON_FIX);
  }
  return checkConfigFile(value);
}

/**
 * V8's `JSON.parse` message without the excerpt of the text it quotes (`Unexpected token 's', ..."apiKey":
 * sk-proj-ab"... is not valid JSON`): a key pasted into the file, or the first bytes of whatever file
 * the name links to, must not reach the Vite log. The token and the position V8 gives are kept.
 */
export function jsonProblem(message: string): string {
  return message.replace(/,\s*(?:\.\.\.)?"[\s\S]*"(?:\.\.\.)?\s+is not valid JSON$/, "").slice(0, 200);
}

/**
 * The trusted config in a parsed config file (its `$schema` dropped). Throws a `ConfigFileError` whose
 * `problems` list every bad key (`providers.0.baseUrl: is required`, the location in the file as
 * `spotpatch-agent doctor` spells it, never a value).
 */
export function checkConfigFile(value: unknown): TrustedConfig {
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw invalid("must be a JSON object", [], KEYS_FIX);
  const problems: string[] = [];
  const { $schema, ...rest } = value as Record<string, unknown>;
  if ($schema !== undefined && $schema !== null && typeof $schema !== "string") problems.push(`$schema: must be a string (a path or URL of the schema)`);
  for (const key of Object.keys(rest)) {
    if ((TRUSTED_KEYS as readonly string[]).includes(key)) continue;
    problems.push(
      PLUGIN_ONLY_KEYS.includes(key)
        ? `${key}: is a Vite plugin option: give it in spotpatch({ ${key}: … }) in your Vite config, not in the file`
        : `${shownKey(key)}: unknown key (allowed: ${TRUSTED_KEYS.join(", ")}, $schema)`,
    );
  }
  // Every problem at once (as `spotpatch-agent doctor` lists them): the known keys are checked even when an
  // unknown one was found. `$schema` is checked as a string here when it is one: the engine checks its length too.
  const known = Object.fromEntries(Object.entries(rest).filter(([key]) => (TRUSTED_KEYS as readonly string[]).includes(key)));
  const validate = validatorFor("TrustedConfig");
  if (!validate(typeof $schema === "string" ? { $schema, ...known } : known)) for (const problem of configProblems(validate.errors ?? [])) problems.push(problem); // no spread: 100,000s of them
  if (problems.length) {
    // The count is of every distinct problem; the list shows the first MAX_PROBLEMS of them.
    const count = problems.length === 1 ? "1 error" : `${problems.length} errors`;
    const shown = problems.length > MAX_PROBLEMS ? `, the first ${MAX_PROBLEMS} listed` : "";
    throw invalid(`is not a valid SpotPatch config (${count}${shown})`, problems.slice(0, MAX_PROBLEMS), KEYS_FIX);
  }
  return rest;
}

/** At most this many problems are listed (a file pasted from elsewhere can have hundreds). */
export const MAX_PROBLEMS = 30;

/** The largest spotpatch.config.json read (1 MiB; a real one is a few KB), as `run` and `doctor` (run_cli.py). */
export const MAX_CONFIG_FILE_BYTES = 1 << 20;
const SIZE_FIX = "a SpotPatch config is a few kilobytes: keep the providers, checks and limits you use (docs/configuration.md).";
const KEYS_FIX = "fix the keys listed (docs/configuration.md; unknown keys are errors).";
const JSON_FIX = "fix the file: valid JSON in UTF-8 (an editor using the file's \"$schema\" shows where).";

/**
 * Ajv's errors as `location: what is wrong` lines, the location dotted as `spotpatch-agent doctor` spells it
 * (`providers.0.baseUrl`), never a value: a missing key is named at its own location, an unknown key too;
 * a union's branch errors collapse into the union's one line.
 */
function configProblems(errors: readonly ErrorObject[]): string[] {
  // Linear in the errors (a pasted file can yield tens of thousands): the unions and each union's first
  // telling branch are indexed once, and the lines are deduplicated through a Set.
  const unions = new Set(errors.filter((e) => e.keyword === "anyOf" || e.keyword === "oneOf").map((e) => e.instancePath));
  const branches = new Map<string, string>();
  for (const e of errors)
    if (unions.has(e.instancePath) && e.keyword !== "anyOf" && e.keyword !== "oneOf" && e.message && e.message !== "must be null" && !branches.has(e.instancePath))
      branches.set(e.instancePath, e.message);
  const out = new Set<string>();
  for (const error of errors) {
    const params = error.params as { missingProperty?: unknown; additionalProperty?: unknown };
    let where = dotted(error.instancePath);
    let what = error.message ?? error.keyword;
    if (error.keyword === "required") {
      where = join(where, shownKey(String(params.missingProperty)));
      what = "is required";
    } else if (error.keyword === "additionalProperties") {
      where = join(where, shownKey(String(params.additionalProperty)));
      what = "unknown key (not allowed here)";
    } else if (unions.has(error.instancePath) && error.keyword !== "anyOf" && error.keyword !== "oneOf") {
      continue; // a branch of a union: the union's own line says it
    } else if (error.keyword === "anyOf" || error.keyword === "oneOf") {
      // An optional value (`T | null`): the branch that is not `null` says what is wrong.
      what = branches.get(error.instancePath) ?? "has the wrong type or value";
    }
    out.add(`${where || "(top level)"}: ${what}`);
  }
  return [...out];
}

const dotted = (pointer: string): string =>
  pointer
    .split("/")
    .slice(1)
    .map((part) => shownKey(part.replace(/~1/g, "/").replace(/~0/g, "~")))
    .join(".");
const join = (where: string, key: string): string => (where ? `${where}.${key}` : key);
/** A key of the file as shown: at most 40 characters, control characters dropped. */
// eslint-disable-next-line no-control-regex
const shownKey = (key: string): string => key.replace(/[\u0000-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g, "").slice(0, 40);

/** The config the engine gets: `fromFile`'s top-level keys, each replaced by `fromOptions`' value when given. */
export function mergeConfig(fromOptions: TrustedConfig, fromFile: TrustedConfig | undefined): TrustedConfig {
  const merged: Record<string, unknown> = {};
  for (const key of TRUSTED_KEYS) {
    const value = fromOptions[key] !== undefined ? fromOptions[key] : fromFile?.[key];
    if (value !== undefined) merged[key] = value;
  }
  return merged;
}

/**
 * `spotpatch.config.json` cannot be used: `reason` completes "spotpatch.config.json …" (`is not a valid
 * SpotPatch config (3 errors)`), `problems` are its lines (`providers.0.baseUrl: is required`; empty for a file
 * that is not JSON), `fix` says what to do; the message joins them in one line. Nothing of the file's text.
 */
export class ConfigFileError extends Error {
  readonly reason: string;
  readonly problems: readonly string[];
  readonly fix: string;

  constructor(reason: string, problems: readonly string[], fix: string) {
    super(`vite-plugin-spotpatch: ${CONFIG_FILE} (at the project root) ${reason}${problems.length ? `: ${problems.join("; ")}` : ""}.`);
    this.name = "ConfigFileError";
    this.reason = reason;
    this.problems = problems;
    this.fix = fix;
  }
}

function invalid(reason: string, problems: readonly string[] = [], fix = JSON_FIX): ConfigFileError {
  return new ConfigFileError(reason, problems, fix);
}

/**
 * The Vite log's block for a file that cannot be used (one `logger.error` call): the reason, every
 * problem on its own line, the fix (the words of `spotpatch-agent doctor`'s config item), then `after`
 * (what happens now). Nothing of the file's text, no absolute path.
 */
export function configProblemBlock(error: ConfigFileError, after: string): string {
  return [
    `[spotpatch] ${CONFIG_FILE} (at the project root) ${error.reason}${error.problems.length ? ":" : "."}`,
    ...error.problems.map((problem) => `  - ${problem}`),
    `  fix: ${error.fix} \`spotpatch-agent doctor\` checks the file.`,
    `  ${after}`,
  ].join("\n");
}

/** What the overlay shows instead of the composer while the file cannot be used (OverlayOptions.configProblem). */
export function configProblemForPage(error: ConfigFileError): { reason: string; problems: string[]; fix: string } {
  return { reason: `${CONFIG_FILE} ${error.reason}`, problems: [...error.problems], fix: error.fix };
}
