/**
 * `spotpatch:server` (DESIGN.md §15): dev server only (`apply: 'serve'`). Per dev-server instance it
 * makes a session token, mounts the `/__spotpatch/` endpoints, injects the client module into the page
 * (`transformIndexHtml` + the virtual module `virtual:spotpatch/client`, the only place the token is
 * delivered), owns the engine process through an `EngineSupervisor`, and tears it all down when the
 * instance closes.
 *
 * "Per instance" matters because `server.restart()` builds a new server (new config, new
 * `configureServer` call) with the *same* plugin objects when the config is inline, then closes the
 * old one. Instances are therefore keyed by their resolved config, and teardown is wired to that
 * instance's own close signals: its environments' `closeBundle` and its HTTP server's `close`.
 */

import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import path from "node:path";

import { version as importedViteVersion, type Plugin, type ResolvedConfig, type ViteDevServer } from "vite";

import { createEndpoints, type Endpoints } from "./http.js";
import { accessPolicy, type AccessPolicy } from "./guard.js";
import { clientModuleGuard } from "./module-guard.js";
import { engineCommand, type ResolvedOptions } from "./options.js";
import { EngineSupervisor } from "./supervisor.js";
import { refusedClientSource, refusedEndpoints, runningViteVersion, viteVersionRefusal } from "./vite-version.js";

export const VIRTUAL_CLIENT_ID = "virtual:spotpatch/client";
const RESOLVED_CLIENT_ID = `\0${VIRTUAL_CLIENT_ID}`;
/** How the page loads the virtual module (Vite's `/@id/` URL, `\0` spelled `__x00__`). */
export const CLIENT_URL = `/@id/__x00__${VIRTUAL_CLIENT_ID}`;

const PACKAGE_VERSION = (JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string })
  .version;

/** One dev-server instance's SpotPatch state. */
class DevInstance {
  readonly token = randomBytes(32).toString("base64url");
  readonly policy: AccessPolicy;
  readonly supervisor: EngineSupervisor;
  readonly endpoints: Endpoints;
  private closing: Promise<void> | undefined;

  constructor(config: ResolvedConfig, options: ResolvedOptions, projectRoot: string) {
    this.policy = accessPolicy(config.server, options.allowRemoteAccess);
    this.supervisor = new EngineSupervisor({
      command: engineCommand(options.command, config.root),
      projectRoot,
      config: options.config,
      logger: config.logger,
      clientVersion: PACKAGE_VERSION,
    });
    this.endpoints = createEndpoints({ token: this.token, policy: this.policy, supervisor: this.supervisor });
  }

  /** Idempotent: ends the event streams and stops the engine. */
  close(): Promise<void> {
    this.closing ??= (async () => {
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

    configResolved: {
      order: "pre",
      handler(config) {
        const root = gitTopLevel(config.root);
        projectRoots.set(config, root);
        locateRoot.root = root;
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
      const instance = new DevInstance(config, options, projectRoots.get(config) ?? gitTopLevel(config.root));
      instances.set(config, instance);
      latest = instance;
      server.middlewares.use(instance.endpoints.middleware);
      server.middlewares.use(clientModuleGuard(server, instance.policy, instance.token));
      server.httpServer?.once("close", () => void instance.close());
      if (instance.policy.exposure && !instance.policy.allowRemoteAccess) {
        config.logger.warn(
          `[spotpatch] SpotPatch is off: ${instance.policy.exposure}. Serve on localhost, or opt in with spotpatch({ allowRemoteAccess: true }).`,
        );
      }
    },

    resolveId(id) {
      return id === VIRTUAL_CLIENT_ID ? RESOLVED_CLIENT_ID : undefined;
    },

    load(id) {
      if (id !== RESOLVED_CLIENT_ID) return undefined;
      if (viteRefusal) return refusedClientSource(viteRefusal);
      const instance = instanceOf(this) ?? latest; // the newest instance when the hook has no environment
      if (!instance) return undefined;
      return clientModuleSource(instance.token);
    },

    transformIndexHtml: {
      order: "pre",
      handler() {
        return [{ tag: "script", attrs: { type: "module", src: CLIENT_URL }, injectTo: "head" }];
      },
    },

    // Runs for each environment when its dev server instance closes (also on `server.restart()`);
    // only that instance is closed (the HTTP server's "close" covers hosts without environments).
    async closeBundle() {
      await instanceOf(this)?.close();
    },
  };
}

/** `dist/client.js` plus one line creating this instance's client. The token appears nowhere else. */
function clientModuleSource(token: string): string {
  const client = readFileSync(new URL("./client.js", import.meta.url), "utf8").replace(/^\/\/# sourceMappingURL=.*$/m, "");
  return (
    `${client}\n` +
    `/** The client of this dev-server start (its session token lives only in this module). */\n` +
    `export const spotpatch = createSpotPatchClient({ token: ${JSON.stringify(token)}, base: "/__spotpatch" });\n`
  );
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
