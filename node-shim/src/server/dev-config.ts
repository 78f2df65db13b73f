/**
 * The configuration around one dev server (docs/node-shim.md "One configuration" and "Vite's watcher"):
 *
 * - `venvWatchIgnore`: the `config()` contribution that keeps the project's own virtualenvs (`.venv/`,
 *   `venv/` at Vite's root and at the project root) out of Vite's file watcher, added to the user's
 *   `server.watch.ignored` (Vite concatenates the lists), never replacing it;
 * - `watchConfigFile`: `spotpatch.config.json` is watched; a valid change restarts the dev server the
 *   way Vite does for its own config (`server.restart()`), after the jobs the engine is working on and
 *   after the jobs the user has not closed yet (a review awaiting Apply is never dropped); an invalid one
 *   is said in the log in one block listing every problem and changes nothing;
 * - `missingKeyWarnings`: one line per configured provider whose key variable is unset (its name, never
 *   a value), for the Vite log at start.
 */

import { realpathSync } from "node:fs";
import path from "node:path";

import type { UserConfig, ViteDevServer } from "vite";

import { CONFIG_FILE, ConfigFileError, configProblemBlock, mergeConfig, readConfigFile } from "./config-file.js";
import type { EngineLogger } from "./engine.js";
import { VENV_DIRS } from "./engine-locate.js";
import type { TrustedConfig } from "../protocol/protocol.generated.js";
import type { EngineSupervisor } from "./supervisor.js";

/** Quiet time after the last event on the file before it is read (an editor's save can be two writes). */
const SETTLE_MS = 100;

/**
 * What the `config()` hook returns: a matcher ignoring `<root>/.venv`, `<root>/venv` and everything in
 * them, for each of `roots`, to be concatenated with the user's `server.watch.ignored` by Vite's
 * `mergeConfig`. Nothing when the user turned the watcher off (`server.watch: null`): a returned object
 * would turn it back on.
 */
export function venvWatchIgnore(userConfig: UserConfig, roots: readonly string[]): UserConfig | undefined {
  if (userConfig.server?.watch === null) return undefined;
  return { server: { watch: { ignored: [venvMatcher(roots)] } } };
}

/** A chokidar `ignored` function: true for the virtualenv folders of `roots` and every path inside them. */
export function venvMatcher(roots: readonly string[]): (file: string) => boolean {
  const dirs = [...new Set(roots.map((root) => path.resolve(root)))].flatMap((root) => VENV_DIRS.map((venv) => path.join(root, venv)));
  const ignoreVirtualenvs = (file: string): boolean => {
    const resolved = path.resolve(file);
    return dirs.some((dir) => resolved === dir || resolved.startsWith(dir + path.sep));
  };
  return ignoreVirtualenvs;
}

/** Vite warn lines for the providers of `config` whose `apiKeyEnv` is unset or empty (the engine's rule). */
export function missingKeyWarnings(config: TrustedConfig, env: NodeJS.ProcessEnv = process.env): string[] {
  return (config.providers ?? [])
    .filter((provider) => !env[provider.apiKeyEnv])
    .map(
      (provider) =>
        `[spotpatch] AI is off for provider "${provider.id}": its API key variable ${provider.apiKeyEnv} is not set. ` +
        `Set ${provider.apiKeyEnv} in the environment of the Vite process and restart Vite; \`spotpatch-agent doctor\` checks it.`,
    );
}

export interface ConfigWatch {
  /** The project root (the git top level), where the file lives. */
  projectRoot: string;
  /** The trusted keys given as plugin options (they win over the file's, src/server/config-file.ts). */
  options: TrustedConfig;
  /** The trusted config this dev-server instance's engine gets; undefined while the file is invalid (SpotPatch off). */
  current: TrustedConfig | undefined;
  supervisor: EngineSupervisor;
  logger: EngineLogger;
}

/**
 * Watch `<projectRoot>/spotpatch.config.json` (with Vite's watcher, the file added to it when the project
 * root is above Vite's root) and act on each change, creation or removal. Returns `stop` (the instance is closing).
 */
export function watchConfigFile(server: ViteDevServer, watch: ConfigWatch): () => void {
  const file = path.join(watch.projectRoot, CONFIG_FILE);
  const { logger, supervisor } = watch;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let busy = false; // a change is being handled (possibly waiting for a job)
  let again = false; // another event arrived meanwhile: handle the file again afterwards

  const isTheFile = (changed: string): boolean => {
    const resolved = path.resolve(changed);
    if (resolved === file) return true;
    if (path.basename(resolved) !== CONFIG_FILE) return false;
    try {
      return realpathSync(path.dirname(resolved)) === realpathSync(watch.projectRoot);
    } catch {
      return false;
    }
  };
  const onEvent = (changed: string): void => {
    if (stopped || !isTheFile(changed)) return;
    clearTimeout(timer);
    timer = setTimeout(() => void handle(), SETTLE_MS);
  };

  async function handle(): Promise<void> {
    if (busy) {
      again = true;
      return;
    }
    busy = true;
    try {
      do {
        again = false;
        await handleOnce();
      } while (again && !stopped);
    } catch (error) {
      logger.error(`[spotpatch] ${CONFIG_FILE} changed, but the dev server could not restart: ${(error as Error).message}`);
    } finally {
      busy = false;
    }
  }

  async function handleOnce(): Promise<void> {
    if (stopped) return;
    let next: TrustedConfig;
    try {
      next = mergeConfig(watch.options, readConfigFile(watch.projectRoot));
    } catch (error) {
      if (!(error instanceof ConfigFileError)) throw error;
      // The block of a start with this file; the running instance (and its engine) stays as it was.
      const off = watch.current === undefined;
      logger.error(
        configProblemBlock(
          error,
          off
            ? "SpotPatch stays off until the file is fixed; the app runs without it."
            : "The previous configuration stays in use until the file is fixed.",
        ),
      );
      logger.warn(
        `[spotpatch] ${CONFIG_FILE} changed: not restarting (the file is invalid, see above); ` +
          (off ? "SpotPatch stays off until it is fixed." : "the previous configuration stays in use until it is fixed."),
      );
      return;
    }
    if (JSON.stringify(next) === JSON.stringify(watch.current)) {
      logger.info(`[spotpatch] ${CONFIG_FILE} changed: no restart needed (the engine's configuration is the same; keys given in spotpatch() win over the file)`);
      return;
    }
    const idle = supervisor.whenIdle();
    const { working } = supervisor.jobsAtRisk();
    if (working.length) {
      logger.info(`[spotpatch] ${CONFIG_FILE} changed: restarting once the engine has finished job ${working.join(", ")}`);
      await idle;
      again = true; // read the file again: it may have changed while the job ran
      return;
    }
    await idle; // a page request being answered (not cut off by the restart)
    // A review awaiting Apply (or an applied job that can still be reverted) lives only in the engine: the
    // restart waits until the user has closed it, and the file is read again then (issue 26).
    const { held } = supervisor.jobsAtRisk();
    if (held.length) {
      logger.info(
        `[spotpatch] ${CONFIG_FILE} changed: restarting once job ${held.join(", ")} is closed in the panel ` +
          "(Apply or Cancel, then Done; the review stays until then). Restart Vite to apply the new configuration now (the review is then lost).",
      );
      await supervisor.whenSettled();
      again = true;
      return;
    }
    logger.info(`[spotpatch] ${CONFIG_FILE} changed: restarting`);
    const before = server.config;
    stopped = true; // this instance is being replaced: its watcher closes with it
    await server.restart();
    // Vite keeps the old server when the new one fails to start (it logs why): keep watching then.
    if (server.config === before) stopped = false;
  }

  // Vite watches its root: the file there (or below) is seen already. `watcher.add` only for a project
  // root above Vite's (a monorepo package): chokidar 3, given a missing file inside a folder it already
  // watches, stops reporting new folders there.
  if (!isInside(file, server.config.root)) server.watcher.add(file);
  for (const event of ["add", "change", "unlink"] as const) server.watcher.on(event, onEvent);
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}

/** Whether `file` is `dir` or inside it. */
function isInside(file: string, dir: string): boolean {
  const relative = path.relative(path.resolve(dir), path.resolve(file));
  return !relative.startsWith("..") && !path.isAbsolute(relative);
}
