/**
 * `spotpatch(options)`: the trusted configuration (docs/design.md §12, exactly the engine's `TrustedConfig`)
 * plus how to start the engine, whether a dev server reachable from other machines may use it, and the
 * page overlay's settings. Options are checked when `spotpatch()` is called, so a typo fails the dev
 * server's start, not a job.
 */

import path from "node:path";

import { isArray } from "../protocol/arrays.js";
import { TRUSTED_KEYS } from "./config-file.js";
import type { EngineCommand } from "./engine.js";
import type { OverlayOptions } from "../protocol/overlay.js";
import type { TrustedConfig } from "../protocol/protocol.generated.js";
import { describeErrors, validatorFor } from "../protocol/schema.js";

export interface SpotPatchOptions extends Omit<TrustedConfig, "$schema"> {
  /**
   * The engine to run, without a shell. A string is one executable started with `serve`
   * (`".venv/bin/spotpatch-agent"`); an array is the whole argv (`["uvx", "spotpatch-agent", "serve"]`).
   * A relative path containing a slash is resolved against Vite's `root`. Default: `spotpatch-agent serve`
   * from `PATH`, else from the project's `.venv/` or `venv/` (src/server/engine-locate.ts). Conflicts with `python`.
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
  /**
   * The page overlay (launcher, picker, panel). `true` (default): injected with the default shortcut
   * (`Alt+Shift+S`) and launcher corner (`bottom-right`); an object changes either (`launcher: false`:
   * no button, the shortcut and Alt+click still work); `false`: only the client module is injected
   * (`import { spotpatch } from "virtual:spotpatch/client"`, no UI).
   */
  overlay?: boolean | OverlaySettings;
}

/** The `overlay` option's object form. */
export interface OverlaySettings {
  /** Toggles pick mode: modifiers (`Alt`, `Shift`, `Ctrl`, `Meta`) and one key joined by `+`. */
  shortcut?: string;
  /** The launcher button's initial corner, or `false` for no button. */
  launcher?: OverlayOptions["launcher"];
}

/** What the plugin hands the page's loader, less `projectKey` (made per dev server from its project root). */
export type ResolvedOverlay = Omit<OverlayOptions, "projectKey">;

export interface ResolvedOptions {
  /** The argv; a relative `file` is resolved by `engineCommand`. */
  command: EngineCommand;
  /** Which option gave `command`, or `"default"` (then `locateEngine` searches PATH and the virtualenvs). */
  commandSource: "command" | "python" | "default";
  /** The trusted keys given as options (the plugin merges them over spotpatch.config.json, src/server/config-file.ts). */
  config: TrustedConfig;
  allowRemoteAccess: boolean;
  /** `false`: API only, no overlay. */
  overlay: ResolvedOverlay | false;
}

const OWN_KEYS = ["command", "python", "allowRemoteAccess", "overlay"] as const;

export const DEFAULT_OVERLAY: ResolvedOverlay = { shortcut: "Alt+Shift+S", launcher: "bottom-right" };
const CORNERS = ["bottom-right", "bottom-left", "top-right", "top-left"] as const;
const MODIFIERS = new Set(["alt", "option", "shift", "ctrl", "control", "meta", "cmd", "command"]);

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
  let commandSource: ResolvedOptions["commandSource"] = "default";
  if (typeof options.command === "string" && options.command) {
    command = { file: options.command, args: ["serve"] };
    commandSource = "command";
  } else if (isArray(options.command) && options.command.length > 0 && options.command.every((a) => typeof a === "string" && a)) {
    command = { file: options.command[0]!, args: options.command.slice(1) };
    commandSource = "command";
  } else if (options.command !== undefined) problems.push("command must be a non-empty string or array of non-empty strings");
  if (typeof options.python === "string" && options.python) {
    command = { file: options.python, args: ["-m", "spotpatch_agent", "serve"] };
    commandSource = "python";
  } else if (options.python !== undefined) problems.push("python must be a non-empty string");
  if (options.allowRemoteAccess !== undefined && typeof options.allowRemoteAccess !== "boolean") {
    problems.push("allowRemoteAccess must be a boolean");
  }

  const overlay = resolveOverlay(options.overlay, problems);

  if (problems.length) throw new Error(`vite-plugin-spotpatch: invalid options: ${problems.join("; ")}.`);
  return { command, commandSource, config, allowRemoteAccess: options.allowRemoteAccess === true, overlay };
}

/** The `overlay` option with defaults filled in; each problem is pushed onto `problems`. */
function resolveOverlay(value: SpotPatchOptions["overlay"], problems: string[]): ResolvedOverlay | false {
  if (value === undefined || value === true) return { ...DEFAULT_OVERLAY };
  if (value === false) return false;
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    problems.push("overlay must be true, false or an object { shortcut?, launcher? }");
    return false;
  }
  const unknown = Object.keys(value).filter((key) => key !== "shortcut" && key !== "launcher");
  if (unknown.length) problems.push(`unknown overlay option(s) ${unknown.join(", ")}`);
  const resolved = { ...DEFAULT_OVERLAY };
  if (value.shortcut !== undefined) {
    const problem = shortcutProblem(value.shortcut);
    if (problem) problems.push(`overlay.shortcut ${problem}`);
    else resolved.shortcut = value.shortcut;
  }
  if (value.launcher !== undefined) {
    if (value.launcher === false || (CORNERS as readonly unknown[]).includes(value.launcher)) resolved.launcher = value.launcher;
    else problems.push(`overlay.launcher must be one of ${CORNERS.join(", ")} or false`);
  }
  return resolved;
}

/**
 * Why `shortcut` is not a usable key combination (`undefined` when it is): modifiers from
 * Alt/Option, Shift, Ctrl/Control, Meta/Cmd/Command, then one key (a character or a key name such as
 * `F2`); a key without a modifier is refused unless it is a function key (it would fire while typing).
 */
export function shortcutProblem(shortcut: unknown): string | undefined {
  const usage = 'must look like "Alt+Shift+S": modifiers (Alt, Shift, Ctrl, Meta) and one key, joined by "+"';
  if (typeof shortcut !== "string" || !shortcut.trim()) return usage;
  const parts = shortcut.split("+").map((part) => part.trim());
  const key = parts.pop()!;
  if (!key || parts.some((part) => !part)) return usage;
  const unknown = parts.filter((part) => !MODIFIERS.has(part.toLowerCase()));
  if (unknown.length) return `${usage} (unknown modifier ${unknown.join(", ")})`;
  if (MODIFIERS.has(key.toLowerCase())) return `${usage} (it has no key after the modifiers)`;
  if (key.length > 1 && !/^[A-Za-z][A-Za-z0-9]*$/.test(key)) return `${usage} (unknown key "${key}")`;
  if (parts.length === 0 && !/^F([1-9]|1[0-9]|2[0-4])$/i.test(key)) {
    return `${usage} (a key without a modifier would fire while typing)`;
  }
  return undefined;
}

/** The command with a relative path (one containing a separator) resolved against `root`. */
export function engineCommand(command: EngineCommand, root: string): EngineCommand {
  const { file } = command;
  const isPath = file.includes("/") || file.includes("\\");
  return isPath && !path.isAbsolute(file) ? { file: path.resolve(root, file), args: command.args } : command;
}
