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

import { readFileSync } from "node:fs";
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
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw invalid(`cannot be read (${(error as NodeJS.ErrnoException).code ?? "read error"})`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw invalid(`is not valid JSON: ${(error as Error).message}`);
  }
  return checkConfigFile(value);
}

/** The trusted config in a parsed config file (its `$schema` dropped); throws naming each bad key. */
export function checkConfigFile(value: unknown): TrustedConfig {
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw invalid("must be a JSON object");
  const problems: string[] = [];
  const { $schema, ...rest } = value as Record<string, unknown>;
  if ($schema !== undefined && typeof $schema !== "string") problems.push(`"$schema" must be a string (a path or URL of the schema)`);
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
    if (!validate(rest)) problems.push(...describeErrors(validate.errors ?? []).map((p) => `key ${p.replace(/^\(params\)/, "(top level)")}`));
  }
  if (problems.length) throw invalid(`is not a valid SpotPatch config: ${problems.join("; ")}`);
  return rest as TrustedConfig;
}

/** The config the engine gets: `fromFile`'s top-level keys, each replaced by `fromOptions`' value when given. */
export function mergeConfig(fromOptions: TrustedConfig, fromFile: TrustedConfig | undefined): TrustedConfig {
  const merged: Record<string, unknown> = {};
  for (const key of TRUSTED_KEYS) {
    const value = fromOptions[key] !== undefined ? fromOptions[key] : fromFile?.[key];
    if (value !== undefined) merged[key] = value;
  }
  return merged as TrustedConfig;
}

function invalid(what: string): Error {
  return new Error(`vite-plugin-spotpatch: ${CONFIG_FILE} (at the project root) ${what}.`);
}
