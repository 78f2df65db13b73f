/**
 * `spotpatch:server` (docs/design.md §15): dev server only (`apply: 'serve'`). Per dev-server instance it
 * reads `spotpatch.config.json` under the options (src/server/config-file.ts) and watches it (src/server/dev-config.ts:
 * a change restarts the dev server), keeps the project's virtualenvs out of Vite's watcher, warns about
 * unset key variables, looks the engine up and says at
 * once when it is missing (src/server/engine-locate.ts), makes a session token, mounts the `/__spotpatch/`
 * endpoints, injects the page's code, owns the engine process through an `EngineSupervisor`, and tears
 * it all down when the instance closes.
 *
 * The page's code is three virtual modules: `virtual:spotpatch/client` (the typed client, the only
 * place the token is delivered), `virtual:spotpatch/loader` (the overlay's small page-load part,
 * `dist/overlay-loader.js`, started with the client and the overlay options) and
 * `virtual:spotpatch/overlay` (the overlay itself, `dist/overlay.js`, imported by the loader on first
 * open). `transformIndexHtml` injects the loader, or only the client with `overlay: false`.
 *
 * "Per instance" matters because `server.restart()` builds a new server (new config, new
 * `configureServer` call) with the *same* plugin objects when the config is inline, then closes the
 * old one. Instances are therefore keyed by their resolved config, and teardown is wired to that
 * instance's own close signals: its environments' `closeBundle` and its HTTP server's `close`.
 */

import { execFileSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import path from "node:path";

import { version as importedViteVersion, type Plugin, type ResolvedConfig, type ViteDevServer } from "vite";

import { ConfigFileError, configProblemBlock, configProblemForPage, mergeConfig, readConfigFile } from "./config-file.js";
import { missingKeyWarnings, venvWatchIgnore, watchConfigFile } from "./dev-config.js";
import { locateEngine } from "./engine-locate.js";
import { createEndpoints, type Endpoints } from "./http.js";
import { accessPolicy, type AccessPolicy } from "./guard.js";
import { clientModuleGuard } from "./module-guard.js";
import { engineCommand, type ResolvedOptions } from "./options.js";
import type { OverlayOptions } from "../protocol/overlay.js";
import { EngineSupervisor } from "./supervisor.js";
import { refusedClientSource, refusedEndpoints, runningViteVersion, viteVersionRefusal } from "./vite-version.js";

export const VIRTUAL_CLIENT_ID = "virtual:spotpatch/client";
const RESOLVED_CLIENT_ID = `\0${VIRTUAL_CLIENT_ID}`;
/** How the page loads the virtual module (Vite's `/@id/` URL, `\0` spelled `__x00__`). */
export const CLIENT_URL = `/@id/__x00__${VIRTUAL_CLIENT_ID}`;
export const VIRTUAL_LOADER_ID = "virtual:spotpatch/loader";
export const LOADER_URL = `/@id/__x00__${VIRTUAL_LOADER_ID}`;
export const VIRTUAL_OVERLAY_ID = "virtual:spotpatch/overlay";
/** modern-screenshot (`dist/overlay-screenshot.js`), imported by the overlay on its first picture (issue 26). */
export const VIRTUAL_SCREENSHOT_ID = "virtual:spotpatch/screenshot";
const VIRTUAL_IDS = new Set([VIRTUAL_CLIENT_ID, VIRTUAL_LOADER_ID, VIRTUAL_OVERLAY_ID, VIRTUAL_SCREENSHOT_ID]);

const PACKAGE_VERSION = (JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string })
  .version;

/** One dev-server instance's SpotPatch state. */
class DevInstance {
  readonly token = randomBytes(32).toString("base64url");
  readonly policy: AccessPolicy;
  readonly supervisor: EngineSupervisor;
  readonly endpoints: Endpoints;
  /** The overlay options handed to the page (`projectKey` from the project root), or false. */
  readonly overlay: OverlayOptions | false;
  /** Stops watching spotpatch.config.json (set by `configureServer`). */
  stopWatching: (() => void) | undefined;
  private closing: Promise<void> | undefined;

  /** Set when spotpatch.config.json cannot be used: SpotPatch is off, every endpoint says why, the panel lists it. */
  readonly problem: ConfigFileError | undefined;

  constructor(
    config: ResolvedConfig,
    options: ResolvedOptions,
    projectRoot: string,
    trusted: ResolvedOptions["config"],
    problem?: ConfigFileError,
  ) {
    this.problem = problem;
    this.overlay = options.overlay && {
      ...options.overlay,
      projectKey: projectKey(projectRoot),
      ...(problem ? { configProblem: configProblemForPage(problem) } : {}),
    };
    this.policy = accessPolicy(config.server, options.allowRemoteAccess);
    const { commandSource } = options;
    const given = commandSource === "default" ? undefined : { command: options.command, source: commandSource };
    this.supervisor = new EngineSupervisor({
      command: engineCommand(options.command, config.root),
      locate: () => locateEngine({ given, root: config.root, projectRoot }),
      projectRoot,
      config: trusted,
      logger: config.logger,
      clientVersion: PACKAGE_VERSION,
    });
    this.endpoints = problem
      ? { middleware: configRefusal(problem), close: () => undefined }
      : createEndpoints({ token: this.token, policy: this.policy, supervisor: this.supervisor });
  }

  /** Idempotent: ends the event streams and stops the engine. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.stopWatching?.();
      this.endpoints.close();
      await this.supervisor.close();
    })();
    return this.closing;
  }
}

/**
 * `locateRoot` is the options object handed to `spotpatchLocate`: its `root` is set to the project
 * root here (before the locator's own `configResolved`), so `data-spotpatch-loc` paths are relative to
 * the same directory the engine calls its project root.
 */
export function spotpatchServer(options: ResolvedOptions, locateRoot: { root?: string }): Plugin {
  const projectRoots = new WeakMap<ResolvedConfig, string>();
  const trustedConfigs = new WeakMap<ResolvedConfig, ResolvedOptions["config"]>();
  const configProblems = new WeakMap<ResolvedConfig, ConfigFileError>();
  const instances = new WeakMap<ResolvedConfig, DevInstance>();
  let latest: DevInstance | undefined;
  let viteRefusal: string | undefined; // set when the running Vite is one SpotPatch must not run on

  /** The instance of the environment a hook runs in (Vite ≥ 6). */
  const instanceOf = (context: unknown): DevInstance | undefined => {
    const environment = (context as { environment?: { getTopLevelConfig?: () => ResolvedConfig } } | undefined)?.environment;
    const config = environment?.getTopLevelConfig?.();
    return config ? instances.get(config) : undefined;
  };

  return {
    name: "spotpatch:server",
    apply: "serve",

    // The project's own virtualenvs are no source: kept out of Vite's watcher (the engine's package
    // carries a demo app with a tsconfig.json, and a venv holds thousands of files). Added to the
    // user's `server.watch.ignored`, which Vite's mergeConfig keeps (src/server/dev-config.ts).
    config(userConfig) {
      const root = path.resolve(userConfig.root ?? process.cwd());
      return venvWatchIgnore(userConfig, [root, gitTopLevel(root)]);
    },

    configResolved: {
      order: "pre",
      handler(config) {
        const root = gitTopLevel(config.root);
        projectRoots.set(config, root);
        locateRoot.root = root;
        // spotpatch.config.json under the options (docs/node-shim.md "One configuration"). An invalid file
        // never stops the dev server: SpotPatch is off and says why (configureServer), the app runs.
        const read = readTrusted(options.config, root);
        if (read instanceof ConfigFileError) configProblems.set(config, read);
        else trustedConfigs.set(config, read);
      },
    },

    configureServer(server: ViteDevServer) {
      const config = server.config;
      viteRefusal = viteVersionRefusal(runningViteVersion(this, importedViteVersion));
      if (viteRefusal) {
        config.logger.error(`[spotpatch] ${viteRefusal}`);
        server.middlewares.use(refusedEndpoints(viteRefusal));
        return; // no token, no engine
      }
      const root = projectRoots.get(config) ?? gitTopLevel(config.root);
      let problem = configProblems.get(config);
      let trusted = trustedConfigs.get(config);
      if (!trusted && !problem) {
        const read = readTrusted(options.config, root);
        if (read instanceof ConfigFileError) problem = read;
        else trusted = read;
      }
      const instance = new DevInstance(config, options, root, trusted ?? options.config, problem);
      instances.set(config, instance);
      latest = instance;
      server.middlewares.use(instance.endpoints.middleware);
      server.middlewares.use(clientModuleGuard(server, instance.policy, instance.token));
      server.httpServer?.once("close", () => void instance.close());
      // spotpatch.config.json is watched: a change restarts the dev server (docs/node-shim.md "One configuration").
      instance.stopWatching = watchConfigFile(server, {
        projectRoot: root,
        options: options.config,
        current: problem ? undefined : trusted,
        supervisor: instance.supervisor,
        logger: config.logger,
      });
      if (problem) {
        // One block listing every problem, as `spotpatch-agent doctor` does; the engine is never started.
        config.logger.error(
          configProblemBlock(problem, "SpotPatch is off until the file is fixed; the app runs without it. Saving the file restarts the dev server."),
        );
      } else if (instance.policy.exposure && !instance.policy.allowRemoteAccess) {
        config.logger.warn(
          `[spotpatch] SpotPatch is off: ${instance.policy.exposure}. Serve on localhost, or opt in with spotpatch({ allowRemoteAccess: true }).`,
        );
      } else {
        // The engine is not started before the page asks; only looked up (file-system checks), so a
        // missing engine is said at start, in the words the page will show.
        instance.supervisor.checkEngine(); // logs the problem, if any, once
        // A provider without its key variable: said now, naming the variable (never a value), not only on the page.
        for (const line of missingKeyWarnings(trusted ?? options.config)) config.logger.warn(line);
      }
    },

    resolveId(id) {
      const served = id === VIRTUAL_CLIENT_ID || (options.overlay !== false && VIRTUAL_IDS.has(id));
      return served ? `\0${id}` : undefined;
    },

    load(id) {
      if (!id.startsWith("\0") || !VIRTUAL_IDS.has(id.slice(1))) return undefined;
      if (viteRefusal) return refusedClientSource(viteRefusal); // every SpotPatch module only reports it
      const instance = instanceOf(this) ?? latest; // the newest instance when the hook has no environment
      if (!instance) return undefined;
      // `mappings: ""`: no source map. Vite would otherwise append an inline map of the module to itself
      // (its whole text again, base64: 1 MB more for the overlay), which maps nothing useful.
      const noMap = { mappings: "" } as const;
      if (id === RESOLVED_CLIENT_ID) return { code: clientModuleSource(instance.token), map: noMap };
      if (!instance.overlay) return undefined; // `overlay: false`: nothing but the client exists
      const code =
        id === `\0${VIRTUAL_LOADER_ID}`
          ? loaderModuleSource(instance.overlay)
          : id === `\0${VIRTUAL_SCREENSHOT_ID}`
            ? distFile("overlay-screenshot.js")
            : overlayModuleSource();
      return { code, map: noMap };
    },

    transformIndexHtml: {
      order: "pre",
      handler() {
        const src = options.overlay ? LOADER_URL : CLIENT_URL;
        return [{ tag: "script", attrs: { type: "module", src }, injectTo: "head" }];
      },
    },

    // Runs for each environment when its dev server instance closes (also on `server.restart()`);
    // only that instance is closed (the HTTP server's "close" covers hosts without environments).
    async closeBundle() {
      await instanceOf(this)?.close();
    },
  };
}

/** The trusted config of the options over `<root>/spotpatch.config.json`, or why the file cannot be used. */
function readTrusted(fromOptions: ResolvedOptions["config"], root: string): ResolvedOptions["config"] | ConfigFileError {
  try {
    return mergeConfig(fromOptions, readConfigFile(root));
  } catch (error) {
    if (error instanceof ConfigFileError) return error;
    throw error;
  }
}

/** Answers every `/__spotpatch/` request with `503 CONFIG_INVALID` (the file's problems); passes the rest on. */
function configRefusal(problem: ConfigFileError): Endpoints["middleware"] {
  const message = `SpotPatch is off: ${problem.message.replace(/^vite-plugin-spotpatch: /, "")} Fix the file and save it.`;
  return refusedEndpoints(message, "CONFIG_INVALID");
}

/** `dist/protocol/client.js` plus one line creating this instance's client. The token appears nowhere else. */
function clientModuleSource(token: string): string {
  const client = distFile("protocol/client.js");
  return (
    `${client}\n` +
    `/** The client of this dev-server start (its session token lives only in this module). */\n` +
    `export const spotpatch = createSpotPatchClient({ token: ${JSON.stringify(token)}, base: "/__spotpatch" });\n`
  );
}

/** A built file of this package (`dist/<name>`) without its source-map comment. */
function distFile(name: string): string {
  return readFileSync(new URL(`../${name}`, import.meta.url), "utf8").replace(/^\/\/# sourceMappingURL=.*$/m, "");
}

/**
 * `dist/overlay-loader.js` started with this page's client and `options` (docs/node-shim.md "The
 * overlay"). The bundle exports `startLoader` under a minified local name, read off its export list.
 */
function loaderModuleSource(options: OverlayOptions): string {
  const loader = distFile("overlay-loader.js");
  const local = exportedLocal(loader, "startLoader");
  return (
    `${loader}\n` +
    `import { spotpatch as __spotpatchClient } from "${VIRTUAL_CLIENT_ID}";\n` +
    `${local}({ client: __spotpatchClient, load: () => import("${VIRTUAL_OVERLAY_ID}"), options: ${JSON.stringify(options)} });\n`
  );
}

/** `dist/overlay.js`: the overlay (`mountOverlay`), imported by the loader on first open. */
function overlayModuleSource(): string {
  return distFile("overlay.js");
}

/**
 * The local binding a module exports as `name` (`export { o as startLoader }` → `o`, `export function
 * startLoader` → `startLoader`); throws when absent.
 */
export function exportedLocal(source: string, name: string): string {
  if (new RegExp(`\\bexport\\s+(?:async\\s+)?function\\s+${name}\\b`).test(source)) return name;
  for (const match of source.matchAll(/export\s*\{([^}]*)\}/g)) {
    for (const spec of match[1]!.split(",")) {
      const [local, exported = local] = spec.trim().split(/\s+as\s+/);
      if (exported?.trim() === name && local) return local.trim();
    }
  }
  throw new Error(`vite-plugin-spotpatch: the built overlay loader does not export ${name} (rebuild the package)`);
}

/** A short, stable key for the project root (12 hex digits of its SHA-256): per-project storage, never the path. */
export function projectKey(root: string): string {
  return createHash("sha256").update(root).digest("hex").slice(0, 12);
}

/** The git top level of `dir` (git's spelling, normalised), or `dir` itself outside a repository. */
export function gitTopLevel(dir: string): string {
  try {
    const out = execFileSync("git", ["rev-parse", "--show-toplevel"], {
      cwd: dir,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
      timeout: 10_000,
      windowsHide: true,
    }).trim();
    return out ? path.resolve(out) : dir;
  } catch {
    return dir;
  }
}
