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
 * restarts the dev server when it changes (src/dev-config.ts).
 */

import { readFileSync, statSync } from "node:fs";
import path from "node:path";

import type { TrustedConfig } from "./protocol.generated.js";
import { describeErrors, validatorFor } from "./schema.js";

export const CONFIG_FILE = "spotpatch.config.json";
export const TRUSTED_KEYS = ["providers", "checks", "limits", "modes", "sandbox", "suggestions", "audit"] as const;
const PLUGIN_ONLY_KEYS = ["command", "python", "allowRemoteAccess", "overlay"];

/**
 * The trusted config of `<projectRoot>/spotpatch.config.json` (without `$schema`), or undefined when
 * the file does not exist. Throws an `Error` naming the file and every bad key when it is not valid.
 */
export function readConfigFile(projectRoot: string): TrustedConfig | undefined {
  const file = path.join(projectRoot, CONFIG_FILE);
  let bytes: Buffer;
  try {
    // A FIFO would block the dev server's start for good; a folder says EISDIR anyway.
    if (!statSync(file).isFile()) throw invalid("is not a regular file");
    bytes = readFileSync(file);
  } catch (error) {
    if (!(error as NodeJS.ErrnoException).code) throw error;
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw invalid(`cannot be read (${(error as NodeJS.ErrnoException).code ?? "read error"})`);
  }
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes); // no silent U+FFFD: `run` refuses such a file too
  } catch {
    throw invalid("is not UTF-8 text");
  }
  let value: unknown;
  try {
    value = JSON.parse(text.startsWith("\uFEFF") ? text.slice(1) : text); // a BOM is allowed, as by `run`
  } catch (error) {
    throw invalid(`is not valid JSON: ${jsonProblem((error as Error).message)}`);
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

/** The trusted config in a parsed config file (its `$schema` dropped); throws naming each bad key. */
export function checkConfigFile(value: unknown): TrustedConfig {
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw invalid("must be a JSON object");
  const problems: string[] = [];
  const { $schema, ...rest } = value as Record<string, unknown>;
  if ($schema !== undefined && $schema !== null && typeof $schema !== "string") problems.push(`"$schema" must be a string (a path or URL of the schema)`);
  for (const key of Object.keys(rest)) {
    if ((TRUSTED_KEYS as readonly string[]).includes(key)) continue;
    problems.push(
      PLUGIN_ONLY_KEYS.includes(key)
        ? `"${key}" is a Vite plugin option: give it in spotpatch({ ${key}: … }) in your Vite config, not in the file`
        : `unknown key "${key.slice(0, 40)}" (allowed: ${TRUSTED_KEYS.join(", ")}, $schema)`,
    );
  }
  if (!problems.length) {
    const validate = validatorFor("TrustedConfig");
    // The whole file, `$schema` included: the engine (`run`) checks its length too.
    if (!validate(value)) problems.push(...describeErrors(validate.errors ?? []).map((p) => `key ${p.replace(/^\(params\)/, "(top level)")}`));
  }
  if (problems.length) throw invalid(`is not a valid SpotPatch config: ${problems.join("; ")}`);
  return rest;
}

/** The config the engine gets: `fromFile`'s top-level keys, each replaced by `fromOptions`' value when given. */
export function mergeConfig(fromOptions: TrustedConfig, fromFile: TrustedConfig | undefined): TrustedConfig {
  const merged: Record<string, unknown> = {};
  for (const key of TRUSTED_KEYS) {
    const value = fromOptions[key] !== undefined ? fromOptions[key] : fromFile?.[key];
    if (value !== undefined) merged[key] = value;
  }
  return merged;
}

function invalid(what: string): Error {
  return new Error(`vite-plugin-spotpatch: ${CONFIG_FILE} (at the project root) ${what}.`);
}
