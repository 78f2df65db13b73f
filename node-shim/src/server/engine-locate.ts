/**
 * Which engine executable the plugin runs (docs/node-shim.md "Finding the engine"), decided without
 * starting it: the `command` or `python` option when given, else `spotpatch-agent` on `PATH`, else the
 * project's own virtualenv (`.venv/`, then `venv/`, in Vite's root and then in the project root; `bin/`
 * and `Scripts/` layouts), else the engine `spotpatch-agent init` recorded for this user
 * (`$XDG_CONFIG_HOME/spotpatch/engine.json`, default `~/.config/spotpatch/engine.json`: outside every
 * project, so nothing a job writes can change which program the plugin runs). Only file-system look-ups
 * (no process), so it runs at every dev-server start and before every engine start without delaying either.
 *
 * When nothing is found the result carries one message naming every place tried and the fix; the Vite
 * log shows it at start and the page shows it as the engine-unavailable error. It names places relative
 * to the project root (or by base name), never by absolute path: the page sees it too.
 */

import { accessSync, constants, readFileSync, realpathSync, statSync } from "node:fs";
import { homedir } from "node:os";
import path from "node:path";

import type { EngineCommand } from "./engine.js";

/**
 * Where the engine comes from: the `command` or `python` option, found on `PATH` or in a virtualenv, or
 * the one `spotpatch-agent init` recorded (`init`).
 */
export type EngineSource = "command" | "python" | "path" | "venv" | "init";

export interface EngineLocation {
  /** The argv to run (absolute `file` when found on disk); set even when not found (the default name). */
  command: EngineCommand;
  /** Where it came from; undefined when nothing was found. */
  source: EngineSource | undefined;
  /** What was tried, in order, as the message names it. */
  tried: string[];
  /** Set when no usable executable was found: the whole message (what was tried, how to fix it). */
  problem: string | undefined;
}

export interface LocateRequest {
  /** The `command`/`python` option's argv, or undefined for the default search. */
  given: { command: EngineCommand; source: "command" | "python" } | undefined;
  /** Vite's root: a relative `command` is resolved against it, and its virtualenvs are tried first. */
  root: string;
  /** The project root (the git top level): its virtualenvs are tried next, and messages name paths relative to it. */
  projectRoot: string;
  env?: NodeJS.ProcessEnv;
  platform?: NodeJS.Platform;
  /** The user's home folder (default `os.homedir()`): where the engine recorded by `init` is looked up. */
  home?: string;
}

export const ENGINE_NAME = "spotpatch-agent";
/** The project's own virtualenv folders (also kept out of Vite's watcher, src/server/dev-config.ts). */
export const VENV_DIRS = [".venv", "venv"] as const;
/** What `init` records, shown in messages (never the user's own home path). */
export const INIT_RECORD = "~/.config/spotpatch/engine.json";
const INSTALL_HINT =
  "Install it (pip install <path or git URL of the SpotPatch repository>) and run `spotpatch-agent init` in this app, " +
  "which records where the engine is; or install it into the project's virtualenv (.venv/bin/spotpatch-agent), " +
  'or point the plugin at it: spotpatch({ command: "path/to/spotpatch-agent" }) or spotpatch({ python: "path/to/python" }).';

/** The engine to run for `request`; never throws. */
export function locateEngine(request: LocateRequest): EngineLocation {
  const env = request.env ?? process.env;
  const platform = request.platform ?? process.platform;
  // Real paths: git spells the project root without symlinks, Vite's root may have them (a linked home or
  // /tmp); compared as given, the same folder was tried twice and named by its base name only.
  const root = realPath(request.root);
  const projectRoot = realPath(request.projectRoot);
  const shown = (file: string) => displayPath(file, projectRoot);

  if (request.given) {
    const { command, source } = request.given;
    const file = command.file;
    const isPath = file.includes("/") || file.includes("\\");
    const resolved = isPath ? path.resolve(root, file) : searchPath(file, env, platform);
    const option = source === "command" ? "command" : "python";
    if (resolved && isExecutable(resolved, platform)) {
      return { command: { file: resolved, args: command.args }, source, tried: [shown(resolved)], problem: undefined };
    }
    const what = isPath ? `${shown(path.resolve(root, file))}` : `"${file}" on PATH`;
    const problem =
      `SpotPatch engine not found: the ${option} option names ${what}, which ${isPath ? "is not an executable file" : "is not there"}. ` +
      `Fix the ${option} option, or remove it to use ${ENGINE_NAME} from PATH or the project's .venv/venv. ${INSTALL_HINT}`;
    return { command: { file: resolved ?? file, args: command.args }, source: undefined, tried: [what], problem };
  }

  const tried: string[] = [`${ENGINE_NAME} on PATH`];
  const onPath = searchPath(ENGINE_NAME, env, platform);
  if (onPath) return { command: { file: onPath, args: ["serve"] }, source: "path", tried, problem: undefined };

  for (const dir of new Set([root, projectRoot])) {
    for (const venv of VENV_DIRS) {
      for (const file of venvExecutables(path.join(dir, venv))) {
        tried.push(shown(file));
        if (isExecutable(file, platform)) {
          return { command: { file, args: ["serve"] }, source: "venv", tried, problem: undefined };
        }
      }
    }
  }
  const recorded = recordedEngine(env, request.home ?? homedir());
  tried.push(`the engine spotpatch-agent init recorded (${INIT_RECORD})`);
  if (recorded.file && isExecutable(recorded.file, platform)) {
    return { command: { file: recorded.file, args: ["serve"] }, source: "init", tried, problem: undefined };
  }
  const why = recorded.file ? "it names a program that is no longer there: run spotpatch-agent init again" : recorded.note;
  const problem = `SpotPatch engine not found: tried ${tried.join(", ")}${why ? ` (${why})` : ""}. ${INSTALL_HINT}`;
  return { command: { file: ENGINE_NAME, args: ["serve"] }, source: undefined, tried, problem };
}

/** `<venv>/bin/spotpatch-agent` (POSIX layout) and `<venv>/Scripts/spotpatch-agent.exe` (Windows layout). */
function venvExecutables(venv: string): string[] {
  return [path.join(venv, "bin", ENGINE_NAME), path.join(venv, "Scripts", `${ENGINE_NAME}.exe`)];
}

/** The first executable `name` in `env.PATH` (with `PATHEXT` on Windows), or undefined. */
export function searchPath(name: string, env: NodeJS.ProcessEnv, platform: NodeJS.Platform): string | undefined {
  const pathValue = env.PATH ?? env.Path ?? "";
  const extensions = platform === "win32" ? ["", ...(env.PATHEXT ?? ".EXE;.CMD;.BAT;.COM").split(";").filter(Boolean)] : [""];
  for (const dir of pathValue.split(platform === "win32" ? ";" : path.delimiter)) {
    if (!dir) continue;
    for (const ext of extensions) {
      const file = path.resolve(dir, name + ext);
      if (isExecutable(file, platform)) return file;
    }
  }
  return undefined;
}

function isExecutable(file: string, platform: NodeJS.Platform): boolean {
  try {
    if (!statSync(file).isFile()) return false;
    if (platform !== "win32") accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** `dir` without symlinks (absolute), or resolved as written when it cannot be read. */
function realPath(dir: string): string {
  try {
    return realpathSync(dir);
  } catch {
    return path.resolve(dir);
  }
}

/** `file` relative to the project root when inside it (`.venv/bin/spotpatch-agent`), else its base name. */
function displayPath(file: string, projectRoot: string): string {
  const relative = path.relative(path.resolve(projectRoot), file);
  if (relative && !relative.startsWith("..") && !path.isAbsolute(relative)) return relative.split(path.sep).join("/");
  return path.basename(file);
}

/** Largest engine record read: a few hundred bytes in practice. */
const RECORD_MAX_BYTES = 64 * 1024;

/**
 * The engine `spotpatch-agent init` recorded: `{"command": ["/abs/spotpatch-agent", "serve"]}` in
 * `$XDG_CONFIG_HOME/spotpatch/engine.json` (a relative `XDG_CONFIG_HOME` is ignored, as the XDG spec says),
 * else `<home>/.config/spotpatch/engine.json`. `file` is set only for an absolute path; `note` says why a
 * record that exists was not usable (never its content: it names a path of the user's machine).
 */
export function recordedEngine(env: NodeJS.ProcessEnv, home: string): { file: string | undefined; note: string | undefined } {
  const xdg = env.XDG_CONFIG_HOME;
  const base = xdg && path.isAbsolute(xdg) ? xdg : path.join(home, ".config");
  const file = path.join(base, "spotpatch", "engine.json");
  let text: string;
  try {
    const stats = statSync(file);
    if (!stats.isFile()) return { file: undefined, note: `${INIT_RECORD} is not a file: run spotpatch-agent init again` }; // a FIFO would block the read
    if (stats.size > RECORD_MAX_BYTES) return { file: undefined, note: `${INIT_RECORD} is too large to be the record` };
    text = readFileSync(file, "utf8");
  } catch {
    return { file: undefined, note: undefined }; // no record: init was not run (or not as this user)
  }
  try {
    const record: unknown = JSON.parse(text);
    const command = typeof record === "object" && record !== null ? (record as { command?: unknown }).command : undefined;
    const first = Array.isArray(command) ? (command[0] as unknown) : undefined;
    if (typeof first === "string" && path.isAbsolute(first)) return { file: first, note: undefined };
  } catch {
    /* not JSON: said below */
  }
  return { file: undefined, note: `${INIT_RECORD} is not a record init wrote: run spotpatch-agent init again` };
}
