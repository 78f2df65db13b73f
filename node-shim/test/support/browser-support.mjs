// Browser fixtures for the overlay tests (issue 13): Debian's Chromium driven by playwright-core (never a
// downloaded browser), a temp git copy of an app served by a real `vite dev` with the plugin, the real
// engine and the scripted provider (test/support/support.mjs does the project, provider and server parts).
// Every helper registers its cleanup with the node:test context `t` (t.after).
//
// Apps (`openApp({ app })`):
//   "demo"                        spotpatch_agent/demo/app (React + TS), with @vitejs/plugin-react
//   a folder under test/apps/     its framework plugin chosen from its package.json dependencies
//                                 (react, preact, solid, vue, svelte; none = plain HTML)
//   a create-vite template name   "vue-ts", "svelte-ts", "vanilla", … copied from
//                                 node_modules/create-vite/template-<name> (`_gitignore` → `.gitignore`)
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

import react from "@vitejs/plugin-react";
import { chromium } from "playwright-core";

import { DEMO_APP, NODE_SHIM, makeDemoProject, providerConfig, startDevServer, startProvider } from "./support.mjs";

export const CHROMIUM = process.env.SPOTPATCH_CHROMIUM ?? "/usr/bin/chromium";
export const APPS = fileURLToPath(new URL("../apps/", import.meta.url));
export const TEMPLATES = path.join(NODE_SHIM, "node_modules", "create-vite");
export const ARTIFACTS = path.join(NODE_SHIM, "test-artifacts");
/** The overlay's host element (see docs/node-shim.md). */
export const HOST = "spotpatch-overlay";

/** Flags for a quiet, self-contained headless run: no sandbox (containers), GPU, QUIC, sync or updates. */
export const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/**
 * Debian's Chromium (`/usr/bin/chromium`, or `$SPOTPATCH_CHROMIUM`) with a fresh profile (playwright's
 * `launch` makes a new user-data-dir each time); closed after the test. `opts` go to `chromium.launch`.
 */
export async function launchBrowser(t, opts = {}) {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`no Chromium at ${CHROMIUM}: install Debian's chromium (tests/run.sh does) or set SPOTPATCH_CHROMIUM`);
  }
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    ...opts,
    args: [...CHROMIUM_ARGS, ...(opts.args ?? [])],
  });
  t.after(() => browser.close());
  return browser;
}

/** Where app `name` comes from and which framework plugins serve it. */
export async function appSource(name) {
  if (name === "demo") return { source: DEMO_APP, plugins: [react()], template: false };
  const own = path.join(APPS, name);
  const template = path.join(TEMPLATES, `template-${name}`);
  const source = existsSync(own) ? own : existsSync(template) ? template : undefined;
  if (!source) throw new Error(`unknown app "${name}": not "demo", a folder under test/apps/ or a create-vite template`);
  return { source, plugins: await frameworkPlugins(source), template: source === template };
}

/** The Vite plugins for the framework named in `source/package.json` (none for plain HTML). */
async function frameworkPlugins(source) {
  const manifest = path.join(source, "package.json");
  const pkg = existsSync(manifest) ? JSON.parse(readFileSync(manifest, "utf8")) : {};
  const deps = { ...pkg.dependencies, ...pkg.devDependencies };
  if (deps.vue || deps["@vitejs/plugin-vue"]) return [(await import("@vitejs/plugin-vue")).default()];
  if (deps.svelte || deps["@sveltejs/vite-plugin-svelte"]) return [(await import("@sveltejs/vite-plugin-svelte")).svelte()];
  if (deps.preact || deps["@preact/preset-vite"]) return (await import("@preact/preset-vite")).default();
  if (deps["solid-js"] || deps["vite-plugin-solid"]) return [(await import("vite-plugin-solid")).default()];
  if (deps.react || deps["@vitejs/plugin-react"]) return [react()];
  return [];
}

/**
 * A create-vite template as `npm create vite` leaves it: `_gitignore` becomes `.gitignore`. Its
 * tsconfig presets (`@vue/tsconfig`, `@tsconfig/svelte`) are not installed here, and Vite's transform
 * fails on an `extends` it cannot find, so the `extends` line is dropped (type-checking is not tested).
 */
export function prepareTemplate(root) {
  if (existsSync(path.join(root, "_gitignore"))) renameSync(path.join(root, "_gitignore"), path.join(root, ".gitignore"));
  for (const name of readdirSync(root).filter((n) => /^tsconfig.*\.json$/.test(n))) {
    const file = path.join(root, name);
    writeFileSync(file, readFileSync(file, "utf8").replace(/^\s*"extends":\s*"@[^"]+",?\n/m, ""));
  }
}

/**
 * A temp git copy of `app` served by `vite dev` with `spotpatch()` (the overlay on by default), the real
 * engine and (unless `script` is null) the scripted provider running `script`; a fresh browser context
 * (clipboard allowed, English) and a page at the app's URL, waiting until the overlay's host exists
 * (unless `options.overlay === false` or `waitForOverlay: false`).
 *
 * - `options`: more `spotpatch()` options (merged over the provider config; `providers: []` = AI off);
 * - `edit(root)`: change the copy before its one commit (e.g. add a hostile stylesheet);
 * - `contextOptions`: for `browser.newContext`; `browser`: reuse a browser from `launchBrowser`.
 *
 * `page.errors` collects the page's console errors and uncaught exceptions (strings), in order.
 * Returns `{ project, url, server, logger, provider, browser, context, page }`; `url` ends with "/".
 */
export async function openApp(
  t,
  { app = "demo", options = {}, edit, script = "demo", contextOptions = {}, browser, waitForOverlay = true } = {},
) {
  const { source, plugins, template } = await appSource(app);
  const project = makeDemoProject(t, {
    source,
    edit(root) {
      if (template) prepareTemplate(root);
      edit?.(root);
    },
  });
  const provider = script === null ? undefined : await startProvider(t, script);
  const { server, url, logger } = await startDevServer(t, project, {
    options: { ...(provider ? providerConfig(provider.baseUrl) : {}), ...options },
    plugins,
    optimizeDeps: {}, // pre-bundled dependencies, as a browser needs them (React is CommonJS)
  });
  browser ??= await launchBrowser(t);
  const context = await browser.newContext({
    locale: "en-US",
    permissions: ["clipboard-read", "clipboard-write"],
    ...contextOptions,
  });
  t.after(() => context.close());
  const page = await newPage(context);
  await page.goto(`${url}/`);
  if (waitForOverlay && options.overlay !== false) {
    await page.waitForSelector(HOST, { state: "attached", timeout: 15_000 }).catch((error) => {
      throw new Error(`the overlay's <${HOST}> never appeared (page errors: ${JSON.stringify(page.errors)}): ${error.message}`);
    });
  }
  return { project, url: `${url}/`, server, logger, provider, browser, context, page };
}

/** A page of `context` whose console errors and uncaught exceptions land in `page.errors`. */
export async function newPage(context) {
  const page = await context.newPage();
  page.errors = [];
  page.on("console", (message) => {
    if (message.type() !== "error") return;
    const where = message.location()?.url ?? "";
    if (/\/favicon\.ico$/.test(where)) return; // Chromium asks for one; the apps have none
    page.errors.push(`console: ${message.text()}${where ? ` (${where})` : ""}`);
  });
  page.on("pageerror", (error) => page.errors.push(`pageerror: ${error.message}`));
  return page;
}

/** A screenshot of `page` at node-shim/test-artifacts/<name>.png (gitignored); returns its path. */
export async function shot(page, name, opts = {}) {
  mkdirSync(ARTIFACTS, { recursive: true });
  const file = path.join(ARTIFACTS, `${name}.png`);
  await page.screenshot({ path: file, ...opts });
  return file;
}

const AXE = path.join(NODE_SHIM, "node_modules", "axe-core", "axe.min.js");

/**
 * axe-core run inside the page against the overlay's host (its open shadow root included), WCAG A/AA
 * and best-practice rules. Returns every violation (`{id, impact, help, nodes: [{target, html}]}`);
 * tests usually assert none is "serious" or "critical" (see `seriousViolations`).
 */
export async function axeScan(page, { selector = HOST } = {}) {
  if (!(await page.evaluate(() => typeof window.axe === "object"))) {
    await page.addScriptTag({ content: readFileSync(AXE, "utf8") });
  }
  return page.evaluate(async (selector) => {
    const host = document.querySelector(selector);
    if (!host) throw new Error(`no ${selector} in the page`);
    const result = await window.axe.run(host, { resultTypes: ["violations"] });
    return result.violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      nodes: v.nodes.map((n) => ({ target: n.target, html: n.html, summary: n.failureSummary })),
    }));
  }, selector);
}

/** The violations of `axeScan` that are serious or critical. */
export function seriousViolations(violations) {
  return violations.filter((v) => v.impact === "serious" || v.impact === "critical");
}
