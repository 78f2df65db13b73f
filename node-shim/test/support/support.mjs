// Shared fixtures for the plugin tests: a temp git copy of the demo app, a scripted provider (Python),
// a real Vite dev server with the plugin, the page's session token, and engine-process inspection.
// Every helper registers its cleanup with the node:test context `t` (t.after), so nothing outlives a test.
import { execFile, execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { cpSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import react from "@vitejs/plugin-react";
import { createServer } from "vite";

import { spotpatch } from "../../dist/index.js";
import { createSpotPatchClient, TOKEN_HEADER } from "../../dist/protocol/client.js";

export const NODE_SHIM = fileURLToPath(new URL("../..", import.meta.url));
export const REPO = path.resolve(NODE_SHIM, "..");
export const DEMO_APP = path.join(REPO, "spotpatch_agent", "demo", "app");
export const AGENT = path.resolve(NODE_SHIM, process.env.SPOTPATCH_AGENT_COMMAND ?? "../.venv/bin/spotpatch-agent");
export const PYTHON = path.resolve(NODE_SHIM, process.env.SPOTPATCH_PYTHON ?? "../.venv/bin/python");
export const KEY_ENV = "SPOTPATCH_TEST_PROVIDER_KEY";
export const TOUCHED = "src/components/ProductCard.tsx";
export const CLIENT_URL = "/@id/__x00__virtual:spotpatch/client";
export const LOADER_URL = "/@id/__x00__virtual:spotpatch/loader";
export const OVERLAY_URL = "/@id/__x00__virtual:spotpatch/overlay";

/** A canary provider key: set in this process's environment (the engine inherits it), never expected in any output. */
export const CANARY = `sk-canary-${randomBytes(12).toString("hex")}`;
process.env[KEY_ENV] = CANARY;

const GIT_ID = ["-c", "user.name=SpotPatch Test", "-c", "user.email=test@spotpatch.invalid"];

/**
 * A temp dir holding `app/` (a one-commit git copy of the demo app, or of the folder `source`,
 * `node_modules` symlinked to node-shim's) and `vite-cache/` (Vite's cacheDir, outside the repository).
 * `edit(appDir)` may change files before the commit.
 */
export function makeDemoProject(t, { edit, source = DEMO_APP } = {}) {
  const dir = realpathSync(mkdtempSync(path.join(tmpdir(), "spotpatch-node-")));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const root = path.join(dir, "app");
  cpSync(source, root, {
    recursive: true,
    filter: (src) => !path.relative(source, src).split(path.sep).includes("node_modules"),
  });
  symlinkSync(path.join(NODE_SHIM, "node_modules"), path.join(root, "node_modules"), "dir");
  edit?.(root);
  for (const args of [["init", "-q", "-b", "main"], ["add", "-A"], [...GIT_ID, "commit", "-q", "-m", "demo app"]]) {
    execFileSync("git", args, { cwd: root, stdio: "ignore" });
  }
  return { dir, root, cacheDir: path.join(dir, "vite-cache") };
}

export function git(root, ...args) {
  return execFileSync("git", args, { cwd: root, encoding: "utf8" });
}

/** The scripted OpenAI-compatible provider (test/support/scripted_provider.py SCRIPT); stopped after the test. */
export async function startProvider(t, script = "demo") {
  const child = spawn(PYTHON, [fileURLToPath(new URL("./scripted_provider.py", import.meta.url)), script], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const exited = new Promise((resolve) => child.once("exit", resolve));
  t.after(async () => {
    child.stdin.end();
    const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
    await exited;
    clearTimeout(timer);
  });
  // The first line is the base URL; then "requests N" each time the provider has received a request.
  let requests = 0;
  const waiters = new Set();
  let first;
  const firstLine = new Promise((resolve) => (first = resolve));
  createInterface({ input: child.stdout }).on("line", (l) => {
    const m = /^requests (\d+)$/.exec(l);
    if (!m) return first(l);
    requests = Number(m[1]);
    for (const w of waiters) w();
  });
  const line = await Promise.race([
    firstLine,
    exited.then((code) => {
      throw new Error(`scripted provider exited early (${code})`);
    }),
  ]);
  if (!line?.startsWith("http://127.0.0.1:")) throw new Error(`scripted provider printed ${line}`);
  /** Resolves once the provider has received at least `n` requests (30 s at most). */
  const waitForRequests = (n) =>
    new Promise((resolve, reject) => {
      const check = () => {
        if (requests < n) return;
        waiters.delete(check);
        clearTimeout(timer);
        resolve(requests);
      };
      const timer = setTimeout(() => {
        waiters.delete(check);
        reject(new Error(`the provider received ${requests} request(s), not ${n}, in 30 s`));
      }, 30_000);
      waiters.add(check);
      check();
    });
  return { baseUrl: line, waitForRequests };
}

export function providerConfig(baseUrl) {
  return {
    providers: [
      {
        id: "scripted",
        displayName: "Scripted",
        api: "chat",
        baseUrl,
        apiKeyEnv: KEY_ENV,
        models: [{ id: "m1", model: "scripted-model", displayName: "Scripted model" }],
      },
    ],
  };
}

/** A logger that records every line (and a flat `text()` for canary checks). */
export function recordingLogger() {
  const lines = [];
  const warned = new Set();
  const log = (level) => (msg) => {
    lines.push({ level, msg: String(msg) });
  };
  return {
    lines,
    text: () => lines.map((l) => l.msg).join("\n"),
    info: log("info"),
    warn: log("warn"),
    warnOnce: (msg) => {
      if (!warned.has(msg)) {
        warned.add(msg);
        lines.push({ level: "warn", msg: String(msg) });
      }
    },
    error: log("error"),
    clearScreen() {},
    hasErrorLogged: () => false,
    hasWarned: false,
  };
}

/**
 * A listening Vite dev server on 127.0.0.1 (free port) for `project`, with `spotpatch(options)` and
 * `plugins` (default: React); closed after the test. `server` overrides `server` options. Dependency
 * pre-bundling is off unless `optimizeDeps` says otherwise (a browser needs it for CommonJS packages
 * such as React). Returns `{server, url, logger}`.
 */
export async function startDevServer(
  t,
  project,
  {
    options = {},
    server: serverOptions = {},
    logger = recordingLogger(),
    plugins = [react()],
    optimizeDeps = { noDiscovery: true, include: [] },
  } = {},
) {
  const server = await createServer({
    configFile: false,
    root: project.root,
    cacheDir: project.cacheDir,
    customLogger: logger,
    clearScreen: false,
    optimizeDeps,
    server: { host: "127.0.0.1", port: 0, strictPort: false, ...serverOptions },
    plugins: [spotpatch({ command: [AGENT, "serve"], ...options }), ...plugins],
  });
  t.after(() => server.close());
  await server.listen();
  return { server, url: serverUrl(server), logger };
}

export function serverUrl(server) {
  const address = server.httpServer.address();
  return `http://127.0.0.1:${address.port}`;
}

/**
 * What a page gets: the injected module (the overlay loader, which imports the client, or with
 * `overlay: false` the client itself), the client module, and its token.
 */
export async function pageSession(url) {
  const html = await (await fetch(`${url}/`)).text();
  if (html.includes(`src="${LOADER_URL}"`)) {
    const loader = await (await fetch(`${url}${LOADER_URL}`)).text();
    if (!loader.includes(`from "${CLIENT_URL}"`)) throw new Error(`the overlay loader does not import the client module:\n${loader.slice(-600)}`);
  } else if (!html.includes(`src="${CLIENT_URL}"`)) throw new Error(`the page does not load the client module:\n${html}`);
  const source = await (await fetch(`${url}${CLIENT_URL}`)).text();
  const token = /createSpotPatchClient\(\{ token: "([^"]+)"/.exec(source)?.[1];
  if (!token) throw new Error("no token in the client module");
  return { html, source, token, client: createSpotPatchClient({ token, base: `${url}/__spotpatch` }) };
}

/** A raw POST to `/__spotpatch/<path>` with full control over headers; returns `{status, body}`. */
export async function rawPost(url, route, body, { token, headers = {}, contentType = "application/json" } = {}) {
  const res = await fetch(`${url}/__spotpatch/${route}`, {
    method: "POST",
    headers: {
      ...(contentType ? { "Content-Type": contentType } : {}),
      ...(token ? { [TOKEN_HEADER]: token } : {}),
      ...headers,
    },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, body: json, text, headers: res.headers };
}

/** The demo annotation; `source` of each target can be replaced. */
export function demoAnnotation(sources = {}) {
  return {
    annotationId: "ann-node-1",
    pageUrl: "/",
    targets: [
      {
        index: 1,
        instruction: "Make the Save button the primary button (class `btn-primary`).",
        source: sources[1] ?? { file: TOUCHED, line: 12, column: 7 },
        element: { tagName: "button", text: "Save", attributes: { class: "btn btn-secondary" } },
      },
      {
        index: 2,
        instruction: "Show the price with two decimals.",
        source: sources[2] ?? { file: TOUCHED, line: 11, column: 7 },
        element: { tagName: "span", text: "$19.5", attributes: { class: "price" } },
      },
    ],
  };
}

/** Engine processes that are children of this test process: `[{pid, args}]`. */
export async function engineProcesses() {
  const { stdout } = await promisify(execFile)("ps", ["-A", "-o", "pid=,ppid=,args="]);
  return stdout
    .split("\n")
    .map((line) => /^\s*(\d+)\s+(\d+)\s+(.*)$/.exec(line))
    .filter((m) => m && Number(m[2]) === process.pid && /spotpatch[-_]agent/.test(m[3]) && /\bserve\b/.test(m[3]))
    .map((m) => ({ pid: Number(m[1]), args: m[3] }));
}

/** Whether `pid` is a running process (a zombie waiting for its reaper counts as gone). */
export function isAlive(pid) {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return true; // no /proc (macOS): trust kill(0)
  }
}

/** Poll `check` (sync or async) every 25 ms until it returns a truthy value; throws after `timeoutMs`. */
export async function waitFor(check, { timeoutMs = 15_000, what = "condition" } = {}) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Collect events of `client.watch(jobId)` until `until(event)` is true. */
export async function collectEvents(client, jobId, until, { afterSeq = 0, timeoutMs = 30_000 } = {}) {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), timeoutMs);
  const events = [];
  try {
    for await (const event of client.watch(jobId, { afterSeq, signal: controller.signal })) {
      events.push(event);
      if (until(event)) break;
    }
  } finally {
    clearTimeout(timer);
    controller.abort();
  }
  return events;
}

export const isStatus = (...statuses) => (event) => event.kind === "status" && statuses.includes(event.status);

export { readFileSync, writeFileSync };
