/**
 * `spotpatch(options)`: the trusted configuration (DESIGN.md §12, exactly the engine's `TrustedConfig`)
 * plus how to start the engine and whether a dev server reachable from other machines may use it.
 * Options are checked when `spotpatch()` is called, so a typo fails the dev server's start, not a job.
 */

import path from "node:path";

import type { EngineCommand } from "./engine.js";
import type { TrustedConfig } from "./protocol.generated.js";
import { describeErrors, validatorFor } from "./schema.js";

export interface SpotPatchOptions extends TrustedConfig {
  /**
   * The engine to run, without a shell. A string is one executable started with `serve`
   * (`".venv/bin/spotpatch-agent"`); an array is the whole argv (`["uvx", "spotpatch-agent", "serve"]`).
   * A relative path containing a slash is resolved against Vite's `root`. Default: `spotpatch-agent serve`
   * from `PATH`. Conflicts with `python`.
   */
  command?: string | readonly string[];
  /** A Python interpreter with spotpatch-agent installed: runs `<python> -m spotpatch_agent serve`. */
  python?: string;
  /**
   * Serve SpotPatch even when the dev server is reachable from other machines or sites
   * (`server.host` not loopback, `server.allowedHosts: true` or `server.cors: true`). Default false:
   * then every SpotPatch request is refused with a message saying why.
   */
  allowRemoteAccess?: boolean;
}

export interface ResolvedOptions {
  /** The argv; a relative `file` is resolved by `engineCommand`. */
  command: EngineCommand;
  config: TrustedConfig;
  allowRemoteAccess: boolean;
}

const TRUSTED_KEYS = ["providers", "checks", "limits", "modes"] as const;
const OWN_KEYS = ["command", "python", "allowRemoteAccess"] as const;

/** Check and split the options; throws an `Error` naming every problem. */
export function resolveOptions(options: SpotPatchOptions = {}): ResolvedOptions {
  const problems: string[] = [];
  const unknown = Object.keys(options).filter(
    (key) => !(TRUSTED_KEYS as readonly string[]).includes(key) && !(OWN_KEYS as readonly string[]).includes(key),
  );
  if (unknown.length) problems.push(`unknown option(s) ${unknown.join(", ")}`);

  const config: TrustedConfig = {};
  for (const key of TRUSTED_KEYS) if (options[key] !== undefined) Object.assign(config, { [key]: options[key] });
  const validate = validatorFor("TrustedConfig");
  if (!validate(config)) problems.push(...describeErrors(validate.errors ?? []).map((p) => `trusted config ${p}`));

  if (options.command !== undefined && options.python !== undefined) problems.push("give either command or python, not both");
  let command: EngineCommand = { file: "spotpatch-agent", args: ["serve"] };
  if (typeof options.command === "string" && options.command) command = { file: options.command, args: ["serve"] };
  else if (Array.isArray(options.command) && options.command.length > 0 && options.command.every((a) => typeof a === "string" && a)) {
    command = { file: options.command[0]!, args: options.command.slice(1) };
  } else if (options.command !== undefined) problems.push("command must be a non-empty string or array of non-empty strings");
  if (typeof options.python === "string" && options.python) {
    command = { file: options.python, args: ["-m", "spotpatch_agent", "serve"] };
  } else if (options.python !== undefined) problems.push("python must be a non-empty string");
  if (options.allowRemoteAccess !== undefined && typeof options.allowRemoteAccess !== "boolean") {
    problems.push("allowRemoteAccess must be a boolean");
  }

  if (problems.length) throw new Error(`vite-plugin-spotpatch: invalid options: ${problems.join("; ")}.`);
  return { command, config, allowRemoteAccess: options.allowRemoteAccess === true };
}

/** The command with a relative path (one containing a separator) resolved against `root`. */
export function engineCommand(command: EngineCommand, root: string): EngineCommand {
  const { file } = command;
  const isPath = file.includes("/") || file.includes("\\");
  return isPath && !path.isAbsolute(file) ? { file: path.resolve(root, file), args: command.args } : command;
}
